"""The one random wire policy: a random legal `mus.v1` action for a DecisionRequest, with no SDK and no engine.

Bare-wire bots use it where what matters is what arrives on the wire, or how little a bot costs to start: the
instant bot of `mus bench league` (bench/league_bot.py), the bots of `mus bench referee`, and the referee tests'
wire seats (tests/support/wire.py). It imports only the generated messages, so a sandboxed seat that imports it
pays for nothing else.
"""

from __future__ import annotations

import random

from mus.v1 import play_pb2
from mus.v1 import types_pb2 as pb


def random_wire_action(rng: random.Random, request: play_pb2.DecisionRequest, *, senas: bool = True) -> pb.Action:
    """A random legal action of `request`: a legal kind uniformly, then an amount, cards or declaration within
    bounds; with `senas`, half of the seña answers carry one of the señas the request says would be accepted.

    Draws from `rng` alone, so the same seed and the same requests give the same actions.
    """
    legal = rng.choice(request.legal_actions)
    action = pb.Action(kind=legal.kind)
    if legal.kind in (pb.ACTION_KIND_ENVIDO, pb.ACTION_KIND_MAS):
        high = legal.max_amount or legal.min_amount + 6
        action.amount = rng.randint(legal.min_amount, min(high, legal.min_amount + 6))
    elif legal.kind == pb.ACTION_KIND_DISCARD:
        action.cards.extend(rng.sample(list(request.view.cards), rng.randint(legal.min_cards, legal.max_cards)))
    elif legal.kind == pb.ACTION_KIND_DECLARE:
        action.has_jugada = legal.has_jugada
    elif senas and legal.kind == pb.ACTION_KIND_SENAS and legal.senas and rng.random() < 0.5:
        action.senas.append(rng.choice(legal.senas))
    return action
