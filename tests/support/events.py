"""Event payloads as the replay file writes them, for tests that compare against JSON-shaped expectations."""

from __future__ import annotations

from typing import Any

from referee.engine.events import Event


def fields(event: Event) -> dict[str, Any]:
    """The event's payload in its replay-file form (cards in notation, enums by value, tuples as lists)."""
    return event.payload.to_json()
