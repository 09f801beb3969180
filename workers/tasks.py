"""Celery tasks: thin, they take ids and call plain functions (tested without Celery)."""

from __future__ import annotations

from typing import Any

from workers.app import app, later
from workers.play import MAX_HAND_OFFS, play_league_match


@app.task(name="mus.play_match", bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
def play_match(self: Any, match_id: int, hand_offs: int = 0) -> str:
    """Play league match `match_id` unless it is finished or held by a live worker (idempotent). A match left for
    later (its duplicate twin is being played, or it is handed off to the workers playing its half) is sent again,
    never dropped, back to the queue it came from (its half's: workers.app.match_queues); `hand_offs` counts how
    often this message was handed off (at most `MAX_HAND_OFFS`)."""
    queue = (self.request.delivery_info or {}).get("routing_key")

    def again(delay_s: float, handed_off: bool) -> None:
        count = hand_offs + handed_off
        self.apply_async((match_id, count) if count else (match_id,), queue=queue, **later(self.app, delay_s))

    return play_league_match(match_id, again=again, may_hand_off=hand_offs < MAX_HAND_OFFS)
