'use strict';
// THE STRATEGY: a simple, deterministic Mus player. Replace chooseAction() with your own; bot.js does the rest.
//
// chooseAction(request, rules) gets one DecisionRequest, as proto-loader decodes it (field names as in
// the .proto files, enums as their names, uint64 as strings; see proto.js), and the table's rules (the map
// of docs/rules.md section 14, values as text). It returns an Action message ({kind, amount, cards,
// has_jugada, senas}). It must choose within request.legal_actions, one entry per legal kind:
//   ENVIDO, MAS          amount in min_amount..max_amount (max_amount 0: no cap)
//   DISCARD              min_cards..max_cards distinct cards of view.cards
//   DECLARE              has_jugada = the entry's has_jugada (the one true answer)
//   MUS, NO_MUS, SENAS   up to max_senas señas, only from the entry's senas (the ones accepted now)
//   PASO, QUIERO, NO_QUIERO, ORDAGO   nothing more
// safeAction() is the fallback bot.js uses after a rejection or when chooseAction throws.
//
// How this one plays (docs/rules.md sections 2 and 6 for the hand values):
// - mus: cut (no mus) with a good hand (medias or duples, a 31 or 32, two reyes with a pair); mus otherwise;
// - discards: keep reyes, pairs and, with a juego in sight, the 10-point figures; throw the low cards;
// - señas: tell the partner every true seña that matters for the lances still to come, once per hand;
// - bets: a strength in 0..1 for the lance (own cards, a little for being mano, the partner's señas); open
//   and accept from a threshold, raise when strong, órdago or accept one only when very strong.

const LANCES = ['LANCE_GRANDE', 'LANCE_CHICA', 'LANCE_PARES', 'LANCE_JUEGO', 'LANCE_PUNTO'];

// The señas that inform each lance (docs/rules.md section 12.1).
const SENAS_FOR = {
  LANCE_GRANDE: ['SENA_DOS_REYES', 'SENA_MEDIAS_REYES', 'SENA_CUATRO_REYES', 'SENA_LA_BONITA'],
  LANCE_CHICA: ['SENA_DOS_ASES', 'SENA_MEDIAS_ASES', 'SENA_CUATRO_ASES'],
  LANCE_PARES: ['SENA_PARES', 'SENA_MEDIAS', 'SENA_DUPLES', 'SENA_DOS_REYES', 'SENA_MEDIAS_REYES', 'SENA_DOS_ASES',
    'SENA_MEDIAS_ASES', 'SENA_CUATRO_REYES', 'SENA_CUATRO_ASES'],
  LANCE_JUEGO: ['SENA_JUEGO', 'SENA_TREINTA_Y_UNA', 'SENA_LA_BONITA'],
  LANCE_PUNTO: ['SENA_TREINTA', 'SENA_VEINTINUEVE'],
};

// What a partner's seña says about the partnership's strength in a lance (a floor for our own estimate).
const SENA_STRENGTH = {
  SENA_DOS_REYES: { LANCE_GRANDE: 0.65, LANCE_PARES: 0.55 },
  SENA_MEDIAS_REYES: { LANCE_GRANDE: 0.85, LANCE_PARES: 0.8 },
  SENA_CUATRO_REYES: { LANCE_GRANDE: 0.95, LANCE_PARES: 0.95 },
  SENA_LA_BONITA: { LANCE_GRANDE: 0.85, LANCE_PARES: 0.8, LANCE_JUEGO: 0.9 },
  SENA_DOS_ASES: { LANCE_CHICA: 0.65, LANCE_PARES: 0.4 },
  SENA_MEDIAS_ASES: { LANCE_CHICA: 0.85, LANCE_PARES: 0.7 },
  SENA_CUATRO_ASES: { LANCE_CHICA: 0.95, LANCE_PARES: 0.85 },
  SENA_PARES: { LANCE_PARES: 0.45 },
  SENA_MEDIAS: { LANCE_PARES: 0.72 },
  SENA_DUPLES: { LANCE_PARES: 0.85 },
  SENA_JUEGO: { LANCE_JUEGO: 0.5 },
  SENA_TREINTA_Y_UNA: { LANCE_JUEGO: 0.9 },
  SENA_TREINTA: { LANCE_PUNTO: 0.85 },
  SENA_VEINTINUEVE: { LANCE_PUNTO: 0.7 },
};

