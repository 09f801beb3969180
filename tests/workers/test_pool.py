"""workers.pool: hosted bots whose processes play seat after seat (seats over standard input), each in its own
sandbox where this machine has one; which process plays which seat, and when one is replaced."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tests.support.hostile
import tests.support.hostile_seats
from bench.league import BOT_COMMAND, BOT_SCRIPT
from referee.engine.rules import Rules
from tests.workers.conftest import Deployment
from workers import launcher, matches, play
from workers.db import repo
from workers.db.session import session_scope
from workers.launcher import (
    EXAMPLE_BOTS,
    FREEZE,
    INSTALL_HINT,
    BotProgram,
    Limits,
    PooledProcess,
    TurnGate,
    _usable_hierarchies,
    launch_bot,
    own_seat_uids,
    sandbox_available,
)
from workers.matches import MAX_SOCKET_PATH, EmbeddedReferee, PlayedMatch, play_programs, run_on_worker_referee
from workers.pool import BotPool, close_pools, worker_pool

pytestmark = pytest.mark.slow  # pools of real bot processes

LIMITS = Limits() if sandbox_available() else None
"""Sandboxed where the machine allows it, as a league plays; unconfined elsewhere (the pool works the same)."""
FAST = Rules.from_options({"games_to_win_vaca": 1, "vacas_to_win_match": 1})


def instant(name: str, version: str = "1") -> BotProgram:
    return BotProgram(name, BOT_COMMAND, BOT_SCRIPT.parent, version=version, persistent=True)


@pytest.fixture
def pool(tmp_path: Path) -> Iterator[BotPool]:
    made = BotPool(LIMITS, log_dir=tmp_path / "pool")
    yield made
    made.close()


def play_match(
    programs: tuple[BotProgram, BotProgram], seed: int, pool: BotPool | None, **options: object
) -> PlayedMatch:
    """On this process's worker referee, as a league worker plays (it outlives its matches: a pooled process frozen
    before it has read its last outcome reads it when it is thawed for its next seat)."""
    return run_on_worker_referee(
        lambda referee: play_programs(programs, FAST, seed, sandbox=LIMITS, pool=pool, referee=referee, **options)  # type: ignore[arg-type]
    )


def persistent_script(tmp_path: Path, name: str, source: str) -> BotProgram:
    """A persistent Python bot `name` whose program is `source`, in a folder of its own."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / f"{name}.py").write_text(source)
    return BotProgram(name, (sys.executable, str(folder / f"{name}.py")), folder, persistent=True)


def seat_pids(pool: BotPool) -> dict[tuple[str, int, int], int]:
    """Each live process by bot, half and place (workers.pool.place)."""
    return {(member.program.name, half, place): member.pid for (_, half, place), member in pool._processes.items()}


def test_pooled_processes_play_several_matches_with_the_results_of_bots_launched_per_match(pool: BotPool) -> None:
    pids: list[dict[tuple[str, int, int], int]] = []
    for seed in range(3):
        pooled = play_match((instant("a"), instant("b")), seed, pool)
        launched = play_match((instant("a"), instant("b")), seed, None)
        assert pooled.match.outcome is not None and not pooled.incidents
        assert pooled.match.outcome == launched.match.outcome, "the instant bot is seeded: same match either way"
        assert pooled.match.log == launched.match.log
        pids.append(seat_pids(pool))
    assert pids[0] == pids[1] == pids[2], "the same four processes played every match"
    assert len(set(pids[0].values())) == 4, "four seats, four processes: partners are separate processes"
    assert pool.started == 4


@pytest.mark.skipif(LIMITS is None, reason="what hides them is the sandbox")
def test_a_pooled_process_whose_pools_logs_lie_in_its_own_folder_sees_none_of_them(tmp_path: Path) -> None:
    """As a launched seat (tests/workers/test_sandbox.py): `mus bot check --logs` in the bot's own folder puts the
    pool's logs there too, and an empty folder covers them in its processes' sandboxes (stop 39)."""
    folder = tmp_path / "bot"
    folder.mkdir()
    shutil.copy(tests.support.hostile.__file__, folder / "hostile.py")
    logs = folder / "logs"
    command = (sys.executable, str(folder / "hostile.py"), "logs", "--target", str(logs))
    pool = BotPool(LIMITS, log_dir=logs)
    try:
        played = play_match((BotProgram("hostile", command, folder, persistent=True), instant("b")), 3, pool)
    finally:
        pool.close()
    assert played.match.outcome is not None and not played.incidents
    seen = [log.read_text() for log in sorted(logs.glob("hostile-half*.log"))]
    assert len(seen) == 2 and all("ATTACK logs BLOCKED empty" in text for text in seen), seen


def test_a_bot_that_meets_itself_plays_its_four_seats_with_four_processes(pool: BotPool) -> None:
    played = play_match((instant("a"), instant("a")), 7, pool)
    assert played.match.outcome is not None
    assert sorted(place for _, _, place in seat_pids(pool)) == [0, 1, 2, 3]
    assert len(set(seat_pids(pool).values())) == 4


