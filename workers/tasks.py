"""Celery tasks: thin, they take ids and call plain functions (tested without Celery)."""

from __future__ import annotations

from typing import Any

from workers.app import app
from workers.play import DEFER_S, play_league_match


@app.task(name="mus.play_match", bind=True, ignore_result=True)  # type: ignore[untyped-decorator]
def play_match(self: Any, match_id: int) -> str:
    """Play league match `match_id` unless it is finished or held by a live worker (idempotent). A match whose
    duplicate twin is being played is sent again in `DEFER_S` seconds, not dropped (the twins never overlap)."""
    outcome = play_league_match(match_id)
    if outcome == "deferred":  # back to the queue it came from (its half's: workers.app.match_queues)
        self.apply_async((match_id,), countdown=DEFER_S, queue=(self.request.delivery_info or {}).get("routing_key"))
    return outcome
