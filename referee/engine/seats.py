"""Seats and teams: who partners whom and who speaks after whom (rules §1, §3, §8.2).

Seats are absolute (0..3); team 0 is seats 0 and 2, team 1 is seats 1 and 3.
"""

from __future__ import annotations

from collections.abc import Sequence


def team_of(seat: int) -> int:
    """Team 0 holds seats 0 and 2, team 1 seats 1 and 3 (partners sit opposite, rules §1)."""
    return seat % 2


def partner_of(seat: int) -> int:
    return (seat + 2) % 4


_SPEAKING_ORDERS = tuple(tuple((mano + k) % 4 for k in range(4)) for mano in range(4))
"""The four speaking orders, made once: the engine asks for one several times a decision."""


def speaking_order(mano: int) -> tuple[int, ...]:
    """The seats from the mano in speaking order (rules §1)."""
    return _SPEAKING_ORDERS[mano]


def rivals_after(seat: int, participants: Sequence[int]) -> list[int]:
    """The participants of the other team, in speaking order starting just after `seat` (rules §8.2)."""
    return [other for k in range(1, 4) if (other := (seat + k) % 4) in participants and team_of(other) != team_of(seat)]
