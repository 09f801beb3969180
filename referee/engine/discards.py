"""Discards: the order replacements are dealt in, the reshuffle of the discards, the cards in transit (rules §5.2).

Functions of what they are given: a round's discards by seat (`thrown`) and the seats whose discards a
reshuffle has already taken back into the stock (`consumed`). `Match` keeps the mus phase and its events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from referee.engine.cards import Card
from referee.engine.rules import ReplacementOrder, ReshufflePool


def dealing_order(speaking: Sequence[int], mode: ReplacementOrder) -> list[int]:
    """The seats in the order they receive replacements: speaking order, or reversed from the dealer."""
    order = list(speaking)
    if mode is ReplacementOrder.DEALER_FIRST:
        order.reverse()
    return order


def reshuffle_pool(
    discard_pile: Sequence[Card],
    order: Sequence[int],
    due: int,
    thrown: Mapping[int, tuple[Card, ...]],
    consumed: set[int],
    mode: ReshufflePool,
) -> list[Card]:
    """The cards a reshuffle gathers when the stock runs out before `due` is served (rules §5.2): the discard
    pile and this round's discards, but under `exclude_pending_own` those of the seats still waiting. The seats
    whose discards join the pool are added to `consumed`. The pool is returned unshuffled."""
    waiting = set(order[order.index(due) :])
    pool = list(discard_pile)
    for seat in order:
        if seat not in thrown or seat in consumed:
            continue
        if mode is ReshufflePool.EXCLUDE_PENDING_OWN and seat in waiting:
            continue
        pool.extend(thrown[seat])
        consumed.add(seat)
    return pool


def settled_discards(order: Sequence[int], thrown: Mapping[int, tuple[Card, ...]], consumed: set[int]) -> list[Card]:
    """The round's discards that go to the discard pile once all are replaced: those no reshuffle took."""
    return [card for seat in order if seat not in consumed for card in thrown[seat]]


def cards_in_transit(
    hands: Sequence[tuple[Card, ...]], thrown: Mapping[int, tuple[Card, ...]], consumed: set[int]
) -> list[Card]:
    """This round's discards already replaced but not yet on the pile or back in the stock."""
    cards: list[Card] = []
    for seat, cards_thrown in thrown.items():
        replaced = not set(cards_thrown) & set(hands[seat])
        if replaced and seat not in consumed:
            cards += cards_thrown
    return cards
