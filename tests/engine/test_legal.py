"""`LegalActions`: `action in match.legal(seat)` says exactly what `Match.check` says, and `expand` lists exactly
`Match.legal_actions`, over random matches of several rule variants (rules §5, §7, §8, §12)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from referee.engine.actions import Action, ActionKind
from referee.engine.cards import FULL_DECK
from referee.engine.legal import LegalActions
from referee.engine.match import Match
from referee.engine.rules import Rules
from referee.engine.selfplay import random_action
from referee.engine.senas import Sena

VARIANTS = [
    {},
    {"max_total_stake": None, "target_score": 30},
    {"declarations": "bot_declares", "discard_min": 2, "discard_max": 3},
    {"response_mode": "both_answer_most_aggressive", "max_total_stake": 10},
    {"senas_mode": "automatic", "discard_submission": "sequential"},
]


ORDAGO = ActionKind.ORDAGO
LISTED_WHOLE = (ActionKind.DISCARD, ActionKind.DECLARE)
"""Kinds whose every legal action `expand` lists (no señas ride on them, no amount runs past the list)."""


def near_misses(action: Action) -> list[Action]:
    """Actions next to a legal one: other amounts, the other declaration, cards out of order or not held."""
    out = [
        dataclasses.replace(action, amount=action.amount + 1),
        dataclasses.replace(action, amount=max(action.amount - 1, 0)),
        dataclasses.replace(action, amount=action.amount + 100),
        dataclasses.replace(action, has_jugada=not action.has_jugada),
        dataclasses.replace(action, senas=(Sena.CORTAR_MUS,)),
    ]
    if action.cards:
        out.append(dataclasses.replace(action, cards=tuple(reversed(action.cards))))
        out.append(dataclasses.replace(action, cards=action.cards[:-1]))
    return out


@pytest.mark.parametrize("options", VARIANTS, ids=lambda options: ",".join(options) or "defaults")
def test_membership_is_the_engines_check_and_the_expansion_its_list(options: dict[str, object]) -> None:
    rules = Rules.from_options({"games_to_win_vaca": 1, "vacas_to_win_match": 1, **options})
    for seed in range(3):
        match = Match(rules, seed)
        rng = random.Random(seed)
        while not match.is_over:
            seat = match.awaited()[0]
            legal = match.legal(seat)
            listed = match.legal_actions(seat)
            assert legal.expand() == listed
            others = [other for other in range(4) if other not in match.awaited()]
            assert all(match.legal(other) == LegalActions() for other in others), "nothing for a seat not asked"
            candidates = [*listed, *(Action(kind) for kind in ActionKind)]
            for action in listed[:: max(len(listed) // 6, 1)]:
                candidates += near_misses(action)
                if action.cards:  # a discard of a card the seat does not hold
                    foreign = next(card for card in FULL_DECK if card not in match.hands[seat])
                    candidates.append(Action.discard((*action.cards[:-1], foreign)))
            for candidate in candidates:
                assert (candidate in legal) is match.is_legal(seat, candidate), (seat, candidate, legal)
                if candidate.kind in LISTED_WHOLE:  # `check` judges these by membership: the listing is the witness
                    # (señas riding on them are rejected on their own, rules §12.3)
                    listed_too = candidate.without_senas() in listed
                    assert listed_too is match.is_legal(seat, candidate), (seat, candidate, listed)
            # No órdago: a match of hands, discards among them, not one decided at its first bet.
            match.apply(seat, random_action(rng, [action for action in listed if action.kind is not ORDAGO] or listed))
