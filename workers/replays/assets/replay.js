// Mus Arena replay viewer: folds the embedded replay record into what the table shows at (hand, step).
// Vanilla JS, no network: everything it needs is in the two JSON scripts of this page.
// The record counts vacas and games from 0 (events_version 5); people read them from 1.
(function () {
  "use strict";

  const record = JSON.parse(document.getElementById("replay-data").textContent);
  const meta = JSON.parse(document.getElementById("replay-meta").textContent);
  const TEAMS = meta.teams;
  const LANCES = ["grande", "chica", "pares", "juego", "punto"];
  const SUIT_ORDER = "oceb";
  const SUIT_NAMES = { o: "oros", c: "copas", e: "espadas", b: "bastos" };
  const RANK_NAMES = { 1: "as", 10: "sota", 11: "caballo", 12: "rey" };
  const SENA_LABELS = { envidar_mas: "envidar más", treinta_y_una: "treinta y una", la_bonita: "la bonita" };
  const SUIT_SVG = {
    o:
      '<svg viewBox="0 0 40 40" aria-hidden="true"><circle cx="20" cy="20" r="15" fill="#f4c430" stroke="#b8860b" stroke-width="3"/>' +
      '<circle cx="20" cy="20" r="8" fill="none" stroke="#b8860b" stroke-width="2"/><circle cx="20" cy="20" r="2.5" fill="#b8860b"/></svg>',
    c:
      '<svg viewBox="0 0 40 40" aria-hidden="true"><path d="M7 6 H33 C33 19 27 24 20 24 C13 24 7 19 7 6 Z" fill="#d62d2d" stroke="#8f1d1d" stroke-width="1.5"/>' +
      '<rect x="17.5" y="24" width="5" height="8" fill="#d62d2d" stroke="#8f1d1d" stroke-width="1.2"/>' +
      '<ellipse cx="20" cy="34" rx="9" ry="3.2" fill="#d62d2d" stroke="#8f1d1d" stroke-width="1.2"/></svg>',
    e:
      '<svg viewBox="0 0 40 40" aria-hidden="true"><path d="M20 1 L23.5 25 L16.5 25 Z" fill="#3b82f6" stroke="#1e40af" stroke-width="1.2"/>' +
      '<rect x="10" y="25" width="20" height="3.6" rx="1.8" fill="#1e40af"/><rect x="18.2" y="28.6" width="3.6" height="7" fill="#1e3a8a"/>' +
      '<circle cx="20" cy="37" r="2.6" fill="#1e40af"/></svg>',
    b:
      '<svg viewBox="0 0 40 40" aria-hidden="true"><path d="M15.5 37 L24.5 37 L28 8 Q20 0 12 8 Z" fill="#3f9d4b" stroke="#1f6b2b" stroke-width="1.5"/>' +
      '<circle cx="13" cy="16" r="2.6" fill="#1f6b2b"/><circle cx="27" cy="21" r="2.6" fill="#1f6b2b"/>' +
      '<circle cx="15" cy="28" r="2.2" fill="#1f6b2b"/></svg>',
  };

  // ------------------------------------------------------------------ model

  function buildHands(events) {
    const hands = [];
    let preamble = [];
    let current = null;
    const running = { score: [0, 0], vaca: 1, game: 1 };
    for (const event of events) {
      if (event.kind === "hand_started") {
        current = {
          number: event.hand,
          mano: event.mano,
          dealer: event.dealer,
          before: { score: running.score.slice(), vaca: running.vaca, game: running.game },
          steps: [preamble.concat([event])],
        };
        // The preamble (match and game start) belongs to this hand's first step, which the fold applies to
        // `before`; the running totals move past it here.
        for (const early of preamble) track(running, early);
        preamble = [];
        hands.push(current);
        continue;
      }
      if (event.kind === "match_started" || event.kind === "game_started" || current === null) {
        preamble.push(event);
        continue;
      }
      track(running, event);
      if (event.kind === "cards_dealt" && current.steps.length === 1) {
        current.steps[0].push(event);
      } else {
        current.steps.push([event]);
      }
    }
    if (preamble.length && hands.length) {
      hands[hands.length - 1].steps.push(preamble);
    }
    return hands;
  }

  function track(running, event) {
    if (event.kind === "points_scored") running.score = event.score.slice();
    if (event.kind === "game_started") {
      running.score = event.score.slice();
      running.vaca = event.vaca;
      running.game = event.game;
    }
  }

  function parseCards(text) {
    return text ? text.split(/\s+/).filter(Boolean) : [];
  }

  function cardRank(code) {
    return parseInt(code.slice(0, -1), 10);
  }

  function sortCards(cards) {
    // The engine's canonical order (cards.sort_hand): physical rank high to low, then suit o, c, e, b.
    return cards.slice().sort(function (a, b) {
      const byRank = cardRank(b.code) - cardRank(a.code);
      return byRank !== 0 ? byRank : SUIT_ORDER.indexOf(a.code.slice(-1)) - SUIT_ORDER.indexOf(b.code.slice(-1));
    });
  }

  function newLance(name) {
    return {
      name: name,
      declared: [],
      senas: [],
      bets: [],
      outcome: null,
      stake: 0,
      winnerTeam: null,
      decided: null,
      points: [],
      scoreAfter: null,
    };
  }

  function stateAt(hand, stepIndex) {
    const st = {
      score: hand.before.score.slice(),
      vaca: hand.before.vaca,
      game: hand.before.game,
      mano: hand.mano,
      dealer: hand.dealer,
      cards: [null, null, null, null],
      mus: [],
      musCut: null,
      senasInMus: [],
      lances: {},
      current: null,
      phase: "Deal",
      bubbles: {},
      actor: null,
      notices: [],
      handPoints: [0, 0],
      handOver: false,
      ended: null,
    };
    for (let i = 0; i <= stepIndex; i++) {
      for (const event of hand.steps[i]) apply(st, event, i, i === stepIndex);
    }
    return st;
  }

  function musRound(st) {
    const last = st.mus[st.mus.length - 1];
    if (!last || last.replaced) {
      const round = { calls: [], counts: [], replaced: false };
      st.mus.push(round);
      return round;
    }
    return last;
  }

  function say(st, seat, text, kind, isCurrent) {
    if (!isCurrent || seat === null || seat === undefined) return;
    st.bubbles[seat] = { text: text, kind: kind };
    st.actor = seat;
  }

  function apply(st, e, step, isCurrent) {
    const lance = e.lance ? st.lances[e.lance] : null;
    switch (e.kind) {
      case "game_started":
        st.score = e.score.slice();
        st.vaca = e.vaca;
        st.game = e.game;
        break;
      case "hand_started":
        st.mano = e.mano;
        st.dealer = e.dealer;
        break;
      case "cards_dealt":
        st.cards[e.seat] = parseCards(e.cards).map(function (code) {
          return { code: code, status: "", since: -1 };
        });
        break;
      case "mus_called": {
        clearNew(st);
        const round = musRound(st);
        round.calls.push({ seat: e.seat, mus: e.mus });
        st.phase = "Mus · round " + st.mus.length;
        say(st, e.seat, e.mus ? "mus" : "no mus", e.mus ? "mus" : "cut", isCurrent);
        break;
      }
      case "mus_cut":
        st.musCut = e;
        st.phase = e.reason === "no_mus" ? "Mus cut" : "Mus cut: max rounds";
        break;
      case "cards_discarded": {
        const thrown = parseCards(e.cards);
        for (const card of st.cards[e.seat] || []) {
          if (thrown.indexOf(card.code) >= 0) card.status = "discarding";
        }
        st.phase = "Discards · round " + st.mus.length;
        say(st, e.seat, "discards " + thrown.length, "mus", isCurrent);
        break;
      }
      case "discard_counted": {
        musRound(st).counts.push({ seat: e.seat, count: e.count });
        say(st, e.seat, "asks for " + e.count, "mus", isCurrent);
        break;
      }
      case "cards_replaced": {
        const received = parseCards(e.cards).map(function (code) {
          return { code: code, status: "new", since: step };
        });
        const kept = (st.cards[e.seat] || []).filter(function (card) {
          return card.status !== "discarding";
        });
        st.cards[e.seat] = sortCards(kept.concat(received));
        const round = st.mus[st.mus.length - 1];
        if (round && round.counts.length === 4 && !anyDiscarding(st)) round.replaced = true;
        say(st, e.seat, "gets " + received.length, "mus", isCurrent);
        break;
      }
      case "stock_reshuffled":
        st.notices.push("stock reshuffled");
        break;
      case "lance_started":
        clearNew(st);
        st.lances[e.lance] = newLance(e.lance);
        if (e.lance === "punto" && st.lances.juego) st.lances.juego.outcome = "to_punto";
        st.current = e.lance;
        st.phase = cap(e.lance);
        break;
      case "declared":
        if (lance) lance.declared.push({ seat: e.seat, has: e.has });
        say(st, e.seat, (e.has ? "" : "no ") + e.lance, e.has ? "yes" : "no", isCurrent);
        break;
      case "sena_delivered":
        if (e.phase === "mus") st.senasInMus.push(e);
        else if (st.lances[e.phase]) st.lances[e.phase].senas.push(e);
        say(st, e.seat, "seña: " + senaLabel(e.sena), "sena", isCurrent);
        break;
      case "sena_rejected":
        say(st, e.seat, "seña rejected", "fault", isCurrent);
        break;
      case "bet":
        if (lance) lance.bets.push(e);
        say(st, e.seat, betText(e), "bet-" + e.action, isCurrent);
        break;
      case "lance_closed":
        if (lance) {
          lance.outcome = e.outcome;
          lance.stake = e.stake;
          lance.winnerTeam = e.winner_team;
        }
        break;
      case "points_scored":
        st.score = e.score.slice();
        st.handPoints[e.team] += e.points;
        if (lance) {
          lance.points.push({ team: e.team, points: e.points, reason: e.reason });
          lance.scoreAfter = e.score.slice();
        }
        if (e.reason === "tanteo") st.phase = "Tanteo";
        break;
      case "lance_decided":
        if (lance) lance.decided = { seat: e.seat, team: e.team };
        say(st, e.seat, "wins the órdago", "win", isCurrent);
        break;
      case "hands_shown":
        e.hands.forEach(function (text, seat) {
          st.cards[seat] = parseCards(text).map(function (code) {
            return { code: code, status: "", since: -1 };
          });
        });
        st.phase = "Hands shown";
        break;
      case "hand_ended":
        st.phase = "Hand over";
        st.handOver = true;
        break;
      case "game_ended":
        st.ended = e;
        st.notices.push(gameEndedText(e));
        break;
      case "vaca_ended":
        st.notices.push("Vaca " + (e.vaca + 1) + " to " + teamName(e.winner) + ", games " + e.games[0] + " – " + e.games[1]);
        break;
      case "match_ended":
        st.notices.push("Match to " + teamName(e.winner) + " (" + e.termination + "), vacas " + e.vacas[0] + " – " + e.vacas[1]);
        st.phase = "Match over";
        break;
      case "fault":
        st.notices.push("Fault: seat " + e.seat + " " + e.cause.replace(/_/g, " "));
        say(st, e.seat, "fault: " + e.cause.replace(/_/g, " "), "fault", isCurrent);
        break;
      case "forfeit":
        st.notices.push(teamName(e.team) + " forfeits the match");
        break;
      default:
        break;
    }
  }

  function clearNew(st) {
    // Replacement cards stand out until the next mus call or the first lance.
    for (const cards of st.cards) {
      for (const card of cards || []) if (card.status === "new") card.status = "";
    }
  }

  function anyDiscarding(st) {
    // A discard round is over once every seat has its replacements: no card is still on its way out.
    return st.cards.some(function (cards) {
      return (cards || []).some(function (card) {
        return card.status === "discarding";
      });
    });
  }

  // ------------------------------------------------------------------ text

  function cap(text) {
    return text.charAt(0).toUpperCase() + text.slice(1);
  }

  function teamName(team) {
    return team === null || team === undefined ? "nobody" : TEAMS[team];
  }

  function senaLabel(sena) {
    return SENA_LABELS[sena] || sena.replace(/_/g, " ");
  }

  function betText(e) {
    switch (e.action) {
      case "envido":
        return "envido " + e.amount;
      case "mas":
        return "más " + e.amount + " → " + e.pending;
      case "quiero":
        return e.ordago ? "quiero" : "quiero " + e.accepted;
      case "no_quiero":
        return "no quiero";
      case "ordago":
        return "órdago";
      default:
        return e.action;
    }
  }

  function outcomeText(lance) {
    switch (lance.outcome) {
      case "passed":
        return "all passed";
      case "accepted":
        return lance.stake + " accepted";
      case "rejected":
        return "refused · " + teamName(lance.winnerTeam) + " wins it";
      case "ordago_accepted":
        return lance.decided
          ? "órdago accepted · seat " + lance.decided.seat + " (" + teamName(lance.decided.team) + ") wins the game"
          : "órdago accepted";
      case "no_betting":
        return "one team only · no betting";
      case "skipped":
        return "nobody holds it";
      case "to_punto":
        return "nobody has juego → punto";
      default:
        return "";
    }
  }

  function gameEndedText(e) {
    const how = { ordago: "órdago", target_at_tanteo: "reached the target at the tanteo", target_at_deje: "reached the target on a deje", forfeit: "forfeit" };
    const winner = e.winner === null ? "no winner" : teamName(e.winner) + " wins";
    return "Game " + (e.game + 1) + " over: " + winner + " (" + (how[e.termination] || e.termination) + "), " + e.score[0] + " – " + e.score[1];
  }

  function describe(e) {
    switch (e.kind) {
      case "match_started":
        return "Match starts; first dealer seat " + e.first_dealer;
      case "game_started":
        return "Vaca " + (e.vaca + 1) + ", game " + (e.game + 1) + " starts at " + e.score[0] + " – " + e.score[1];
      case "hand_started":
        return "Hand " + e.hand + ": mano seat " + e.mano + ", dealer seat " + e.dealer;
      case "cards_dealt":
        return "Seat " + e.seat + " is dealt " + e.cards;
      case "mus_called":
        return "Seat " + e.seat + ": " + (e.mus ? "mus" : "no mus");
      case "cards_discarded":
        return "Seat " + e.seat + " discards " + e.cards;
      case "discard_counted":
        return "Seat " + e.seat + " asks for " + e.count;
      case "cards_replaced":
        return "Seat " + e.seat + " receives " + e.cards;
      case "stock_reshuffled":
        return "The stock ran out: discards reshuffled";
      case "mus_cut":
        return e.reason === "no_mus" ? "Mus cut by seat " + e.seat : "Mus cut after max_mus_rounds discards";
      case "lance_started":
        return cap(e.lance);
      case "declared":
        return "Seat " + e.seat + ": " + (e.has ? "has " : "no ") + e.lance;
      case "sena_delivered":
        return "Seat " + e.seat + " signals " + senaLabel(e.sena) + (e.to ? " (to partner)" : " (seen by all)");
      case "sena_rejected":
        return (e.senas || [e])
          .map(function (r) { return "Seña " + senaLabel(r.sena) + " of seat " + e.seat + " rejected: " + r.reason; })
          .join("; ");
      case "bet":
        return "Seat " + e.seat + ": " + betText(e);
      case "lance_closed":
        return cap(e.lance) + ": " + outcomeText({ outcome: e.outcome, stake: e.stake, winnerTeam: e.winner_team });
      case "points_scored":
        return (
          teamName(e.team) + " +" + e.points + " (" + e.reason + (e.lance ? " " + e.lance : "") + ") → " +
          e.score[0] + " – " + e.score[1]
        );
      case "hands_shown":
        return "Hands shown: " + e.hands.map(function (text, seat) { return "S" + seat + " " + text; }).join(" · ");
      case "lance_decided":
        return "Órdago in " + e.lance + " won by seat " + e.seat + " (" + teamName(e.team) + ")";
      case "hand_ended":
        return "Hand " + e.hand + " ends";
      case "game_ended":
        return gameEndedText(e);
      case "vaca_ended":
        return "Vaca " + (e.vaca + 1) + " to " + teamName(e.winner) + ", games " + e.games[0] + " – " + e.games[1];
      case "match_ended":
        return "Match to " + teamName(e.winner) + " (" + e.termination + "), vacas " + e.vacas[0] + " – " + e.vacas[1];
      case "fault":
        return "Fault: seat " + e.seat + " " + e.cause.replace(/_/g, " ") + " (" + e.faults + " for " + teamName(e.team) + ")";
      case "forfeit":
        return teamName(e.team) + " forfeits the match";
      default:
        return e.kind;
    }
  }

  // ------------------------------------------------------------------ DOM helpers

  function el(tag, attrs) {
    const node = document.createElement(tag);
    if (attrs) {
      for (const key of Object.keys(attrs)) {
        const value = attrs[key];
        if (value === null || value === undefined || value === false) continue;
        if (key === "text") node.textContent = value;
        else if (key === "class") node.className = value;
        else node.setAttribute(key, value === true ? "" : String(value));
      }
    }
    for (let i = 2; i < arguments.length; i++) {
      const child = arguments[i];
      if (child === null || child === undefined || child === false) continue;
      if (Array.isArray(child)) child.forEach(function (c) { if (c) node.appendChild(c); });
      else node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  function cardNode(card) {
    const code = card.code;
    const rank = cardRank(code);
    const suit = code.slice(-1);
    const node = el("div", {
      class: "card suit-" + suit + (card.status ? " " + card.status : ""),
      "data-card": code,
      title: rank + " de " + SUIT_NAMES[suit],
    });
    node.appendChild(el("span", { class: "corner corner-tl", text: String(rank) }));
    const pip = el("span", { class: "pip" });
    pip.innerHTML = SUIT_SVG[suit] || "";
    node.appendChild(pip);
    node.appendChild(el("span", { class: "face-name", text: RANK_NAMES[rank] || "" }));
    node.appendChild(el("span", { class: "corner corner-br", text: String(rank) }));
    return node;
  }

  function teamChip(team, text) {
    return el("span", { class: "team-chip team-" + team, text: text === undefined ? teamName(team) : text });
  }

  // ------------------------------------------------------------------ rendering

  const hands = buildHands(record.events || []);
  const view = { hand: 0, step: 0 };

  function render() {
    const hand = hands[view.hand];
    const st = stateAt(hand, view.step);
    // The match's own hand numbers (from 0), as `mus replay show` and its --hand option count them.
    document.getElementById("hand-counter").textContent =
      "Hand " + hand.number + " (" + (view.hand + 1) + " of " + hands.length + ")";
    document.getElementById("step-counter").textContent = "step " + (view.step + 1) + " / " + hand.steps.length;
    document.getElementById("game-label").textContent = "Vaca " + (st.vaca + 1) + " · Game " + (st.game + 1);
    document.getElementById("score").textContent = st.score[0] + " – " + st.score[1];
    document.getElementById("prev-hand").disabled = view.hand === 0 && view.step === 0;
    document.getElementById("prev-step").disabled = view.hand === 0 && view.step === 0;
    const atEnd = view.hand === hands.length - 1 && view.step === hand.steps.length - 1;
    document.getElementById("next-hand").disabled = atEnd;
    document.getElementById("next-step").disabled = atEnd;
    document.getElementById("hand-end").disabled = view.step === hand.steps.length - 1;
    const root = document.getElementById("viewer");
    root.setAttribute("data-hand", String(view.hand));
    root.setAttribute("data-step", String(view.step));
    renderSeats(st);
    renderCenter(st);
    renderMus(st);
    renderLances(st);
    renderLog(hand);
    try {
      history.replaceState(null, "", "#hand=" + (view.hand + 1) + "&step=" + (view.step + 1));
    } catch (error) {
      // Some local-file contexts refuse history changes; the replay works without them.
    }
  }

  function renderSeats(st) {
    for (let seat = 0; seat < 4; seat++) {
      const box = document.querySelector('.seat[data-seat="' + seat + '"]');
      box.classList.toggle("active", st.actor === seat);
      const badges = box.querySelector(".badges");
      badges.textContent = "";
      if (st.mano === seat) badges.appendChild(el("span", { class: "badge mano", title: "mano: speaks first", text: "mano" }));
      if (st.dealer === seat) badges.appendChild(el("span", { class: "badge dealer", title: "dealer (postre): speaks last", text: "dealer" }));
      const row = box.querySelector(".cards");
      row.textContent = "";
      const cards = st.cards[seat];
      if (cards) cards.forEach(function (card) { row.appendChild(cardNode(card)); });
      else for (let i = 0; i < 4; i++) row.appendChild(el("div", { class: "card back" }));
      const bubble = box.querySelector(".bubble");
      const said = st.bubbles[seat];
      bubble.textContent = said ? said.text : "";
      bubble.className = "bubble" + (said ? " shown " + said.kind : "");
    }
  }

  function renderCenter(st) {
    document.getElementById("phase").textContent = st.phase;
    const pot = document.getElementById("pot");
    pot.textContent = "";
    const lance = st.current ? st.lances[st.current] : null;
    if (lance && lance.bets.length && !lance.outcome) {
      const last = lance.bets[lance.bets.length - 1];
      if (last.ordago) pot.appendChild(el("span", { class: "pot-ordago", text: "órdago on the table" }));
      else if (last.pending !== null) {
        pot.appendChild(el("span", { text: "pending " + last.pending }));
        if (last.accepted) pot.appendChild(el("span", { text: "accepted " + last.accepted }));
      }
    } else if (lance && lance.outcome && st.phase === cap(lance.name)) {
      pot.appendChild(el("span", { text: outcomeText(lance) }));
    }
    if (st.handOver) {
      pot.appendChild(
        el("span", { class: "summary" },
          teamChip(0, TEAMS[0] + " +" + st.handPoints[0]),
          teamChip(1, TEAMS[1] + " +" + st.handPoints[1]))
      );
    }
    const notices = document.getElementById("notices");
    notices.textContent = "";
    // The latest three: the log keeps them all.
    st.notices.slice(-3).forEach(function (text) { notices.appendChild(el("div", { class: "notice", text: text })); });
  }

  function seatChip(seat, text, extraClass) {
    return el("span", { class: "chip team-" + (seat % 2) + (extraClass ? " " + extraClass : ""), "data-seat": seat }, el("b", { text: "S" + seat }), " " + text);
  }

  function senaChip(e) {
    const chip = seatChip(e.seat, senaLabel(e.sena), e.to ? "sena" : "sena public");
    chip.title = e.to ? "seen by the partner only" : "seen by the rivals too";
    return chip;
  }

  function renderMus(st) {
    const box = document.getElementById("mus");
    box.textContent = "";
    if (!st.mus.length && !st.musCut) {
      box.appendChild(el("div", { class: "muted", text: "Mus: nothing said yet" }));
      return;
    }
    st.mus.forEach(function (round, index) {
      const line = el("div", { class: "mus-row", "data-round": index + 1 }, el("span", { class: "mus-label", text: "Mus " + (index + 1) }));
      round.calls.forEach(function (call) {
        line.appendChild(seatChip(call.seat, call.mus ? "mus" : "no mus", call.mus ? "" : "cut"));
      });
      if (round.counts.length) {
        line.appendChild(el("span", { class: "arrow", text: "discards" }));
        round.counts.forEach(function (c) { line.appendChild(seatChip(c.seat, String(c.count), "count")); });
      }
      box.appendChild(line);
    });
    if (st.musCut && st.musCut.reason !== "no_mus") box.appendChild(el("div", { class: "muted", text: "Mus cut after the maximum number of discards" }));
    if (st.senasInMus.length) {
      const line = el("div", { class: "mus-row senas" }, el("span", { class: "mus-label", text: "Señas" }));
      st.senasInMus.forEach(function (e) { line.appendChild(senaChip(e)); });
      box.appendChild(line);
    }
  }

  function renderLances(st) {
    const body = document.getElementById("lances-body");
    body.textContent = "";
    LANCES.forEach(function (name) {
      const lance = st.lances[name];
      if (name === "punto" && !lance) return;
      const row = el("tr", { class: "lance-row" + (lance ? "" : " pending") + (st.current === name && st.phase === cap(name) ? " current" : ""), "data-lance": name });
      row.appendChild(el("th", { scope: "row", text: cap(name) }));
      const declared = el("td", { class: "declared" });
      if (lance) {
        lance.declared.forEach(function (d) {
          const chip = seatChip(d.seat, d.has ? "✓" : "✗", d.has ? "yes" : "no");
          chip.title = "seat " + d.seat + (d.has ? " has " : " has no ") + name;
          declared.appendChild(chip);
        });
      }
      row.appendChild(declared);
      const senas = el("td", { class: "senas" });
      if (lance) lance.senas.forEach(function (e) { senas.appendChild(senaChip(e)); });
      row.appendChild(senas);
      const bets = el("td", { class: "bets" });
      if (lance) {
        lance.bets.forEach(function (e) {
          const chip = seatChip(e.seat, betText(e), "bet bet-" + e.action);
          chip.setAttribute("data-action", e.action);
          chip.setAttribute("data-amount", String(e.amount));
          bets.appendChild(chip);
        });
      }
      row.appendChild(bets);
      row.appendChild(el("td", { class: "outcome", text: lance ? outcomeText(lance) : "" }));
      const points = el("td", { class: "points" });
      if (lance) {
        lance.points.forEach(function (p) {
          const chip = teamChip(p.team, teamName(p.team) + " +" + p.points + (p.reason === "deje" ? " deje" : ""));
          chip.classList.add("pts");
          chip.setAttribute("data-team", String(p.team));
          chip.setAttribute("data-points", String(p.points));
          chip.setAttribute("data-reason", p.reason);
          points.appendChild(chip);
        });
      }
      row.appendChild(points);
      row.appendChild(el("td", { class: "score-after", text: lance && lance.scoreAfter ? lance.scoreAfter[0] + " – " + lance.scoreAfter[1] : "" }));
      body.appendChild(row);
    });
    const total = el("tr", { class: "hand-total" });
    total.appendChild(el("th", { scope: "row", text: "Hand" }));
    total.appendChild(el("td", { colspan: 4, class: "muted", text: "points this hand" }));
    total.appendChild(el("td", { class: "points" }, teamChip(0, TEAMS[0] + " +" + st.handPoints[0]), teamChip(1, TEAMS[1] + " +" + st.handPoints[1])));
    total.appendChild(el("td", { class: "score-after", text: st.score[0] + " – " + st.score[1] }));
    body.appendChild(total);
  }

  function renderLog(hand) {
    const list = document.getElementById("log");
    list.textContent = "";
    let currentNode = null;
    hand.steps.forEach(function (events, index) {
      const item = el("li", {
        class: "log-step" + (index === view.step ? " current" : index > view.step ? " future" : ""),
        "data-step": index,
      });
      events.forEach(function (e) {
        const hidden = e.to && e.kind !== "sena_delivered";
        item.appendChild(el("div", { class: "log-line kind-" + e.kind + (hidden ? " private" : ""), text: describe(e) }));
      });
      item.addEventListener("click", function () { go(view.hand, index); });
      list.appendChild(item);
      if (index === view.step) currentNode = item;
    });
    if (currentNode) {
      // #log is the scrolling box and the offset parent of its items.
      const top = currentNode.offsetTop;
      if (top < list.scrollTop || top + currentNode.offsetHeight > list.scrollTop + list.clientHeight) {
        list.scrollTop = Math.max(0, top - list.clientHeight / 3);
      }
    }
  }

  // ------------------------------------------------------------------ navigation

  function go(handIndex, stepIndex) {
    view.hand = Math.max(0, Math.min(hands.length - 1, handIndex));
    view.step = Math.max(0, Math.min(hands[view.hand].steps.length - 1, stepIndex));
    render();
  }

  function nextStep() {
    if (view.step < hands[view.hand].steps.length - 1) go(view.hand, view.step + 1);
    else if (view.hand < hands.length - 1) go(view.hand + 1, 0);
  }

  function prevStep() {
    if (view.step > 0) go(view.hand, view.step - 1);
    else if (view.hand > 0) go(view.hand - 1, hands[view.hand - 1].steps.length - 1);
  }

  function nextHand() {
    if (view.hand < hands.length - 1) go(view.hand + 1, 0);
    else go(view.hand, hands[view.hand].steps.length - 1);
  }

  function prevHand() {
    go(view.hand > 0 ? view.hand - 1 : 0, 0);
  }

  function handEnd() {
    go(view.hand, hands[view.hand].steps.length - 1);
  }

  function fromHash() {
    const match = /hand=(\d+)(?:&step=(\d+))?/.exec(location.hash || "");
    if (match) go(parseInt(match[1], 10) - 1, match[2] ? parseInt(match[2], 10) - 1 : 0);
    else go(0, 0);
  }

  document.getElementById("next-step").addEventListener("click", nextStep);
  document.getElementById("prev-step").addEventListener("click", prevStep);
  document.getElementById("next-hand").addEventListener("click", nextHand);
  document.getElementById("prev-hand").addEventListener("click", prevHand);
  document.getElementById("hand-end").addEventListener("click", handEnd);
  document.addEventListener("keydown", function (event) {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    const keys = {
      ArrowRight: event.shiftKey ? nextHand : nextStep,
      ArrowLeft: event.shiftKey ? prevHand : prevStep,
      ArrowDown: nextHand,
      PageDown: nextHand,
      ArrowUp: prevHand,
      PageUp: prevHand,
      Home: function () { go(view.hand, 0); },
      End: handEnd,
    };
    const action = keys[event.key];
    if (action) {
      event.preventDefault();
      action();
    }
  });

  if (!hands.length) {
    document.getElementById("viewer").setAttribute("data-empty", "true");
    document.getElementById("hand-counter").textContent = "Hand 0 / 0";
    return;
  }
  fromHash();
})();