def test_the_twin_of_a_duplicate_pair_is_played_by_other_processes_than_the_first_half(pool: BotPool) -> None:
    play_match((instant("a"), instant("b")), 11, pool, half=0)
    first_half = {pid for (name, _, _), pid in seat_pids(pool).items() if name == "a"}
    play_match((instant("b"), instant("a")), 11, pool, half=1)  # the same deal, partnerships swapped
    second_half = {place: pid for (name, half, place), pid in seat_pids(pool).items() if name == "a" and half == 1}
    assert sorted(second_half) == [0, 1] and len(first_half) == 2
    assert first_half.isdisjoint(second_half.values()), "no process of a saw that deal from the other side"


def test_a_pooled_processs_folder_is_named_by_nothing_that_tells_its_half(pool: BotPool) -> None:
    """Bound at /run/mus, its host path is in bwrap's command line (/proc/1/cmdline) and in the seat's mountinfo:
    named `h{half}p{place}-`, it told a process which half of the pair it plays before its first seat (a security
    review, stop 43)."""
    play_match((instant("a"), instant("b")), 11, pool, half=0)
    play_match((instant("b"), instant("a")), 11, pool, half=1)
    names = [folder.name for folder in pool.root.iterdir() if folder.is_dir()]
    assert len(names) == 8 and all(re.fullmatch(r"p-\w{8}", name) for name in names), names


def test_in_one_half_a_bots_two_processes_play_it_on_either_team(pool: BotPool) -> None:
    """A worker that plays one half of every pair (workers.app.match_queues) starts two processes a bot."""
    play_match((instant("a"), instant("b")), 1, pool, half=0)
    before = seat_pids(pool)
    played = play_match((instant("b"), instant("a")), 2, pool, half=0)  # another pair: a on seats 1 and 3
    assert played.match.outcome is not None and not played.incidents
    assert seat_pids(pool) == before and pool.started == 4


def test_a_pool_tells_what_starting_a_matchs_processes_would_cost_from_its_bots_first_matches(pool: BotPool) -> None:
    """What a worker weighs before it hands a match off (workers.play): 0 when its processes are live, the first
    match's CPU of each process to start (as its cgroup counted it), None for a bot it never started."""
    a, b = instant("a"), instant("b")
    assert pool.start_cost_s((a, b), 0) is None, "never started here: nothing to weigh"
    play_match((a, b), 1, pool, half=0)
    if any(member.cpu_s() is None for member in pool.processes()):
        pytest.skip("no cgroup counts the pooled processes' CPU on this machine")
    assert pool.start_cost_s((a, b), 0) == 0.0 and pool.start_cost_s((b, a), 0) == 0.0, "live in half 0"
    per_bot = pool._start_cpu_s
    assert sorted(per_bot) == ["a", "b"] and all(0 < seconds < 5 for seconds in per_bot.values())
    assert pool.start_cost_s((b, a), 1) == pytest.approx(2 * per_bot["a"] + 2 * per_bot["b"]), "two of each"
    assert pool.start_cost_s((a, instant("c")), 0) is None
    assert pool.start_cost_s((instant("a", version="2"), b), 0) == pytest.approx(2 * per_bot["a"]), "a new version"


def test_a_new_version_of_a_bot_gets_new_processes(pool: BotPool) -> None:
    play_match((instant("a"), instant("b")), 3, pool)
    before = seat_pids(pool)
    play_match((instant("a", version="2"), instant("b")), 4, pool)
    after = seat_pids(pool)
    assert after[("a", 0, 0)] != before[("a", 0, 0)] and after[("a", 0, 1)] != before[("a", 0, 1)]
    assert after[("b", 0, 0)] == before[("b", 0, 0)], "b did not change"


def test_a_pooled_process_that_crashes_is_charged_a_crash_and_replaced_for_the_next_match(
    pool: BotPool, tmp_path: Path
) -> None:
    folder = tmp_path / "quitter"
    folder.mkdir()
    (folder / "quitter.py").write_text("import sys\nsys.stdin.readline()\nsys.exit(3)\n")
    quitter = BotProgram("quitter", (sys.executable, str(folder / "quitter.py")), folder, persistent=True)
    played = play_match((quitter, instant("b")), 5, pool, join_timeout_s=5)
    assert played.match.outcome is not None
    assert {(incident.seat, incident.cause) for incident in played.incidents} >= {(0, "crash"), (2, "crash")}
    assert ("quitter", 0, 0) not in seat_pids(pool), "a process that crashed is not kept"
    started = pool.started
    play_match((instant("a"), instant("b")), 6, pool)
    assert pool.started == started + 2, "b's processes lived on; a's two were started"


BURNER = """\
import sys, threading
from clients.bots.passive_bot import PassiveBot
from clients.sdk.runner import SeatOffer, run_bot
def spin():
    while True:
        pass
for line in sys.stdin:
    offer = SeatOffer.from_line(line)
    run_bot(PassiveBot(), offer.referee, offer.seat_token)
    threading.Thread(target=spin, daemon=True).start()  # spins from now on
"""
"""A persistent program that, after each seat, starts a thread that spins for ever: between its seats it would
take a core from the matches played meanwhile (a review slowed an innocent league from 2.2 s to 4.8 s so)."""


def skip_unless_frozen() -> None:
    if LIMITS is None or FREEZE not in {name for hierarchy in _usable_hierarchies() for name in hierarchy.controllers}:
        pytest.skip("no sandbox or no cgroup v2 here: pooled processes are not frozen (docs/pool.md)")


