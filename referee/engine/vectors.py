"""The engine's own answers to the rule vectors of `tests/vectors/` (their README defines the format).

A vector's seat k is the table's seat `(mano + k) % 4`; the engine plays them with seat 0 as the mano, so the
two numberings coincide and team A is team 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from referee.engine.actions import Action
from referee.engine.cards import parse_cards
from referee.engine.chance import Setup, deck_from_hands
from referee.engine.errors import MalformedError, MusError
from referee.engine.hands import Lance, best_seat, evaluate
from referee.engine.match import DecisionKind, Match
from referee.engine.rules import Rules

TEAM_NAMES = ("A", "B")


def case_rules(case: Mapping[str, Any], base: Mapping[str, Any]) -> Rules:
    """The rules of one case: the file-wide options, then the case's variant and its own options on top."""
    options = dict(base)
    if "variant" in case:
        options["deck_mode"] = case["variant"]
    extra = case.get("config", case.get("options", {}))
    if not isinstance(extra, Mapping):
        raise MalformedError("a case's config/options must be an object")
    options.update(extra)
    return Rules.from_options(options)


def _hands(case: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    hands = case.get("hands")
    if not isinstance(hands, list) or len(hands) != 4:
        raise MalformedError("a case needs 'hands': four lists of four cards")
    for seat, hand in enumerate(hands):
        if not isinstance(hand, list) or not all(isinstance(card, str) for card in hand):
            raise MalformedError(f'hand {seat} must be a list of cards in notation, such as ["12o", "3c"]')
    parsed = [parse_cards(hand) for hand in hands]
    if any(len(hand) != 4 for hand in parsed):
        raise MalformedError("every hand must have exactly four cards")
    if len({card for hand in parsed for card in hand}) != 16:
        raise MalformedError("the same card appears in two hands")
    return parsed


def evaluate_hand_case(case: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """A `hand_vectors` case: the seat that wins its lance on cards (None: nobody holds the jugada)."""
    rules = case_rules(case, base)
    try:
        lance = Lance(case.get("lance"))
    except ValueError:
        raise MalformedError(f"unknown lance {case.get('lance')!r}") from None
    facts = [evaluate(hand, rules.deck_mode, rules.real_31) for hand in _hands(case)]
    if lance is Lance.PUNTO and any(fact.has_juego for fact in facts):
        raise MalformedError("punto is only played when nobody has juego")
    return {"id": case.get("id"), "winner_seat": best_seat(facts, lance, mano=0)}


def evaluate_scenario(case: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """A `scoring_scenarios` case: one hand after the mus phase, played with the listed actions."""
    rules = case_rules(case, base)
    start_score = _start_score(case.get("start_score", {"A": 0, "B": 0}))
    deck = deck_from_hands(_hands(case), mano=0)
    setup = Setup(first_dealer=3, decks={0: deck}, start_score=start_score, skip_mus_first_hand=True)
    match = Match(rules, seed=0, setup=setup)
    actions = case.get("actions", {})
    if not isinstance(actions, Mapping):
        raise MalformedError("'actions' must be an object of lance -> list of actions")
    lances = [lance.value for lance in Lance]
    for lance_name, lines in actions.items():
        if lance_name not in lances:
            raise MalformedError(f"unknown lance {lance_name!r} in 'actions'; lances are {', '.join(lances)}")
        if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
            raise MalformedError(f'the actions of {lance_name} must be a list of strings such as "S0 envido 2"')
        for line in lines:
            _skip_automatic(match)
            seat_text, _, action_text = str(line).partition(" ")
            if not seat_text.startswith("S") or not seat_text[1:].isdigit():
                raise MalformedError(f"action {line!r} must start with S<seat>")
            seat = int(seat_text[1:])
            if match.hand_number != 0 or match.lance is None:
                raise MusError(f"{line!r}: the hand is already over")
            if match.lance.value != lance_name:
                raise MusError(
                    f"{line!r} is listed under {lance_name}, but the lance being played is {match.lance.value}"
                )
            match.apply(seat, Action.parse(action_text))
    _skip_automatic(match)
    if match.hand_number == 0 and not match.is_over:
        where = match.lance.value if match.lance else "the hand"
        raise MusError(f"the actions end but seat {match.awaited()[0]} must still act in {where}")
    if match.game_results and match.game_results[0].hand_number == 0:
        game = match.game_results[0]
        final, winner = game.score, game.winner
    else:
        final, winner = (match.score[0], match.score[1]), None
    return {
        "id": case.get("id"),
        "points_this_hand": {name: final[team] - start_score[team] for team, name in enumerate(TEAM_NAMES)},
        "final_score": {name: final[team] for team, name in enumerate(TEAM_NAMES)},
        "game_winner": TEAM_NAMES[winner] if winner is not None else None,
    }


def _start_score(start: Any) -> tuple[int, int]:
    """A scenario's `start_score`: {"A": points, "B": points}, each a whole number of points from 0."""
    if isinstance(start, Mapping) and set(start) == {"A", "B"}:
        points = (start["A"], start["B"])
        if all(isinstance(value, int) and not isinstance(value, bool) and value >= 0 for value in points):
            return points
    raise MalformedError(f'\'start_score\' must be an object such as {{"A": 0, "B": 0}}; got {start!r}')


def _skip_automatic(match: Match) -> None:
    """Scenarios list betting only: answer seña rounds with nothing and declarations truthfully."""
    while match.hand_number == 0 and not match.is_over and match.decision in (DecisionKind.SENAS, DecisionKind.DECLARE):
        seat = match.awaited()[0]
        match.apply(seat, match.legal_actions(seat)[0])


def evaluate_file(data: Mapping[str, Any], base: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every case of a vectors file, in order; a case the engine rejects gives an `error` line."""
    kinds = [
        (key, run)
        for key, run in (("hand_vectors", evaluate_hand_case), ("scoring_scenarios", evaluate_scenario))
        if key in data
    ]
    if not kinds:
        raise MalformedError("the file has neither 'hand_vectors' nor 'scoring_scenarios'")
    for key, _ in kinds:
        if not isinstance(data[key], list):
            raise MalformedError(f"'{key}' must be a list of cases")
    out: list[dict[str, Any]] = []
    for key, run in kinds:  # a file holding both kinds is answered hand vectors first
        for case in data[key]:
            case_id = case.get("id") if isinstance(case, Mapping) else None
            try:
                if not isinstance(case, Mapping):
                    raise MalformedError("a case must be an object")
                out.append(run(case, base))
            except MusError as error:
                out.append({"id": case_id, "error": str(error)})
    return out