const REY = 12;
const AS = 1;

// ------------------------------------------------------------------ hand values (docs/rules.md sections 2, 6)

// The effective rank: under deck_mode "8_reyes" (the default) a 3 is a rey and a 2 an as.
function effectiveRank(card, rules) {
  const rank = Number(card.rank);
  if ((rules.deck_mode || '8_reyes') === '8_reyes') {
    if (rank === 3) return REY;
    if (rank === 2) return AS;
  }
  return rank;
}

// Points for juego and punto: figures 10, others their face value.
function points(rank) {
  return rank >= 10 ? 10 : rank;
}

function ranksOf(cards, rules) {
  return cards.map((card) => effectiveRank(card, rules));
}

function countsOf(ranks) {
  const counts = new Map();
  for (const rank of ranks) counts.set(rank, (counts.get(rank) || 0) + 1);
  return counts;
}

// The pares class: 'duples' (two pairs or four of a kind), 'medias', 'par' or null; with the top rank involved.
function paresOf(ranks) {
  const groups = [...countsOf(ranks).entries()].filter(([, n]) => n >= 2).sort((a, b) => b[0] - a[0]);
  if (groups.length === 0) return null;
  if (groups.length === 2 || groups[0][1] === 4) return { kind: 'duples', rank: groups[0][0] };
  if (groups[0][1] === 3) return { kind: 'medias', rank: groups[0][0] };
  return { kind: 'par', rank: groups[0][0] };
}

function total(ranks) {
  return ranks.reduce((sum, rank) => sum + points(rank), 0);
}

// 0..1: how likely this hand alone wins the lance, roughly.
function handStrength(lance, ranks) {
  const count = (rank) => ranks.filter((r) => r === rank).length;
  switch (lance) {
    case 'LANCE_GRANDE': {
      const reyes = count(REY);
      const figures = ranks.filter((r) => r === 11 || r === 10).length;
      return [0.1 + 0.05 * figures, 0.35 + 0.05 * figures, 0.62 + 0.05 * figures, 0.85, 0.97][reyes];
    }
    case 'LANCE_CHICA': {
      const ases = count(AS);
      const low = ranks.filter((r) => r === 4 || r === 5).length;
      return [0.1 + 0.05 * low, 0.35 + 0.05 * low, 0.62 + 0.05 * low, 0.85, 0.97][ases];
    }
    case 'LANCE_PARES': {
      const pares = paresOf(ranks);
      if (pares === null) return 0;
      const high = pares.rank === REY ? 0.1 : pares.rank >= 10 ? 0.05 : 0;
      if (pares.kind === 'duples') return 0.85 + high;
      if (pares.kind === 'medias') return 0.68 + high;
      return 0.35 + 1.5 * high;
    }
    case 'LANCE_JUEGO': {
      const sum = total(ranks);
      return { 31: 0.92, 32: 0.75, 40: 0.62, 37: 0.5, 36: 0.45, 35: 0.4, 34: 0.35, 33: 0.3 }[sum] || 0;
    }
    case 'LANCE_PUNTO': {
      const sum = total(ranks);
      return sum >= 30 ? 0.9 : sum >= 27 ? 0.45 + (sum - 27) * 0.12 : Math.max(0.05, 0.4 - (27 - sum) * 0.05);
    }
    default:
      return 0;
  }
}

// ------------------------------------------------------------------ the decision

