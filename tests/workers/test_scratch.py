"""A killed worker's folders under the temporary folder are removed by the next worker (workers.scratch)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from workers.scratch import own_folder, sweep

POOL_WORKER = """\
import sys, time
from workers.pool import BotPool
from workers.matches import EmbeddedReferee
pool, referee = BotPool(None), EmbeddedReferee()
print(pool.root, referee.frames_dir, flush=True)
time.sleep(60)
"""
"""What a worker makes as it plays its first pooled match: its pool's folder and its referee's socket folder."""


def _start_worker() -> tuple[subprocess.Popen[str], list[Path]]:
    worker = subprocess.Popen([sys.executable, "-c", POOL_WORKER], stdout=subprocess.PIPE, text=True)
    assert worker.stdout is not None
    return worker, [Path(name) for name in worker.stdout.readline().split()]


def test_the_folders_of_a_killed_worker_are_removed_by_the_next_and_a_running_ones_are_kept() -> None:
    killed, its_folders = _start_worker()
    running, folders = _start_worker()
    try:
        assert all(folder.is_dir() for folder in [*its_folders, *folders])
        killed.send_signal(signal.SIGKILL)  # no cleanup of its own runs
        killed.wait()
        assert all(folder.is_dir() for folder in its_folders)
        after, after_folders = _start_worker()
        after.kill()
        after.wait()
        assert not any(folder.exists() for folder in its_folders), "the next worker removed the killed one's"
        assert all(folder.is_dir() for folder in folders), "a running worker's folders are its own"
    finally:
        for worker in (killed, running):
            worker.kill()
            worker.wait()
    sweep("mus-pool")
    sweep("mus-referee-frames")
    assert not any(folder.exists() for folder in [*folders, *after_folders])


def test_a_folder_is_named_with_its_makers_pid_and_not_swept_while_it_runs() -> None:
    folder = own_folder("mus-test-scratch")
    try:
        assert folder.name.startswith(f"mus-test-scratch-{os.getpid()}-")
        assert sweep("mus-test-scratch") == [] and folder.is_dir()
    finally:
        folder.rmdir()
