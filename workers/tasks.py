"""Celery tasks: thin, they take ids and call plain functions (tested without Celery)."""

from __future__ import annotations

from workers.app import app
from workers.play import play_league_match


@app.task(name="mus.play_match", ignore_result=True)  # type: ignore[untyped-decorator]
def play_match(match_id: int) -> str:
    """Play league match `match_id` unless it is finished or held by a live worker (idempotent)."""
    return play_league_match(match_id)
