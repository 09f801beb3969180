"""Test fixtures for the whole suite: golden regeneration, the rule vectors, the installed JavaScript bot."""

from __future__ import annotations

import fcntl
import gc
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from workers.scratch import own_folder

REPO = Path(__file__).resolve().parent.parent
RUN_FOLDER_PREFIX = "mus-tests"
"""The test run's temporary folder: `/tmp/mus-tests-PID-random` (`pytest_configure`)."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--regen-goldens",
        action="store_true",
        default=False,
        help="rewrite the golden files under tests/data/goldens/ from the engine's current output",
    )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` starts two workers a core, not one: about half of the suite's time is spent waiting on real
    processes and real clocks (leagues on Celery workers, sandboxed seats, brokers, Chromium), and a second
    worker on each core runs other tests meanwhile. `PYTEST_XDIST_AUTO_NUM_WORKERS` still sets the number."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    return 2 * len(os.sched_getaffinity(0))


def pytest_configure(config: pytest.Config) -> None:
    """The run's own temporary folder, and each test process (xdist worker) its own host play lock.

    The folder (`TMPDIR`, made by the first process and inherited by the xdist workers and everything they
    start) takes what the tests' workers, matches and checks leave in the temporary folder, `mus-match-*` logs
    included, which the CLI keeps on purpose when no `--logs` is given; it is removed when the run ends, or by
    the next run if this one was killed (`workers.scratch`). The play lock (workers.host_lock), inherited by the
    workers and referees a test process starts: the matches of one test process are played one at a time as on a
    machine, but never wait on another test process's (one waiting out a join timeout would hold them all, and
    their timings)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        # pytest's own tmp_path folders stay where they were (kept for a look after the run, and short enough for
        # the unix sockets the tests make in them).
        os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())
        os.environ["TMPDIR"] = str(own_folder(RUN_FOLDER_PREFIX))
        tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    os.environ["MUS_HOST_LOCK"] = str(Path(tempfile.gettempdir()) / f"mus-arena-play-{worker or 'main'}.lock")


def pytest_unconfigure(config: pytest.Config) -> None:
    """The process that made the run's temporary folder removes it, after its xdist workers have ended."""
    if "PYTEST_XDIST_WORKER" not in os.environ and Path(tempfile.gettempdir()).name.startswith(RUN_FOLDER_PREFIX):
        shutil.rmtree(tempfile.gettempdir(), ignore_errors=True)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Keep the cyclic garbage collector off what collection imported, and let it run less often.

    The engine tests allocate millions of short-lived frozen values (actions, events, views) and free them by
    reference counting; at the default thresholds the collector still ran a full pass over every imported
    module's objects many times a test, about a tenth of those tests' CPU. `gc.freeze` moves what exists now
    out of its reach, and a full pass comes after about 20 M allocations instead of 70 k: what is really cyclic is
    still collected, in larger batches."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(100_000, 20, 10)


@pytest.fixture(autouse=True)
def _tmp_path_readable_by_seats(request: pytest.FixtureRequest) -> None:
    """A test's `tmp_path` readable by all users, as a bot's folder made by `mkdir` is: tests put bots in it,
    and where the worker is root each seat runs as a user of its own (workers.launcher.SEAT_UID_BASE), which
    pytest's 0700 folder would lock out."""
    if "tmp_path" in request.fixturenames:
        request.getfixturevalue("tmp_path").chmod(0o755)


@pytest.fixture(scope="session")
def regen_goldens(request: pytest.FixtureRequest) -> bool:
    """Whether `--regen-goldens` was given: golden tests then write their files instead of comparing."""
    return bool(request.config.getoption("--regen-goldens"))


@pytest.fixture(scope="session")
def vectors_dir() -> Path:
    """The rule vectors the engine must agree with (tests/vectors/README.md)."""
    return REPO / "tests" / "vectors"


JS_DIR = REPO / "clients" / "js"


@pytest.fixture(scope="session")
def node() -> str:
    """node, with clients/js installed (`npm ci` when node_modules is missing) and its proto copy up to date."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("JavaScript bot not tested: node and npm are needed (Node 20 or newer)")
    # One installer at a time: pytest-xdist may run this fixture in several workers at once.
    with (Path(tempfile.gettempdir()) / "mus-js-bot-install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (JS_DIR / "node_modules" / "@grpc" / "grpc-js").is_dir():
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"], cwd=JS_DIR, capture_output=True, text=True, timeout=300
            )
            assert done.returncode == 0, f"npm ci failed in {JS_DIR}:\n{done.stdout}\n{done.stderr}"
        subprocess.run([node, "scripts/copy-proto.js"], cwd=JS_DIR, check=True, timeout=60, capture_output=True)
    return node
