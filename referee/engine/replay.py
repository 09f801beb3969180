"""Replay: a match is a function of its rules, seed, setup and steps (rules §4.1)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from referee.engine.cards import parse_cards
from referee.engine.chance import Setup
from referee.engine.match import Match, Step, StepKind
from referee.engine.rules import Rules


def apply_step(match: Match, step: Step) -> None:
    """Apply one logged step exactly as it was applied the first time."""
    if step.kind is StepKind.ACTION:
        assert step.action is not None
        match.apply(step.seat, step.action, step.unknown_senas)
    elif step.kind is StepKind.TIMEOUT:
        match.apply_timeout(step.seat)
    elif step.kind is StepKind.UNKNOWN_SENAS:
        match.reject_unknown_senas(step.seat, step.reason.split())
    elif step.kind is StepKind.LIMIT:
        match.forfeit_for_limit(step.seat, step.reason)
    else:
        match.record_illegal_action(step.seat, step.reason)


def replay(rules: Rules, seed: int, steps: Iterable[Step], setup: Setup | None = None) -> Match:
    """Rebuild a match from its rules, seed and logged steps; raises if a step is not legal in the replay."""
    match = Match(rules, seed, setup)
    for step in steps:
        apply_step(match, step)
    return match


def setup_to_json(setup: Setup) -> dict[str, Any]:
    return {
        "first_dealer": setup.first_dealer,
        "decks": {str(hand): " ".join(map(str, deck)) for hand, deck in setup.decks.items()},
        "start_score": list(setup.start_score),
        "skip_mus_first_hand": setup.skip_mus_first_hand,
    }


def setup_from_json(data: Mapping[str, Any]) -> Setup:
    return Setup(
        first_dealer=data.get("first_dealer"),
        decks={int(hand): parse_cards(deck) for hand, deck in data.get("decks", {}).items()},
        start_score=(int(data.get("start_score", [0, 0])[0]), int(data.get("start_score", [0, 0])[1])),
        skip_mus_first_hand=bool(data.get("skip_mus_first_hand", False)),
    )


EVENTS_VERSION = 5
"""Which engine wrote a replay's event log: bumped whenever the same steps give other events, so that a check
compares a stored log only with one the same engine writes. A record without it was written at version 1.

2: a refused lance closes before its deje is scored, and a deje that ends the game closes its lance.
3: the rejected señas of one step are one `sena_rejected` event listing them (`senas`: sena, code, reason),
   unknown señas ride on their action's step (`unknown_senas`), and a `limit` step forfeits a seat.
4: a `lance_closed` of outcome `no_betting` names its `winner_team`, the only team that holds the jugada.
5: every number counts from 0: the `vaca` and `game` of `game_started`, `game_ended` and `vaca_ended` (the game
   within its vaca) were 1-based.
"""


def match_record(match: Match) -> dict[str, Any]:
    """The replay file of a match: rules, seed, setup, steps, and the full event log for inspection."""
    return {
        "format": "mus-arena/replay/v1",
        "events_version": EVENTS_VERSION,
        "rules": match.rules.changed_options(),
        "seed": match.seed,
        "setup": setup_to_json(match.setup),
        "steps": [step.to_json() for step in match.log],
        "events": [event.to_json() for event in match.events],
    }


def replay_record(record: Mapping[str, Any]) -> Match:
    """Re-simulate a replay file written by `match_record`."""
    rules = Rules.from_options(record.get("rules", {}))
    steps = [Step.from_json(step) for step in record["steps"]]
    return replay(rules, int(record["seed"]), steps, setup_from_json(record.get("setup", {})))


def dumps_record(match: Match) -> str:
    return json.dumps(match_record(match), ensure_ascii=False, separators=(",", ":"))