function chooseAction(request, rules) {
  const view = request.view;
  const legal = request.legal_actions;
  switch (request.kind) {
    case 'DECISION_KIND_MUS':
      return mus(view, legal, rules);
    case 'DECISION_KIND_DISCARD':
      return discard(view, entry(legal, 'ACTION_KIND_DISCARD'), rules);
    case 'DECISION_KIND_DECLARE':
      return { kind: 'ACTION_KIND_DECLARE', has_jugada: entry(legal, 'ACTION_KIND_DECLARE').has_jugada };
    case 'DECISION_KIND_SENA_ROUND':
      return { kind: 'ACTION_KIND_SENAS', senas: senasToSend(view, entry(legal, 'ACTION_KIND_SENAS')) };
    case 'DECISION_KIND_BET':
      return bet(view, legal, rules);
    default:
      return safeAction(request, legal);
  }
}

function entry(legal, kind) {
  const found = legal.find((action) => action.kind === kind);
  if (!found) throw new Error(`${kind} is not among the legal actions`);
  return found;
}

function has(legal, kind) {
  return legal.some((action) => action.kind === kind);
}

function mus(view, legal, rules) {
  const ranks = ranksOf(view.cards, rules);
  const pares = paresOf(ranks);
  const sum = total(ranks);
  const reyes = ranks.filter((r) => r === REY).length;
  const good =
    (pares !== null && pares.kind !== 'par') ||
    sum === 31 ||
    sum === 32 ||
    (reyes >= 2 && pares !== null) ||
    reyes >= 3 ||
    (sum >= 31 && pares !== null && pares.rank >= 10);
  const kind = good || !has(legal, 'ACTION_KIND_MUS') ? 'ACTION_KIND_NO_MUS' : 'ACTION_KIND_MUS';
  return { kind, senas: senasToSend(view, entry(legal, kind)) };
}

// Keep reyes, cards of a pair and, when a juego is in sight, the figures; throw the rest.
function discard(view, legal, rules) {
  const cards = view.cards;
  const ranks = ranksOf(cards, rules);
  const counts = countsOf(ranks);
  const figures = ranks.filter((r) => r >= 10).length;
  const keepValue = ranks.map((rank) => {
    if ((counts.get(rank) || 0) >= 2) return 3 + rank / 100; // a pair (or better): keep
    if (rank === REY) return 2.5;
    if (rank >= 10 && figures >= 3) return 2; // three figures: a 31 or 40 is one card away
    if (rank === AS && (counts.get(AS) || 0) >= 1 && figures >= 2) return 1.5; // figure, figure, as: 31 in sight
    return rank / 100; // low cards go first, the lowest first
  });
  const order = cards.map((card, i) => i).sort((a, b) => keepValue[a] - keepValue[b]);
  let count = keepValue.filter((value) => value < 1).length;
  const most = Math.min(Number(legal.max_cards), cards.length);
  count = Math.max(Number(legal.min_cards), Math.min(count, most));
  return { kind: 'ACTION_KIND_DISCARD', cards: order.slice(0, count).map((i) => cards[i]) };
}

// Every accepted seña that tells the partner about this lance or a later one, not yet sent this hand.
function senasToSend(view, legal) {
  const limit = Number(legal.max_senas);
  if (!limit || !legal.senas.length) return [];
  const lance = view.lance && view.lance !== 'LANCE_UNSPECIFIED' ? view.lance : 'LANCE_GRANDE';
  const later = LANCES.slice(LANCES.indexOf(lance));
  const sent = new Set(
    view.events_this_hand
      .filter((event) => event.sena_delivered && event.sena_delivered.sender === view.seat)
      .map((event) => event.sena_delivered.sena),
  );
  const useful = legal.senas.filter(
    (sena) => !sent.has(sena) && later.some((l) => SENAS_FOR[l].includes(sena)) && sena !== 'SENA_LA_BONITA',
  );
  if (useful.length === 0 && legal.senas.includes('SENA_CIEGO') && !sent.has('SENA_CIEGO')) useful.push('SENA_CIEGO');
  return useful.slice(0, limit);
}