def played_burners(pool: BotPool, tmp_path: Path) -> tuple[BotProgram, list[PooledProcess]]:
    """A BURNER bot and its pool's two processes, which have just played a match (skipped where nothing freezes)."""
    skip_unless_frozen()
    burner = persistent_script(tmp_path, "burner", BURNER)
    first = play_match((burner, instant("b")), 1, pool)
    assert first.match.outcome is not None and not first.incidents
    return burner, [member for member in pool.processes() if member.program.name == "burner"]


def test_a_pooled_process_is_frozen_between_its_seats_and_plays_its_next_one(pool: BotPool, tmp_path: Path) -> None:
    burner, members = played_burners(pool, tmp_path)
    before = [member.cpu_s() or 0.0 for member in members]
    time.sleep(1.0)
    burned = [(member.cpu_s() or 0.0) - start for member, start in zip(members, before, strict=True)]
    assert max(burned) < 0.05, f"CPU-seconds taken in a second between seats: {burned}"
    second = play_match((burner, instant("b")), 2, pool)
    assert second.match.outcome is not None and not second.incidents
    assert [member for member in pool.processes() if member.program.name == "burner"] == members


LONG = Rules.from_options({"games_to_win_vaca": 3, "vacas_to_win_match": 3})


def test_a_pooled_process_between_its_seats_is_frozen_before_the_next_match_is_dealt(
    pool: BotPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that has just played may have played the next match's twin: it stays frozen until its next seat,
    through the next match's deal and play."""
    skip_unless_frozen()
    burner = persistent_script(tmp_path, "burner", BURNER)
    warm = play_match((instant("c"), instant("d")), 3, pool)  # the next match's processes start no more
    first = play_match((burner, instant("b")), 1, pool)
    assert warm.match.outcome is not None and first.match.outcome is not None and not first.incidents
    members = [member for member in pool.processes() if member.program.name == "burner"]
    seen: list[float] = []  # the burners' CPU-seconds when the next match is dealt, then when it has ended

    class Watched(TurnGate):
        def __call__(self, running: frozenset[int]) -> asyncio.Future[None] | None:
            held = super().__call__(running)
            if (not seen and not running) or (len(seen) == 1 and len(running) == 4):
                seen.append(sum(member.cpu_s() or 0.0 for member in members))
            return held

    monkeypatch.setattr(matches, "TurnGate", Watched)
    second = run_on_worker_referee(
        lambda referee: play_programs((instant("c"), instant("d")), LONG, 2, sandbox=LIMITS, pool=pool, referee=referee)
    )
    assert second.match.outcome is not None and not second.incidents
    play_s = second.ended_at - second.started_at
    assert len(seen) == 2 and seen[1] - seen[0] < 0.01, f"CPU-seconds taken in a match of {play_s:.2f} s: {seen}"


def test_a_pooled_process_that_has_just_played_is_frozen_before_any_process_of_the_next_match_runs(
    pool: BotPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next match may be its twin, whose deal it has just seen: running while that match's seats join, it
    passed a rival's hand to them through the CPU before the deal (a security review, stop 35). So it is frozen
    before any process of the next match is started, given its seat or launched."""
    _, members = played_burners(pool, tmp_path)
    seen: list[tuple[str, list[str]]] = []  # at each process of the next match: the burners' cgroup.events

    def look(what: str) -> None:
        seen.append(
            (what, [(member.freezer.cgroup / "cgroup.events").read_text() for member in members if member.freezer])
        )

    acquire, offer, launch = BotPool.acquire, PooledProcess.offer, launch_bot

    def acquiring(self: BotPool, *args: Any) -> Any:
        look("acquire")
        return acquire(self, *args)

    def offering(self: Any, *args: Any, **kwargs: Any) -> None:
        look("offer")
        offer(self, *args, **kwargs)

    async def launching(*args: Any, **kwargs: Any) -> Any:
        look("launch")
        return await launch(*args, **kwargs)

    monkeypatch.setattr(BotPool, "acquire", acquiring)
    monkeypatch.setattr(PooledProcess, "offer", offering)
    monkeypatch.setattr(matches, "launch_bot", launching)
    launched = BotProgram("e", BOT_COMMAND, BOT_SCRIPT.parent, version="1")  # a bot launched for the match
    second = play_match((instant("c"), launched), 2, pool)  # at once, as a worker plays a pair's twin
    assert second.match.outcome is not None and not second.incidents
    assert {what for what, _ in seen} == {"acquire", "offer", "launch"}
    assert all(len(states) == len(members) == 2 for _, states in seen)
    assert all("frozen 1" in events for _, states in seen for events in states), seen


def test_no_pooled_process_runs_between_its_workers_matches(
    pool: BotPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A match ends with every process of its worker's pool frozen, those of the match included: outside its
    worker's matches, another worker of the machine may be playing, and a process that ran then could pass what
    it knows to that match's processes through the CPU (a security review, stop 36: the cards of a first half went
    through another worker's process into the twin). Their time to exit is what is left of their match."""
    skip_unless_frozen()
    burner = persistent_script(tmp_path, "burner", BURNER)

    def burners_frozen() -> list[bool]:
        """Each burner frozen, or killed for not stopping within BYSTANDER_LIMIT_S (a loaded machine's CI run saw
        one killed, still exiting when its cgroup was read): either way it runs no code of its own."""
        members = [member for member in pool.processes() if member.program.name == "burner"]
        freezers = [member.freezer for member in members if member.freezer is not None]
        assert len(freezers) == 2
        return [freezer.stuck or "frozen 1" in (freezer.cgroup / "cgroup.events").read_text() for freezer in freezers]

    first = play_match((burner, instant("b")), 1, pool)
    assert first.match.outcome is not None and burners_frozen() == [True, True], "frozen as its match ends"
    other = play_match((instant("c"), instant("d")), 2, pool)
    assert other.match.outcome is not None and burners_frozen() == [True, True], "and through the next match"


STUFFER = """\
import os, sys, time
from clients.bots.passive_bot import PassiveBot
from clients.sdk.runner import SeatOffer, run_bot
offer = SeatOffer.from_line(sys.stdin.readline())
run_bot(PassiveBot(), offer.referee, offer.seat_token)
try:
    stuffing = os.open("/proc/self/fd/0", os.O_WRONLY | os.O_NONBLOCK)  # the writing end of its own input
except OSError as error:
    print("REFUSED", error.strerror, flush=True)
    for line in sys.stdin:
        offer = SeatOffer.from_line(line)
        run_bot(PassiveBot(), offer.referee, offer.seat_token)
    raise SystemExit(0)
try:
    while True:
        os.write(stuffing, b"#" * 4096)
except BlockingIOError:
    print("STUFFED", flush=True)
time.sleep(600)
"""
"""A persistent program that plays its first seat, then fills its own input pipe so that the next seat line cannot
be written (a security review froze every worker that offered it a seat this way). Where each seat runs as a uid
of its own, the pipe is the worker's and it cannot open it: it says so and plays on."""


def test_a_pooled_process_that_fills_its_own_input_is_charged_a_crash_and_never_blocks_the_worker(
    pool: BotPool, tmp_path: Path
) -> None:
    stuffer = persistent_script(tmp_path, "stuffer", STUFFER)
    first = play_match((stuffer, instant("b")), 1, pool)
    assert first.match.outcome is not None and not first.incidents
    logs = sorted((tmp_path / "pool").glob("stuffer-*.log"))

    def logged(*words: str) -> bool:
        """Whether every log says one of `words` within 5 s: the processes may be frozen between their seats before
        they say it, and the pool's thread writes their output to the log after they do."""
        for _ in range(500):
            if all(any(word in log.read_text() for word in words) for log in logs):
                return True
            time.sleep(0.01)
        return False

    logged("STUFFED", "REFUSED")
    assert len(logs) == 2
    second = play_match((stuffer, instant("b")), 2, pool, join_timeout_s=5)
    assert second.match.outcome is not None
    crashes = {incident.seat: incident.detail for incident in second.incidents if incident.cause == "crash"}
    if LIMITS is not None and own_seat_uids():
        assert logged("REFUSED Permission denied"), "its input is the worker's pipe"
        assert crashes == {}, second.incidents
        return
    assert logged("STUFFED"), "both processes filled their input"
    assert sorted(crashes) == [0, 2], second.incidents
    assert all("standard input was full" in detail for detail in crashes.values()), crashes
    assert not [member for member in pool.processes() if member.program.name == "stuffer"], "both were retired"


def test_a_seat_line_that_does_not_fit_in_a_full_input_kills_the_process_at_once(pool: BotPool, tmp_path: Path) -> None:
    """However a process's input came to be full, offering it a seat never waits: the process is killed and says
    why (the match then charges its seat a crash, as above)."""
    folder = tmp_path / "deaf"
    folder.mkdir()
    (folder / "deaf.py").write_text("import time\ntime.sleep(600)\n")
    member = pool.acquire(BotProgram("deaf", (sys.executable, str(folder / "deaf.py")), folder, persistent=True), 0, 0)
    assert member.process.stdin is not None
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(member.process.stdin.fileno(), b"#" * 4096)  # the worker's own end: the pipe is now full
    member.offer("unix:/nowhere.sock", "a-token")
    member.process.wait(timeout=10)
    assert member.describe_exit().startswith("killed: its standard input was full")


def test_the_sdk_example_bot_plays_seats_over_standard_input_in_a_pool_over_frames(pool: BotPool) -> None:
    random_bot = BotProgram("random", tuple(EXAMPLE_BOTS["random"]), persistent=True)
    loop = asyncio.new_event_loop()
    try:
        referee = EmbeddedReferee()
        for seed in range(2):
            played = loop.run_until_complete(
                play_programs((random_bot, random_bot), FAST, seed, sandbox=LIMITS, pool=pool, referee=referee)
            )
            assert played.match.outcome is not None and not played.incidents
        served = [frames.served for _, frames in referee._pooled.values()]
        loop.run_until_complete(referee.close())
    finally:
        loop.close()
    assert pool.started == 4, "run_main kept each process for the second match"
    assert served == [2, 2, 2, 2], "each process played both its seats over frames (the seat line's socket)"


def test_a_process_the_pool_retires_while_its_worker_plays_is_killed_without_a_grace(
    pool: BotPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A grace to exit blocks the worker's event loop: a chaos review's cut-short matches waited 4 s for their four
    seats (stop 40), and a security review's process that ignored the end of its input held its worker a second at
    every retirement, for the pool's memory or its count, thawed all that second beside the machine's other matches
    (stop 45). So every retirement while the worker plays kills the process as it is, in good health or not; only a
    worker that stops gives its processes their end of input and a grace to exit (`BotPool.close`)."""
    graces: list[float] = []
    close = PooledProcess.close

    def closed(process: PooledProcess, grace_s: float = 1.0) -> None:
        graces.append(grace_s)
        close(process, grace_s)

    monkeypatch.setattr(PooledProcess, "close", closed)
    play_match((instant("a"), instant("b")), 1, pool)
    first, second, *rest = pool.processes()
    pool.release(first, healthy=False)
    pool.retire_cpu_s = 0.0  # past half its CPU-time limit: replaced, in good health
    pool.release(second, healthy=True)
    assert graces == [0.0, 0.0] and not first.alive and not second.alive
    pool.close()
    assert graces == [0.0, 0.0] + [1.0] * len(rest) and not any(process.alive for process in rest)


def test_after_max_seats_a_process_is_replaced(tmp_path: Path) -> None:
    small = BotPool(LIMITS, max_seats=1)
    try:
        play_match((instant("a"), instant("b")), 1, small)
        first = seat_pids(small)
        play_match((instant("a"), instant("b")), 2, small)
        assert set(first.values()).isdisjoint(seat_pids(small).values())
        assert small.started == 8
    finally:
        small.close()


def test_a_process_past_half_its_cpu_time_limit_is_replaced_before_the_limit_can_hit_a_match() -> None:
    if LIMITS is None:
        pytest.skip("no sandbox: no CPU limit")
    default = BotPool(LIMITS)
    default.close()
    assert default.retire_cpu_s == LIMITS.cpu_s / 2
    tight = BotPool(LIMITS, retire_cpu_s=0.0)
    try:
        played = play_match((instant("a"), instant("b")), 1, tight)
        assert played.match.outcome is not None
        if all(member.cpu_s() is None for member in tight.processes()) and tight.retired == 0:
            pytest.skip("no cgroup counts the seats' CPU here")
        assert tight.processes() == [] and tight.retired == 4
    finally:
        tight.close()


IDLE = "import sys\nfor _ in sys.stdin:\n    pass\n"
"""A persistent program that takes its seats and never joins: its matches wait, their sockets open."""


@pytest.mark.skipif(LIMITS is None, reason=INSTALL_HINT)
def test_a_pooled_process_sees_and_reaches_no_referee_socket_but_its_own_seats(pool: BotPool, tmp_path: Path) -> None:
    idle_folder, hostile_folder = tmp_path / "idle", tmp_path / "hostile"
    idle_folder.mkdir()
    hostile_folder.mkdir()
    (idle_folder / "idle.py").write_text(IDLE)
    shutil.copy(tests.support.hostile_seats.__file__, hostile_folder / "hostile_seats.py")
    idle = BotProgram("idle", (sys.executable, str(idle_folder / "idle.py")), idle_folder, persistent=True)

    async def scenario() -> tuple[list[PlayedMatch], list[str]]:
        # Another match, under way the whole time: its referee listens in its four seats' folders.
        other = asyncio.create_task(play_programs((idle, idle), FAST, 1, sandbox=LIMITS, pool=pool, join_timeout_s=60))
        for _ in range(2000):
            if len(list(pool.root.glob("*/referee.sock"))) == 4:
                break
            await asyncio.sleep(0.01)
        elsewhere = sorted(str(path) for path in pool.root.glob("*/referee.sock"))
        assert len(elsewhere) == 4, "the other match listens in each of its pooled seats' folders"
        command = [sys.executable, str(hostile_folder / "hostile_seats.py")]
        for path in [*elsewhere, str(pool.root)]:
            command += ["--target", path]
        hostile = BotProgram("hostile", tuple(command), hostile_folder, persistent=True)
        # One referee for both, as a worker's: between its seats the process is frozen, perhaps before it has
        # read its last outcome, which it reads when it is thawed for the next.
        referee = EmbeddedReferee()
        try:
            played = [
                await play_programs((hostile, instant("b")), FAST, seed, sandbox=LIMITS, pool=pool, referee=referee)
                for seed in (2, 3)
            ]
        finally:
            await referee.close()
        other.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await other
        return played, elsewhere

    played, elsewhere = asyncio.run(scenario())
    assert all(one.match.outcome is not None and not one.incidents for one in played)
    hostile_pids = {member.pid for member in pool.processes() if member.program.name == "hostile"}
    assert len(hostile_pids) == 2, "two processes (partners 0 and 1) played both matches"
    assert list(pool.root.glob("*/*")) == [], "every referee removed its sockets from its seats' folders"
    pool.close()
    lines = [
        line
        for log in sorted((tmp_path / "pool").glob("hostile-half*.log"))
        for line in log.read_text().splitlines()
        if line.startswith("ATTACK rundir")
    ]
    assert len(lines) == 4, "each of the two processes looked with each of its two seats"
    for line in lines:
        assert line.startswith("ATTACK rundir BLOCKED"), line
        fields = dict(field.split("=", 1) for field in line.split()[3:])
        assert fields["seen"] == fields["own"] and fields["reached"] == "none", line
        assert all(f"{path}:ENOENT" in fields["tried"] for path in elsewhere), line


def test_a_league_worker_plays_a_persistent_bot_from_its_pool_and_launches_the_others(
    deployment: Deployment, monkeypatch: pytest.MonkeyPatch
) -> None:
    league_id = deployment.league(
        "pooled",
        ["keeper", "starter"],
        4,
        command=BOT_COMMAND,
        folder=BOT_SCRIPT.parent,
        persistent={"keeper"},
        options=FAST.changed_options(),
        sandbox=LIMITS is not None,
    )
    with session_scope(deployment.engine) as session:
        match_ids = [match.id for match in repo.list_matches(session, league_id) if match.id is not None]
    frozen_after: list[bool] = []  # after each match: every pooled process frozen
    played = play_programs

    async def playing(*args: Any, **kwargs: Any) -> PlayedMatch:
        result = await played(*args, **kwargs)
        freezers = [member.freezer for member in kwargs["pool"].processes()]
        frozen_after.append(all(freezer is None or freezer.frozen for freezer in freezers))
        return result

    monkeypatch.setattr(play, "play_programs", playing)
    play.database.cache_clear()
    try:
        outcomes = [play.play_league_match(match_id) for match_id in match_ids]
        assert sorted(outcomes) == ["finished"] * 2 + ["skipped"] * 2, "each pair's twin played right after it"
        assert frozen_after == [True] * 4, "the pool's processes are frozen as each match ends"
        pooled = worker_pool(LIMITS).processes()
        assert all(member.freezer is None or member.freezer.frozen for member in pooled), "frozen between matches"
        assert sorted((member.program.name, member.seats_played) for member in pooled) == [("keeper", 2)] * 4, (
            "keeper's four seat processes each played both of their seats; starter was launched per match"
        )
        # One log holds all of a process's seats: each starts with a line naming its table and league match.
        log_dir = worker_pool(LIMITS).log_dir
        assert log_dir is not None
        notes = [
            line for log in log_dir.glob("keeper-*.log") for line in log.read_text().splitlines() if "--- mus [" in line
        ]
        notes = [line for line in notes if "never sees" not in line]  # each log's first line: the worker's tag
        assert len(notes) == 8 and all(re.match(r"--- mus \[[0-9a-f]{8}\]: seat ", line) for line in notes), notes
        assert {int(line.split("match pooled/")[1].split("/")[0]) for line in notes} == set(match_ids), notes
        with session_scope(deployment.engine) as session:
            results = repo.league_results(session, league_id)
        assert len(results) == 4 and not any(result.incidents for result in results)
    finally:
        play.database.cache_clear()
        close_pools()


def test_a_long_lived_referee_serves_each_pooled_process_on_one_socket_until_the_pool_retires_it(
    tmp_path: Path,
) -> None:
    """A worker's referee outlives its matches (`EmbeddedReferee`): no server per match, one socket per pooled
    process for its life, gone when the pool retires the process."""
    pool = BotPool(LIMITS, log_dir=tmp_path / "pool", max_seats=2)
    other = BotPool(None, log_dir=tmp_path / "unconfined")
    loop = asyncio.new_event_loop()

    def match(referee: EmbeddedReferee, seed: int) -> PlayedMatch:
        programs = (instant("a"), instant("b"))
        return loop.run_until_complete(play_programs(programs, FAST, seed, sandbox=LIMITS, pool=pool, referee=referee))

    def served() -> list[Path]:
        return sorted(path.parent for path in pool.root.glob("*/referee.sock"))

    try:
        referee = EmbeddedReferee()
        played = [match(referee, 0)]
        first = sorted(member.socket_dir for member in pool.processes())
        assert served() == first, "one socket in each pooled process's folder"
        played += [match(referee, 1)]
        assert served() == first, "the same sockets serve the processes' next seats"
        played += [match(referee, 2)]  # two seats each: the pool replaces all four processes
        assert pool.started == 8
        assert served() == sorted(member.socket_dir for member in pool.processes()) != first, (
            "the retired processes' sockets are gone; the new ones are served"
        )
        # A worker's other pool (unconfined leagues) shares the referee: neither pool's matches touch the other's.
        played += [
            loop.run_until_complete(play_programs((instant("c"), instant("d")), FAST, 3, pool=other, referee=referee))
        ]
        played += [match(referee, 4)]
        assert len(list(other.root.glob("*/referee.sock"))) == 4, "the other pool's processes are still served"
        loop.run_until_complete(referee.close())
        assert served() == [] and list(other.root.glob("*/*")) == [], "a closed referee leaves no socket behind"
    finally:
        loop.close()
        pool.close()
        other.close()
    assert all(one.match.outcome is not None and not one.incidents for one in played)


def test_a_temporary_folder_the_referee_accepts_also_fits_every_pooled_process_socket() -> None:
    """The referee checks its deepest socket at start-up (unix socket paths are at most 107 bytes): a pooled
    process's folder must not be deeper. A temporary folder of 55 bytes, less the pid its folders are named with
    (workers.scratch), puts that check at exactly 107."""
    size = 55 - len(f"-{os.getpid()}")
    base = tempfile.mkdtemp(prefix="sock-", dir="/tmp")
    deep = Path(base + "/" + "d" * (size - len(base) - 1))
    assert len(bytes(deep)) == size
    deep.mkdir()
    old = tempfile.tempdir
    tempfile.tempdir = str(deep)
    try:
        pool = BotPool(LIMITS)
        try:

            async def one() -> PlayedMatch:
                referee = EmbeddedReferee()  # no LaunchError: the start-up check passes
                try:
                    return await play_programs(
                        (instant("a"), instant("b")), FAST, 1, sandbox=LIMITS, pool=pool, referee=referee
                    )
                finally:
                    await referee.close()

            played = asyncio.run(one())
            assert played.match.outcome is not None and not played.incidents
            assert all(len(bytes(member.socket_dir / "referee.sock")) <= MAX_SOCKET_PATH for member in pool.processes())
        finally:
            pool.close()
    finally:
        tempfile.tempdir = old
        shutil.rmtree(base, ignore_errors=True)


GRABBER = """\
import sys, time
from clients.bots.passive_bot import PassiveBot
from clients.sdk.runner import SeatOffer, run_bot
held = []
for line in sys.stdin:
    held.clear()
    offer = SeatOffer.from_line(line)
    run_bot(PassiveBot(), offer.referee, offer.seat_token)
    time.sleep(0.05)  # its pool has counted its memory by now
    held.append(b"x" * (200 * 1024 * 1024))  # touched: it counts in the process's memory cgroup
    print("GRABBED", flush=True)
"""
"""A persistent bot that takes 200 MB just after its pool has counted its memory, and lets go of it when it is
given its next seat (a review's held 800 MB each this way, frozen, past the pool's cap)."""


def test_a_pooled_process_between_its_seats_cannot_take_more_memory_than_its_pool_counted(tmp_path: Path) -> None:
    """Frozen between its seats, it could take nothing; where nothing freezes it (no cgroup v2), it runs, and its
    memory limit is what its pool counted."""
    grabber = persistent_script(tmp_path, "grabber", GRABBER)
    pool = BotPool(LIMITS)
    try:
        played = play_match((grabber, instant("b")), 1, pool)
        assert played.match.outcome is not None and not played.incidents
        members = [member for member in pool.processes() if member.program.name == "grabber"]
        if any(member.memory_bytes() is None for member in members):
            pytest.skip("no memory cgroup counts the pooled processes here")
        for member in members:  # as where no freezer stops it between its seats
            if member.freezer is not None:
                member.freezer.thaw()
        time.sleep(1.0)
        held = [(member.alive, member.memory_bytes() or 0) for member in members]
        assert all(not alive or memory < 100 * 1024 * 1024 for alive, memory in held), held
        again = play_match((grabber, instant("b")), 2, pool)  # a killed one is replaced, nothing charged
        assert again.match.outcome is not None and not again.incidents
    finally:
        pool.close()


def test_a_pooled_process_whose_memory_limit_cannot_be_set_after_its_match_is_retired(
    pool: BotPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A v1 memory cgroup refuses a limit below what the process holds (EBUSY): one that took more after it was
    counted would keep its seat's 1 GiB between seats (a review, stop 35)."""
    monkeypatch.setattr(PooledProcess, "confine_memory", lambda self, held: False)
    played = play_match((instant("a"), instant("b")), 1, pool)
    assert played.match.outcome is not None and not played.incidents
    if pool.retired == 0 and all(member.memory_bytes() is None for member in pool.processes()):
        pytest.skip("no memory cgroup counts the pooled processes here")
    assert pool.retired == 4 and pool.processes() == []


ONE_SEAT = """\
import sys, time
from clients.bots.passive_bot import PassiveBot
from clients.sdk.runner import SeatOffer, run_bot
offer = SeatOffer.from_line(sys.stdin.readline())
run_bot(PassiveBot(), offer.referee, offer.seat_token)
time.sleep(600)  # alive, and never reads another seat
"""
"""A persistent program that plays its first seat, then never another (a review's closed its input)."""


def test_pooled_processes_that_have_played_before_have_a_short_join_timeout(
    pool: BotPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """They join within milliseconds: a broken one held its worker for the whole join timeout, 30 s, in every
    match (a review, stop 35)."""
    monkeypatch.setattr(matches, "WARM_JOIN_S", 1.0)
    timeouts: list[float] = []
    original = matches._play

    async def playing(*args: Any, **kwargs: Any) -> PlayedMatch:
        timeouts.append(kwargs["join_timeout_s"])
        return await original(*args, **kwargs)

    monkeypatch.setattr(matches, "_play", playing)
    stuck = persistent_script(tmp_path, "stuck", ONE_SEAT)
    first = play_match((stuck, instant("b")), 1, pool, join_timeout_s=5.0)
    assert first.match.outcome is not None and not first.incidents
    second = play_match((stuck, instant("b")), 2, pool, join_timeout_s=5.0)
    assert timeouts == [5.0, 1.0], "the first match's processes were started for it"
    assert {(incident.seat, incident.cause) for incident in second.incidents} >= {(0, "absent"), (2, "absent")}


HOG = """\
import sys
held = b"x" * (150 * 1024 * 1024)  # touched: it counts in the process's memory cgroup
from clients.bots.passive_bot import PassiveBot
from clients.sdk.runner import run_main
raise SystemExit(run_main(PassiveBot()))
"""
"""A persistent bot whose processes each hold 150 MB between seats (a review's held 738 MB each, idle)."""


def test_after_a_match_the_largest_pooled_processes_are_retired_until_the_rest_fit_the_pools_memory(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "hog"
    folder.mkdir()
    (folder / "hog.py").write_text(HOG)
    hog = BotProgram("hog", (sys.executable, str(folder / "hog.py")), folder, persistent=True)
    small = BotPool(LIMITS, max_memory_bytes=320 * 1024 * 1024)  # a half's 160 MB: less than a hog, more than both b
    try:
        played = play_match((hog, instant("b")), 1, small)
        assert played.match.outcome is not None and not played.incidents
        if small.retired == 0 and all(member.memory_bytes() is None for member in small.processes()):
            pytest.skip("no memory cgroup counts the pooled processes here")
        assert sorted(member.program.name for member in small.processes()) == ["b", "b"], "both hogs retired"
        assert small.retired == 2
    finally:
        small.close()


def test_what_a_first_matchs_processes_hold_never_retires_a_process_of_the_twins(tmp_path: Path) -> None:
    """A review's first-half processes held memory or not, by a bit of the deal, to tip the pool past its cap after
    their match, so that it retired the bot's own twin process; the twin's other process read the restart off the
    twin's start (stop 45). Each half has its share of the pool's memory and count, and keeps it by retiring its own
    processes only."""
    folder = tmp_path / "hog"
    folder.mkdir()
    (folder / "hog.py").write_text(HOG)
    hog = BotProgram("hog", (sys.executable, str(folder / "hog.py")), folder, persistent=True)
    small = BotPool(LIMITS, max_memory_bytes=320 * 1024 * 1024, max_processes=8)  # per half: 160 MB, 4 processes
    try:
        play_match((instant("a"), instant("b")), 1, small, half=1)  # the twin's processes, kept
        twins = {key: member.pid for key, member in small._processes.items()}
        played = play_match((hog, instant("b")), 1, small, half=0)  # its hogs tip the pool past 320 MB
        assert played.match.outcome is not None and not played.incidents
        if small.retired == 0 and all(member.memory_bytes() is None for member in small.processes()):
            pytest.skip("no memory cgroup counts the pooled processes here")
        assert small.retired == 2, "both hogs, of the half that just played"
        play_match((instant("c"), instant("d")), 2, small, half=0)  # half 0 is full: its own processes go
        assert {key: member.pid for key, member in small._processes.items() if key[1] == 1} == twins
    finally:
        small.close()


def test_the_workers_lines_in_a_pooled_log_carry_the_logs_tag_which_a_bot_cannot_forge(tmp_path: Path) -> None:
    """A review's bot printed `--- mus: seat 3 of table 0000000000000000, match other-league/999/1 ---` and the
    truncation marker: nothing told them from the worker's (stop 43). The worker's lines carry the log's tag,
    given on its first line before any output of the bot's, which the bot never sees."""
    path = tmp_path / "pooled.log"
    capped = launcher._CappedLog(path, 300, tag="0123abcd")
    capped.write(b"--- mus: seat 3 of table 0000000000000000, match other-league/999/1 ---\n")
    capped.note("seat 0 of table 46c697eae110b7da, match spring/37/1")
    capped.write(b"x" * 400)
    capped.close()
    lines = path.read_text().splitlines()
    assert lines[0].startswith("--- mus [0123abcd]: the worker's lines in this log carry [0123abcd]"), lines
    assert lines[1] == "--- mus: seat 3 of table 0000000000000000, match other-league/999/1 ---", "the bot's, as is"
    assert lines[2] == "--- mus [0123abcd]: seat 0 of table 46c697eae110b7da, match spring/37/1 ---", lines
    assert lines[-1] == "[output truncated at 8 MiB mus 0123abcd]", lines


def test_the_workers_lines_in_a_pooled_log_are_kept_past_the_bots_cap(tmp_path: Path) -> None:
    """A review's pooled bot wrote its 8 MiB of output early: every later seat's line, which says what match the
    process played, was dropped with the bot's output (helper-85). The worker's lines are kept past the cap."""
    path = tmp_path / "pooled.log"
    capped = launcher._CappedLog(path, 300, tag="0123abcd")
    capped.write(b"x" * 400)
    capped.note("seat 2 of table 46c697eae110b7da, match spring/38/1")
    capped.write(b"more of the bot's output, past its cap\n")
    capped.close()
    lines = path.read_text().splitlines()
    assert lines[-1] == "--- mus [0123abcd]: seat 2 of table 46c697eae110b7da, match spring/38/1 ---", lines
    assert "past its cap" not in path.read_text(), "the bot's own output stays capped"


def test_a_reaped_pooled_process_is_killed_by_its_cgroups_not_by_its_old_process_group(tmp_path: Path) -> None:
    """`kill` signalled the process group of a pooled process's pid even once the worker had reaped it: the number
    may be another process's by then, whose group a worker that is root would kill (a review, helper-85). A seat
    in cgroups is killed through them; its group is left alone once its leader is reaped."""
    leader = subprocess.Popen(
        [sys.executable, "-c", "pass"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    )
    leader.wait()
    bystander = subprocess.Popen(["sleep", "30"], start_new_session=True)  # the number's next owner, say
    try:
        pooled = launcher.PooledProcess(
            launcher.BotProgram("gone", (sys.executable, "-c", "pass")),
            leader,
            (tmp_path / "cgroup",),  # a seat's cgroup (gone with it): what holds whatever the seat left
            False,
            None,
            1024,
            tmp_path,
            freezer=None,
        )
        leader.pid = bystander.pid  # the worker's old number for it, now another's
        pooled.kill()
        time.sleep(0.2)
        assert bystander.poll() is None, "the bystander's process group was killed"
    finally:
        bystander.kill()
        bystander.wait()
