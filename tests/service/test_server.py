"""The referee process's start-up heap is settled: what start-up left is frozen, its garbage collected first."""

from __future__ import annotations

import gc
import weakref

from referee.service.server import settle_start_up_heap


class _Node:
    def __init__(self) -> None:
        self.me = self


def test_settling_the_heap_freezes_what_lives_and_never_what_was_already_garbage() -> None:
    kept, dropped = _Node(), _Node()
    dropped_ref = weakref.ref(dropped)
    del dropped  # a reference cycle: only the collector frees it
    try:
        settle_start_up_heap()
        assert dropped_ref() is None, "garbage is collected before the freeze, or it would be kept for good"
        assert not any(tracked is kept for tracked in gc.get_objects()), "what lived is no collection's work now"
    finally:
        gc.unfreeze()