// The partnership's strength in the current lance: own cards, being mano, and the partner's señas.
function lanceStrength(view, rules) {
  const lance = view.lance;
  let strength = handStrength(lance, ranksOf(view.cards, rules));
  const partner = (Number(view.seat) + 2) % 4;
  for (const sena of view.senas_received) {
    if (sena.sender !== partner) continue;
    const floor = (SENA_STRENGTH[sena.sena] || {})[lance];
    if (floor !== undefined) strength = Math.max(strength, floor);
  }
  // Ties go to the seat nearest the mano: being mano (or its partner) is worth a little.
  const order = (Number(view.seat) - Number(view.mano) + 4) % 4;
  strength += [0.05, 0.01, 0.03, 0][order];
  return Math.min(strength, 1);
}

function bet(view, legal, rules) {
  const strength = lanceStrength(view, rules);
  const target = Number(rules.target_score || 40);
  const ours = Number(view.seat) % 2 === 0 ? Number(view.score_team_0) : Number(view.score_team_1);
  const theirs = Number(view.seat) % 2 === 0 ? Number(view.score_team_1) : Number(view.score_team_0);
  const rivalsClose = theirs >= target - 5;

  if (has(legal, 'ACTION_KIND_QUIERO')) {
    // A bet (or an órdago) is pending against us.
    if (view.ordago_pending) {
      const accept = strength >= 0.88 || (rivalsClose && strength >= 0.6);
      return { kind: accept ? 'ACTION_KIND_QUIERO' : 'ACTION_KIND_NO_QUIERO' };
    }
    if (strength >= 0.95 && has(legal, 'ACTION_KIND_ORDAGO') && ours + Number(view.pending_total) < target) {
      return { kind: 'ACTION_KIND_ORDAGO' };
    }
    if (strength >= 0.8 && has(legal, 'ACTION_KIND_MAS')) {
      return { kind: 'ACTION_KIND_MAS', amount: amountWithin(entry(legal, 'ACTION_KIND_MAS'), 0) };
    }
    const pending = Number(view.pending_total);
    const needed = pending <= 2 ? 0.45 : pending <= 5 ? 0.55 : 0.68;
    return { kind: strength >= needed ? 'ACTION_KIND_QUIERO' : 'ACTION_KIND_NO_QUIERO' };
  }
  if (has(legal, 'ACTION_KIND_PASO')) {
    if (strength >= 0.97 && has(legal, 'ACTION_KIND_ORDAGO') && (rivalsClose || ours >= target - 10)) {
      return { kind: 'ACTION_KIND_ORDAGO' };
    }
    if (strength >= 0.68 && has(legal, 'ACTION_KIND_ENVIDO')) {
      const extra = strength >= 0.85 ? 2 : 0;
      return { kind: 'ACTION_KIND_ENVIDO', amount: amountWithin(entry(legal, 'ACTION_KIND_ENVIDO'), extra) };
    }
    return { kind: 'ACTION_KIND_PASO' };
  }
  return safeAction({ view }, legal);
}

// min_amount + extra, within the entry's bounds (max_amount 0: no cap).
function amountWithin(legal, extra) {
  const low = Number(legal.min_amount);
  const high = Number(legal.max_amount);
  const amount = low + extra;
  return high > 0 ? Math.max(low, Math.min(amount, high)) : amount;
}

// The first legal action with its smallest parameters: always legal, used after a rejection or a bug.
function safeAction(request, legal) {
  const first = legal[0];
  const action = { kind: first.kind };
  switch (first.kind) {
    case 'ACTION_KIND_ENVIDO':
    case 'ACTION_KIND_MAS':
      action.amount = Number(first.min_amount);
      break;
    case 'ACTION_KIND_DISCARD':
      action.cards = request.view.cards.slice(0, Math.min(Math.max(1, Number(first.min_cards)), Number(first.max_cards)));
      break;
    case 'ACTION_KIND_DECLARE':
      action.has_jugada = first.has_jugada;
      break;
    default:
      break;
  }
  return action;
}

module.exports = { chooseAction, safeAction, handStrength, paresOf, ranksOf, effectiveRank };
