"""A prefork worker's child (`mus worker`) settles its own heap as it starts: its parent's freeze is not its own."""

from __future__ import annotations

import gc

from celery.signals import worker_process_init

import workers.app  # noqa: F401  (connects the worker's signal handlers)


def test_each_prefork_child_freezes_its_start_up_heap_as_it_starts() -> None:
    gc.unfreeze()
    try:
        worker_process_init.send(sender=None)
        assert gc.get_freeze_count() > 0, "what the child inherited is frozen, out of every full collection's way"
    finally:
        gc.unfreeze()
