"""Hosted bots in their sandboxes: each attack of tests/support/hostile.py is blocked, its cause is recorded, and
the other seats, the other matches and the worker go on (issue 9). Real bwrap, real referee, real processes."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import gc
import itertools
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.support.hostile
from referee.engine.outcome import MatchTermination
from referee.engine.rules import Rules
from referee.service.server import start_server
from referee.service.servicer import Referee
from workers import launcher, matches
from workers.launcher import (
    FRAMES_DIR,
    FREEZE,
    HOST_COUNTERS,
    INSTALL_HINT,
    PROC_SHOWN,
    PROC_STATIC,
    SANDBOX_HOME,
    SEAT_UID,
    SEAT_UID_BASE,
    SOCKET_DIR,
    STARTED_MARKER,
    TRUNCATED_MARKER,
    BotProgram,
    Freezer,
    LaunchError,
    Limits,
    Sandbox,
    TurnGate,
    _make_cgroups,
    _usable_hierarchies,
    own_seat_uids,
    resolve_program,
    sandbox_available,
    sandbox_command,
    sandbox_environment,
    seat_command,
    seat_uid_script,
)
from workers.matches import PlayedMatch, fault_records, incident_records, play_on_referee, play_programs
from workers.scratch import own_folder
from workers.seccomp import seccomp_filter

pytestmark = pytest.mark.slow  # hostile bots as sandboxed processes

needs_bwrap = pytest.mark.skipif(not sandbox_available(), reason=INSTALL_HINT)

PROJECT = Path(__file__).resolve().parents[2]

FAST = Rules.from_options({"target_score": 5, "decision_timeout_s": 1, "time_bank_s": 1})
"""Short games and clocks: a seat that never answers forfeits its team within a few seconds."""


@pytest.fixture(autouse=True)
def prompt_reaping(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seats that never exit on their own (a sleeper, one that ignores SIGTERM, forked children) are terminated
    half a second after the outcome instead of EXIT_WAIT_S's 5: every check here is on what happened before."""
    monkeypatch.setattr(matches, "EXIT_WAIT_S", 0.5)


def hostile(tmp_path: Path, modes: str, *arguments: str) -> tuple[BotProgram, str]:
    """The hostile program copied into a bot folder of its own, as a submitted bot would be; and its tag."""
    tag = uuid.uuid4().hex
    folder = tmp_path / f"bot-{modes.replace(',', '-')}"
    folder.mkdir()
    shutil.copy(tests.support.hostile.__file__, folder / "hostile.py")
    command = (sys.executable, str(folder / "hostile.py"), modes, "--tag", tag, *arguments)
    return BotProgram("hostile", command, folder), tag


def attacks(log: Path) -> dict[str, list[str]]:
    """What the bot reported, by attack: 'BLOCKED ...' or 'BREACH ...' lines."""
    found: dict[str, list[str]] = {}
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("ATTACK "):
            _, name, rest = line.split(" ", 2)
            found.setdefault(name, []).append(rest)
    return found


def processes_with(tag: str) -> list[int]:
    """Host processes whose command line carries `tag`: what a seat left behind."""
    alive = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if tag.encode() in (entry / "cmdline").read_bytes():
                    alive.append(int(entry.name))
            except OSError:
                continue
    return alive


def causes(played: PlayedMatch) -> list[tuple[int, str, str]]:
    """The match's faults, then its incidents, as (seat, cause, detail)."""
    records = [*fault_records(played.match), *incident_records(played.incidents)]
    return [(record["seat"], record["cause"], record["detail"]) for record in records]


def cgroup_limits() -> set[str]:
    """What this machine lets the worker bound for a seat as a whole: "pids", "memory" (docs/sandbox.md).
    Elsewhere the pid namespace still holds the seat's processes, and they all die with the match."""
    return {name for hierarchy in _usable_hierarchies() for name in hierarchy.controllers}


# ---------------------------------------------------------------------------------------------- the command


def test_the_sandbox_binds_no_project_root_no_home_and_nothing_writable(tmp_path: Path) -> None:
    program = BotProgram("bot", (sys.executable, "bot.py"), tmp_path)
    environment = sandbox_environment("unix:/run/mus/referee.sock", "token", "unix:/run/mus-frames/play.sock")
    frames = tmp_path / "frames"
    command = sandbox_command(program, Sandbox(tmp_path / "socket", frames_dir=frames), environment)
    assert command[0] == "prlimit" and "bwrap" in command
    bwrap = command[command.index("bwrap") :]
    for option in ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"):
        assert option in bwrap
    if own_seat_uids():  # run by root: the seat becomes a uid of its own, with no capability left
        drop = bwrap[bwrap.index("setpriv") :]
        assert "--unshare-user" not in bwrap and drop[1:5] == ["--reuid", SEAT_UID, "--regid", SEAT_UID]
        assert {"--clear-groups", "--inh-caps=-all", "--bounding-set=-all"} <= set(drop[: drop.index("--")])
    else:
        assert "--unshare-user" in bwrap and "setpriv" not in bwrap
    assert {"--die-with-parent", "--new-session", "--clearenv"} <= set(bwrap)
    assert "--bind" not in bwrap, "no writable bind: partners share nothing but the referee's socket"
    sources = [bwrap[index + 1] for index, word in enumerate(bwrap) if word in ("--ro-bind", "--ro-bind-try")]
    for forbidden in (str(PROJECT), "/", "/root", "/home", "/work", "/proc", "/var/run", "/run"):
        assert forbidden not in sources
    assert not any(source.endswith("mus.db") for source in sources)
    assert str(PROJECT / "clients") in sources and str(tmp_path) in sources
    binds = {bwrap[index + 2]: bwrap[index + 1] for index, word in enumerate(bwrap) if word == "--ro-bind"}
    assert binds[SOCKET_DIR] == str(tmp_path / "socket") and binds[FRAMES_DIR] == str(frames), "both read-only"
    assert sorted(environment) == [
        "HOME",
        "LANG",
        "MUS_FRAMES",
        "MUS_REFEREE",
        "MUS_TOKEN",
        "PATH",
        "PYTHONUNBUFFERED",
    ]
    assert environment["HOME"] == SANDBOX_HOME


PIPE_HOLDER = """\
import fcntl, os, sys, time
def new_pipe_size():
    read, write = os.pipe()
    size = fcntl.fcntl(write, 1032)  # F_GETPIPE_SZ
    os.close(read), os.close(write)
    return size
for _ in range(12):  # 12 processes of 120 pipes of 16 pages: past the kernel's 16,384 pages a user
    if os.fork() == 0:
        held = [os.pipe() for _ in range(120)]
        time.sleep(60)
time.sleep(1.5)
print("holder", new_pipe_size(), flush=True)
time.sleep(60)
"""
"""A seat that moves a per-user count of the kernel: the pages of its pipes, past the soft limit, after which every
new pipe of that user is smaller. A security review read that from another seat's new pipe, one bit a hand."""

PIPE_READER = "import fcntl, os\nread, write = os.pipe()\nprint('reader', fcntl.fcntl(write, 1032), flush=True)\n"


@needs_bwrap
def test_a_seat_sees_still_host_counters_and_no_sysinfo(tmp_path: Path) -> None:
    """Memory, threads, open files and CPU a seat holds or used would move the host's counters in /proc (and
    sysinfo's), which its partner reads in its own turn: a seat sees still copies, and sysinfo is refused. Run
    unconfined, the same bot sees them move: the test is of the sandbox, not of an idle machine."""
    program, _ = hostile(tmp_path, "counters")
    played = asyncio.run(play_programs((program, resolve_program("passive")), FAST, 3, sandbox=Limits()))
    for seat in (0, 2):
        assert attacks(played.logs[seat])["counters"] == ["BLOCKED changed=none sysinfo=refused"]
    free = asyncio.run(play_programs((program, resolve_program("passive")), FAST, 3, log_dir=tmp_path / "free"))
    seen = attacks(free.logs[0])["counters"][0]
    assert seen.startswith("BREACH") and "meminfo" in seen and "loadavg" in seen, seen


@needs_bwrap
def test_a_seat_sees_of_proc_only_its_processes_the_settings_and_still_copies(tmp_path: Path) -> None:
    """/proc's own entries count much for the whole host (ext4's statistics under /proc/fs moved with a seat's
    writes, a review found): a seat sees only launcher.PROC_SHOWN and the still copies, whatever the kernel adds."""
    program, _ = hostile(tmp_path, "procfs")
    played = asyncio.run(play_programs((program, resolve_program("passive")), FAST, 3, sandbox=Limits()))
    allowed = PROC_SHOWN | PROC_STATIC | {name.split("/")[0] for name in HOST_COUNTERS}
    for seat in (0, 2):
        (seen,) = attacks(played.logs[seat])["procfs"]
        readable = set(seen.removeprefix("BLOCKED readable=").split(","))
        assert seen.startswith("BLOCKED") and readable <= allowed and "self" in readable, seen
    free = asyncio.run(play_programs((program, resolve_program("passive")), FAST, 3, log_dir=tmp_path / "free"))
    assert attacks(free.logs[0])["procfs"][0].startswith("BREACH"), "unconfined, the host's /proc is all there"


@needs_bwrap
def test_a_match_whose_logs_lie_in_a_bots_own_folder_shows_that_bot_none_of_them(tmp_path: Path) -> None:
    """A review ran `mus match play --logs logs/` in its bot's folder, as docs/protocol.md shows, and the bot read
    its rivals' logs as they were written (a bot being debugged logs its hand): the sandbox covers the folder with
    an empty one (stop 39). Unconfined, the same bot lists them: the test is of the sandbox."""
    program, _ = hostile(tmp_path, "logs")
    assert program.cwd is not None
    folder = Path(program.cwd)
    logs = folder / "logs"
    program = dataclasses.replace(program, command=(*program.command, "--target", str(logs)))
    played = asyncio.run(play_programs((program, resolve_program("passive")), FAST, 3, sandbox=Limits(), log_dir=logs))
    for seat in (0, 2):
        assert attacks(played.logs[seat])["logs"] == ["BLOCKED empty"]
    shutil.rmtree(logs)
    free = asyncio.run(play_programs((program, resolve_program("passive")), FAST, 3, log_dir=logs))
    seen = attacks(free.logs[0])["logs"][0]
    assert seen.startswith("BREACH") and "seat1-passive" in seen, seen
    refused = ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:  # `--logs .`: covered, the bot would be gone too; refused at seat 1, once seat 0 runs
            asyncio.run(play_programs((resolve_program("passive"), program), FAST, 3, sandbox=Limits(), log_dir=folder))
        except LaunchError as error:
            refused = str(error)
        gc.collect()
    assert "give the logs a folder of their own" in refused, refused
    assert not [str(warning.message) for warning in caught if "never awaited" in str(warning.message)]


def running_spans(log: Path) -> list[tuple[float, float]]:
    """When a seat's process ran (hostile.py's `clock` attack), in seconds of CLOCK_MONOTONIC."""
    line = next(line for line in log.read_text().splitlines() if line.startswith("RUNNING "))
    spans = [span.split("-") for span in line.removeprefix("RUNNING ").split(",")]
    return [(int(start) / 1e6, int(end) / 1e6) for start, end in spans]


def overlap(one: list[tuple[float, float]], other: list[tuple[float, float]], window: tuple[float, float]) -> float:
    """Seconds in `window` in which both ran."""
    low, high = window
    return sum(
        max(0.0, min(end, other_end, high) - max(start, other_start, low))
        for start, end in one
        for other_start, other_end in other
    )


@needs_bwrap
@pytest.mark.parametrize(
    ("frozen", "standalone"),
    [(True, False), (False, False), (True, True)],
    ids=["gated", "without-freezing", "gated-on-a-standalone-referee"],
)
def test_partners_never_run_at_the_same_time_while_their_match_is_played(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, frozen: bool, standalone: bool
) -> None:
    """Partners running at once could pass their cards through the CPU (one spins, the other times its loop). Each
    seat samples when it runs; while the match is played, partners never run together, on the worker's own
    referee or on a standalone one (a league with remote bots; its table tells the worker over admin Turns).
    Without the freezing itself (the same gate, writing nothing), they run together most of the match."""
    if FREEZE not in cgroup_limits():
        pytest.skip("no cgroup v2 here: seats are not stopped outside their turns (docs/sandbox.md)")
    calls: list[tuple[float, frozenset[int]]] = []

    class Recorded(TurnGate):
        """When the seats were stopped (after the call) or all let run (before it: a worker preempted between
        the thaw and its clock would count the seats' first moments of the outcome as the match's)."""

        def __call__(self, running: frozenset[int]) -> asyncio.Future[None] | None:
            before = time.monotonic()
            held = super().__call__(running)
            calls.append((before if len(running) == 4 else time.monotonic(), running))
            return held

    monkeypatch.setattr(matches, "TurnGate", Recorded)
    if not frozen:
        monkeypatch.setattr(Freezer, "_write", lambda self, value: None)
        monkeypatch.setattr(Freezer, "settled", lambda self: True)
    program, _ = hostile(tmp_path, "clock")
    rival = dataclasses.replace(program, name="rival")
    if standalone:
        played = asyncio.run(on_a_standalone_referee((program, rival), tmp_path))
    else:
        played = asyncio.run(play_programs((program, rival), FAST, 5, sandbox=Limits()))
    assert played.match.outcome is not None and not played.incidents
    gated = [at for at, running in calls if len(running) < 4]
    window = (gated[0], min(at for at, running in calls if len(running) == 4 and at > gated[0]))  # the match's end
    spans = {seat: running_spans(log) for seat, log in played.logs.items()}
    ran = {seat: overlap(spans[seat], [window], window) for seat in spans}
    assert all(seconds > 0.05 for seconds in ran.values()), ran
    together = [overlap(spans[0], spans[2], window), overlap(spans[1], spans[3], window)]
    if frozen:
        assert max(together) < 0.002, (together, ran)
    else:
        assert min(together) > 0.1, (together, ran)


async def on_a_standalone_referee(teams: tuple[BotProgram, BotProgram], log_dir: Path) -> PlayedMatch:
    referee = Referee("admin-token")
    server, port = await start_server(referee, "127.0.0.1:0")
    try:
        return await play_on_referee(
            teams,
            FAST,
            5,
            address=f"127.0.0.1:{port}",
            admin_token="admin-token",
            log_dir=log_dir,
            sandbox=Limits(),
        )
    finally:
        await server.stop(grace=1.0)


UNINTERRUPTIBLE = """\
import mmap
while True:  # almost always inside mmap(MAP_POPULATE) or munmap of 300 MB: no signal is taken until they return
    mmap.mmap(-1, 300 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | mmap.MAP_POPULATE).close()
"""
"""A seat that stops only milliseconds after it is told to: a review's partners ran together up to 3.8 ms a turn
while the worker waited 2 ms and then let the next seat run."""

SLEEPER = "import time; time.sleep(60)"


@contextlib.contextmanager
def frozen_seats(*sources: str) -> Iterator[list[tuple[subprocess.Popen[bytes], Freezer]]]:
    """A Python process running each of `sources` in seat cgroups of its own, with its freezer; killed at the end."""
    seats: list[tuple[subprocess.Popen[bytes], Freezer]] = []
    try:
        for source in sources:
            cgroups = _make_cgroups(Limits())
            process = subprocess.Popen(seat_command([sys.executable, "-c", source], cgroups))
            freezer = Freezer.of(cgroups)
            assert freezer is not None
            seats.append((process, freezer))
        yield seats
    finally:
        for process, freezer in seats:
            freezer.close()
            process.kill()
            process.wait()


# held-until-frozen: a limit no system call of the slow seat reaches, even on a loaded machine (it once failed at 1 s).
@pytest.mark.parametrize("limit", [5.0, 0.001], ids=["held-until-frozen", "killed-past-the-limit"])
def test_no_seat_runs_until_the_seats_it_follows_are_frozen_however_long_they_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: float
) -> None:
    if FREEZE not in cgroup_limits():
        pytest.skip("no cgroup v2 here: seats are not stopped outside their turns (docs/sandbox.md)")
    monkeypatch.setattr(launcher, "FREEZE_LIMIT_S", limit)

    async def turns() -> tuple[int, list[bool], bool]:
        with frozen_seats(UNINTERRUPTIBLE, SLEEPER) as seats:
            (slow, slow_freezer), (_, other_freezer) = seats
            gate = TurnGate()
            gate.add(0, slow_freezer)
            gate.add(1, other_freezer)
            await asyncio.sleep(0.3)
            holds, stopped_when_other_ran = 0, []
            for _ in range(10):
                gate(frozenset({0}))
                await asyncio.sleep(0.05)
                held = gate(frozenset({1}))
                if held is not None:
                    holds += 1
                    assert other_freezer.frozen, "no seat runs while one that is to stop is not yet frozen"
                    await asyncio.wait_for(held, limit + 5.0)  # a loaded machine populates 300 MB slowly
                stopped_when_other_ran.append(slow_freezer.settled())
                if slow.poll() is not None:
                    break
            return holds, stopped_when_other_ran, slow_freezer.stuck

    holds, stopped, stuck = asyncio.run(turns())
    assert holds > 0, "the slow seat was inside a long system call at some turn's end"
    assert all(stopped), f"the next seat ran beside one not yet frozen: {stopped}"
    assert stuck == (limit < 0.1), "a seat that does not stop within FREEZE_LIMIT_S is killed"


def test_a_pooled_process_that_holds_the_next_deal_in_long_system_calls_is_killed_within_a_tenth_of_a_second(
    tmp_path: Path,
) -> None:
    """Between its seats, a pooled process is frozen with the worker's next match's seats (`stop_all`);
    one that keeps itself inside long system calls would hold that match, other bots', for a second each time:
    past BYSTANDER_LIMIT_S it is killed (its pool replaces it, and nothing is charged)."""
    if FREEZE not in cgroup_limits():
        pytest.skip("no cgroup v2 here: seats are not stopped outside their turns (docs/sandbox.md)")

    async def deal() -> tuple[float, bool, int | None]:
        with frozen_seats(UNINTERRUPTIBLE.replace("300 << 20", "900 << 20"), SLEEPER) as seats:
            (process, bystander), (_, seat) = seats
            gate = TurnGate()
            gate.add(0, seat)
            gate.stand_by([bystander])
            await asyncio.sleep(0.3)
            longest = 0.0
            for _ in range(40):  # until the bystander is caught inside its 0.4 s mmap at a deal
                started = time.monotonic()
                held = gate(frozenset())
                if held is not None:
                    await asyncio.wait_for(held, 2.0)
                longest = max(longest, time.monotonic() - started)
                if bystander.stuck:
                    break
                gate(frozenset(range(4)))  # between matches: it runs again (its own idle time)
                bystander.thaw()
                await asyncio.sleep(0.05)
            return longest, bystander.stuck, process.wait(timeout=5) if bystander.stuck else None

    waited, stuck, code = asyncio.run(deal())
    assert stuck and code == -signal.SIGKILL and waited < 0.5, (waited, stuck, code)


@pytest.mark.parametrize("spin", [launcher.FROZEN_SPIN_S, 0.0], ids=["spun", "held"])
def test_a_bystander_seen_frozen_is_left_alone_at_every_turn(spin: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """The gate runs at every turn of a match, beside up to 24 pooled processes kept frozen: one seen frozen stays
    so until it is thawed, and the turns do not look at it again, whether the seat stopped at a turn is seen
    frozen at once or the table is held for it (`held`: every stop); thawed (between matches), it is stopped
    again."""
    if FREEZE not in cgroup_limits():
        pytest.skip("no cgroup v2 here: seats are not stopped outside their turns (docs/sandbox.md)")
    monkeypatch.setattr(launcher, "FROZEN_SPIN_S", spin)

    async def turns() -> tuple[int, int, bool]:
        with frozen_seats(SLEEPER, SLEEPER) as seats:
            (_, bystander), (_, seat) = seats
            return await look_at(bystander, seat)

    async def look_at(bystander: Freezer, seat: Freezer) -> tuple[int, int, bool]:
        looked: list[str] = []

        def watched(name: str) -> None:
            method = getattr(bystander, name)

            def call() -> object:
                looked.append(name)
                return method()

            setattr(bystander, name, call)

        watched("freeze")
        watched("settled")
        if spin == 0.0:  # the seat is first seen running after each stop, so the gate holds the table for it
            fresh: list[bool] = []
            seat_freeze, seat_settled = seat.freeze, seat.settled

            def freeze() -> None:
                fresh[:] = [not seat.frozen]
                seat_freeze()

            def settled() -> bool:
                if fresh and fresh.pop():
                    return False
                return seat_settled()

            seat.freeze, seat.settled = freeze, settled  # type: ignore[method-assign]
        gate = TurnGate()
        gate.add(0, seat)
        held = gate.stand_by([bystander])
        if held is not None:
            await asyncio.wait_for(held, 5.0)
        assert bystander.still, "seen frozen"
        looked.clear()
        for _ in range(10):
            for running in (frozenset({0}), frozenset()):
                held = gate(running)
                if held is not None:
                    await asyncio.wait_for(held, 5.0)
        while_still = len(looked)
        bystander.thaw()  # between matches: it runs, then is stopped with the next match's seats
        held = gate(frozenset({0}))
        if held is not None:
            await asyncio.wait_for(held, 5.0)
        return while_still, len(looked), bystander.frozen

    while_still, in_all, frozen_again = asyncio.run(turns())
    assert while_still == 0, f"twenty turns looked at the frozen bystander {while_still} times"
    assert frozen_again and in_all > 0, "once thawed, it is stopped again"


@needs_bwrap
def test_seats_running_as_their_own_users_share_no_per_user_count_of_the_kernel(tmp_path: Path) -> None:
    if not own_seat_uids():
        pytest.skip("the worker is not root: every seat runs as its user, mapped to nobody (docs/sandbox.md)")
    if int(Path("/proc/sys/fs/pipe-user-pages-soft").read_text()) == 0:
        pytest.skip("no per-user limit on pipe pages on this machine")

    def start(source: str) -> subprocess.Popen[str]:
        program = BotProgram("seat", (sys.executable, "-c", source))
        command = seat_command(sandbox_command(program, Sandbox(tmp_path), {"PATH": "/usr/bin:/bin"}, socket=False))
        return subprocess.Popen(command, stdout=subprocess.PIPE, text=True, start_new_session=True)

    holder = start(PIPE_HOLDER)
    try:
        assert holder.stdout is not None
        lines = [holder.stdout.readline() for _ in range(2)]
        assert lines[0] == STARTED_MARKER.decode() and lines[1].startswith("holder "), lines
        reader = start(PIPE_READER)
        output, _ = reader.communicate(timeout=30)
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
    assert int(lines[1].split()[1]) < 65536, "the holder's own new pipes shrank: it is past its user's soft limit"
    assert output.splitlines()[-1] == "reader 65536", "the other seat, another user, sees nothing of it"


def _uids(pids: str, keys: tuple[int, ...] | None = None) -> list[int]:
    """What `seat_uid_script` makes of each pid the shell loop `pids` gives, less SEAT_UID_BASE."""
    script = f"for p in {pids}; do {seat_uid_script('$p', keys)}; echo $uid; done"
    output = subprocess.run(["/bin/sh", "-c", script], capture_output=True, text=True, check=True).stdout
    return [int(word) - SEAT_UID_BASE for word in output.split()]


def test_a_seats_uid_is_a_secret_permutation_of_its_pid_which_tells_nothing_of_the_pid_counter() -> None:
    """The uid was SEAT_UID_BASE plus the pid: a seat read the host's pid counter off it, and a bot moved the counter
    after its match (forks) to tell its seat in the duplicate twin three bits of a rival's hand (a security review,
    stop 43). A permutation keeps every live seat's uid its own; keys the bot never sees keep the counter out."""
    keys = (123456, 7654321, 42, 9999999)
    pids = "$(seq 30000 34095)"
    uids = _uids(pids, keys)
    assert len(set(uids)) == 4096 and all(0 <= uid < 1 << 22 for uid in uids), "one uid a pid, in range"
    steps = {later - earlier for earlier, later in itertools.pairwise(uids)}
    assert len(steps) > 4000, "consecutive pids give unrelated uids: no step a seat could count"
    assert _uids(pids, (1, 2, 3, 4)) != uids, "another machine's keys, another permutation"


def test_the_machines_seat_uid_keys_are_written_once_root_only_and_refused_when_anyone_else_could_have(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not own_seat_uids():
        pytest.skip("the worker is not root: seats run as nobody in a user namespace, no uid of their own")
    monkeypatch.setenv("MUS_HOST_LOCK", str(tmp_path / "play.lock"))
    launcher._seat_uid_keys.cache_clear()
    try:
        keys = launcher._seat_uid_keys()
        path = tmp_path / "play.lock.seat-uid-key"
        assert path.stat().st_mode & 0o777 == 0o600 and len(keys) == 4
        assert sorted(item.name for item in tmp_path.iterdir()) == [path.name], "the draft linked into place, gone"
        launcher._seat_uid_keys.cache_clear()
        assert launcher._seat_uid_keys() == keys, "every worker of the machine reads the same keys"
        path.chmod(0o644)
        launcher._seat_uid_keys.cache_clear()
        with pytest.raises(LaunchError, match="is not the seat uid keys a root worker writes"):
            launcher._seat_uid_keys()
        launcher._seat_uid_keys.cache_clear()
        sandbox_available.cache_clear()
        assert not sandbox_available(), "no sandbox while the keys are refused: the worker refuses its matches"
    finally:
        launcher._seat_uid_keys.cache_clear()
        sandbox_available.cache_clear()


@needs_bwrap
def test_a_seat_runs_as_the_permuted_pid_of_its_bwrap_not_the_pid(tmp_path: Path) -> None:
    if not own_seat_uids():
        pytest.skip("the worker is not root: every seat runs as its user, mapped to nobody (docs/sandbox.md)")
    program = BotProgram("seat", (sys.executable, "-c", "import os; print(os.getuid(), os.getgid())"))
    command = seat_command(sandbox_command(program, Sandbox(tmp_path), {"PATH": "/usr/bin:/bin"}, socket=False))
    seat = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    output, _ = seat.communicate(timeout=30)
    uid, gid = (int(word) for word in output.splitlines()[-1].split())
    assert uid == gid and uid - SEAT_UID_BASE == _uids(str(seat.pid))[0] != seat.pid, (uid, seat.pid)


# ---------------------------------------------------------------------------------------------- attacks


@needs_bwrap
def test_a_hosted_bot_reads_no_database_no_secret_no_process_reaches_no_port_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mus.db").write_bytes(b"SQLite format 3\0 the deals")
    elsewhere = tmp_path / "data" / "league.db"
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(b"SQLite format 3\0")
    monkeypatch.setenv("MUS_DATABASE_URL", f"sqlite:///{elsewhere}")
    monkeypatch.setenv("MUS_ADMIN_TOKEN", "the-admin-token")
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    port = listener.getsockname()[1]
    venv = Path(sys.prefix)
    program, tag = hostile(
        tmp_path,
        "env,db,proc,signal,tcp,frames,conns,write,share,locks,sigterm",
        *("--db", str(elsewhere), "--pid", str(os.getpid()), "--port", str(port)),
        *("--target", str(PROJECT), "--target", str(PROJECT / "referee"), "--target", str(venv)),
    )
    played = asyncio.run(play_programs((program, resolve_program("passive")), FAST, 3, sandbox=Limits()))

    assert played.match.outcome is not None and played.match.outcome.termination is MatchTermination.NORMAL
    assert causes(played) == [], "every seat played: the attacks cost the bot nothing and harmed nobody"
    for seat in (0, 2):
        seen = attacks(played.logs[seat])
        assert set(seen) == {
            *("env", "db", "proc", "signal", "ptrace", "tcp", "frames", "conns", "write", "share", "locks"),
            "sigterm",
        }
        # A folder under /tmp that is not itself bound (the project root of a clone in /tmp) lies, inside the
        # sandbox, on the seat's private tmpfs: writing there reaches nothing of the host (checked below).
        breaches = [
            f"{name} {line}"
            for name, lines in seen.items()
            for line in lines
            if line.startswith("BREACH") and not (name == "write" and line.startswith("BREACH wrote /tmp/"))
        ]
        assert breaches == []
        assert "visible_pids=2 " in seen["proc"][0], "its own pid namespace: bwrap's init and itself"
        no_socket = "EAFNOSUPPORT" if seccomp_filter() is not None else "ECONNREFUSED"  # no TCP socket at all
        assert len(seen["tcp"]) == 4 and all(no_socket in line for line in seen["tcp"]), seen["tcp"]
        # Its own sockets, alone in their folder; no other seat's is in reach (each binds only its own).
        assert seen["frames"] == ["BLOCKED own=unix:/run/mus/play.sock folder=play.sock,referee.sock others_reached=0"]
        # Of 60 connections to its referee socket, the referee held 4 at most (the worker's descriptors are bounded).
        (conns,) = seen["conns"]
        assert conns.startswith("BLOCKED held=") and int(conns.split("=")[1].split()[0]) <= 4, conns
        assert "joined over frames" in played.logs[seat].read_text(), "the seat then played over its frames"
        if seccomp_filter() is not None:  # the shared files' locks and watches: no channel between seats
            (locks,) = seen["locks"]
            assert all(
                f"{name}=EPERM" in locks
                for name in ("flock", "fcntl_lock", "fcntl_getlk", "inotify", "unshare_user", "io_setup")
            ), locks
            assert all(f"{name}=ENOSYS" in locks for name in ("fadvise", "cachestat", "statvfs")), locks
            assert "preadv2=ENOTSUP" in locks, "the C library's answer to RWF_NOWAIT on a kernel without preadv2"
            assert all(f"{name}=EAFNOSUPPORT" in locks for name in ("inet", "inet6")), locks
            assert all(f"{name}=ENOPROTOOPT" in locks for name in ("cookie", "peer_pidfd", "pass_pidfd")), locks
            assert all(f"{name}=EAFNOSUPPORT" in locks for name in ("sock_diag", "netlink")), locks
            assert all(f"{name}=EPERM" in locks for name in ("pidfd", "setsid", "loginuid")), locks
            assert "mincore=ENOSYS" in locks, locks
        assert "ptmx=EACCES" in seen["locks"][0], "no pseudo-terminal: their count is host-wide"
        # Under /tmp, the project's folders inside the sandbox are bwrap's, on the seat's private tmpfs: writable by
        # a seat mapped to their owner, refused (EACCES) to a seat that is a user of its own.
        private = sum(line.startswith("BREACH wrote /tmp/") for line in seen["write"])
        assert private == (1 if PROJECT.is_relative_to("/tmp") and not own_seat_uids() else 0)
        refused = sum("EROFS" in line or "EACCES" in line for line in seen["write"])
        assert refused == 5 - private, seen["write"]  # its folder, the venv, 3 targets
    with pytest.raises(BlockingIOError):
        listener.accept()  # nobody reached the host's port
    listener.close()
    for folder in (program.cwd, PROJECT, PROJECT / "referee", venv):
        assert folder is not None and not list(folder.glob(f"hostile-{tag}.txt"))
    assert processes_with(tag) == [], "the seat that ignores SIGTERM is killed at the end all the same"


@needs_bwrap
def test_forks_memory_files_and_output_are_bounded_and_the_cause_is_recorded(tmp_path: Path) -> None:
    forker, fork_tag = hostile(tmp_path, "forkalloc,fork,exit")
    greedy, greedy_tag = hostile(tmp_path, "alloc,fsize,print")
    limits = Limits(cpu_s=20, processes=64)

    async def both() -> tuple[PlayedMatch, PlayedMatch]:
        # The forking seats exit after their attacks, their children still alive: a crash, then their decisions
        # time out at once and their team forfeits. The greedy seats join after theirs and play their match out.
        # The join deadline only bounds the attacks, however loaded the machine is (20 s was seen too short for
        # the forking seats' attacks with three of these tests at once beside two busy loops, and 12 s for the
        # greedy seats' at load 6); a seat that misses it is absent instead.
        honest = resolve_program("passive")
        forking = play_programs((forker, honest), FAST, 3, sandbox=limits, join_timeout_s=60)
        greedy_match = play_programs((honest, greedy), FAST, 3, sandbox=limits, join_timeout_s=60)
        first, second = await asyncio.gather(forking, greedy_match)
        return first, second

    forked, greedy_played = asyncio.run(both())
    outcome = forked.match.outcome
    assert outcome is not None and outcome.winner == 1, "the forking team could not play; the other team wins"
    charged = {(seat, cause) for seat, cause, _ in causes(forked)}
    assert {seat for seat, _ in charged} == {0, 2}, charged
    assert all(charged & {(seat, "crash"), (seat, "absent")} for seat in (0, 2)), charged
    for seat in (0, 2):
        seen = attacks(forked.logs[seat])
        (line,) = seen["fork"]
        forked_count = int(line.split("forked=")[1].split()[0])
        if "pids" in cgroup_limits():
            assert line.startswith("BLOCKED") and forked_count < limits.processes
        if "memory" in cgroup_limits():
            (line,) = seen["forkalloc"]
            assert line.startswith("BLOCKED"), "2.4 GiB held by four processes of one seat: over its 1 GiB"
    assert greedy_played.match.outcome is not None
    assert causes(greedy_played) == [], "the greedy seats were bounded, not charged, and played their match out"
    for seat in (1, 3):
        log = greedy_played.logs[seat].read_bytes()
        assert len(log) <= limits.output_bytes + len(TRUNCATED_MARKER)
        assert log.endswith(TRUNCATED_MARKER), "the 20 MiB printed are cut at 8 MiB, with a marker"
        head = attacks(greedy_played.logs[seat])
        assert head["alloc"][0].startswith("BLOCKED MemoryError")
        assert head["fsize"][0].startswith("BLOCKED") and "EFBIG" in head["fsize"][0]
    assert processes_with(fork_tag) == processes_with(greedy_tag) == [], "the forked children died with their seat"


@needs_bwrap
def test_a_seat_that_exits_with_a_killed_processs_status_is_not_recorded_as_killed_for_a_limit(tmp_path: Path) -> None:
    """A sandboxed seat's status is its shell's, 128 plus the signal's number for a process killed: a review's bot
    that exited with 152 was recorded as killed for its CPU time, and with 137 as killed by SIGKILL (stop 44). A
    crash all the same; what it says is what the worker knows."""
    forgers = (BotProgram("forger", ("sh", "-c", f"exit {code}"), tmp_path) for code in (152, 137))
    played = asyncio.run(play_programs((next(forgers), next(forgers)), FAST, 5, sandbox=Limits()))
    details = {detail for seat, cause, detail in causes(played) if cause == "crash"}
    assert details and details <= {
        "the bot process ended with status 152, as one killed by SIGXCPU (the CPU time limit's signal) does",
        "the bot process ended with status 137, as one killed by SIGKILL does",
    }, details


@needs_bwrap
def test_a_seat_killed_for_cpu_time_and_a_seat_that_sleeps_are_results_and_another_match_goes_on(
    tmp_path: Path,
) -> None:
    spinner, spin_tag = hostile(tmp_path, "cpu")
    sleeper, sleep_tag = hostile(tmp_path, "sleep")

    async def both() -> tuple[PlayedMatch, PlayedMatch]:
        # The spinners never join: the table waits for them until the CPU limit kills them (a crash ends the wait),
        # however loaded the machine is; join_timeout_s only bounds a limit that never fires.
        hostile_match = play_programs((spinner, sleeper), FAST, 5, sandbox=Limits(cpu_s=1), join_timeout_s=60)
        honest = play_programs((resolve_program("random"), resolve_program("passive")), FAST, 5, sandbox=Limits())
        first, second = await asyncio.gather(hostile_match, honest)
        return first, second

    played, honest = asyncio.run(both())
    assert played.match.outcome is not None
    recorded = causes(played)
    crashes = {(seat, detail) for seat, cause, detail in recorded if cause == "crash"}
    assert crashes and crashes <= {(0, "killed: CPU time limit (SIGXCPU)"), (2, "killed: CPU time limit (SIGXCPU)")}
    assert {cause for seat, cause, _ in recorded if seat % 2 == 1} <= {"timeout"}, "a sleeper never answers"
    assert honest.match.outcome is not None and honest.match.outcome.termination is MatchTermination.NORMAL
    assert causes(honest) == [], "the match beside the hostile one was played as if alone"
    assert processes_with(spin_tag) == processes_with(sleep_tag) == []


@needs_bwrap
def test_on_a_standalone_referee_the_seats_reach_it_only_through_their_unix_socket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The referee listens on TCP, yet the sandboxed seats have no network: the worker forwards their socket, from
    a folder named by the worker's pid, which the next worker removes should this one be killed (a review's killed
    workers left theirs, stop 39)."""
    made: list[Path] = []

    def recorded(prefix: str) -> Path:
        made.append(own_folder(prefix))
        return made[-1]

    monkeypatch.setattr(matches, "own_folder", recorded)

    async def on_referee() -> tuple[PlayedMatch, int]:
        referee = Referee("admin-token")
        server, port = await start_server(referee, "127.0.0.1:0")
        program, _ = hostile(tmp_path, "tcp", "--port", str(port))
        try:
            played = await play_on_referee(
                (program, resolve_program("random")),
                FAST,
                11,
                address=f"127.0.0.1:{port}",
                admin_token="admin-token",
                log_dir=tmp_path,
                sandbox=Limits(),
            )
        finally:
            await server.stop(grace=1.0)
        return played, port

    played, port = asyncio.run(on_referee())
    assert played.match.outcome is not None and played.match.outcome.termination is MatchTermination.NORMAL
    assert fault_records(played.match) == [] and incident_records(played.incidents) == []
    for seat in (0, 2):
        log = played.logs[seat]
        assert log is not None
        no_socket = "EAFNOSUPPORT" if seccomp_filter() is not None else "ECONNREFUSED"  # no TCP socket at all
        assert f"BLOCKED 127.0.0.1:{port}: {no_socket}" in attacks(log)["tcp"], "not even its own referee's port"
    assert sorted(folder.name.rsplit("-", 1)[0] for folder in made) == [
        f"mus-referee-seat{seat}-{os.getpid()}" for seat in range(4)
    ]


QUITTER = """
import os
from clients.bots.random_bot import RandomBot
from clients.sdk.runner import run_main

class Quitter(RandomBot):
    def decide(self, view):
        os._exit(3)

run_main(Quitter())
"""


@needs_bwrap
def test_a_seat_that_joined_its_table_has_crashed_when_it_exits_whatever_its_output_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A seat whose output lacks the sandbox's start line counts as a sandbox that never started: the match is
    voided onto a fresh deal, nothing charged. A review's bot took that line out of its own output and threw away a
    bad hand at will (stop 43; the pipes are sealed since). A seat that joined its table ran: its exit is a crash."""
    monkeypatch.setattr(
        launcher.BotProcess,
        "sandbox_failed",
        property(lambda process: "no start line" if process.returncode is not None else ""),
    )
    (tmp_path / "quitter.py").write_text(QUITTER)
    quitter = BotProgram("quitter", (sys.executable, "quitter.py"), tmp_path)
    played = asyncio.run(play_programs((quitter, resolve_program("passive")), FAST, 1, sandbox=Limits()))
    crashes = {(seat, detail) for seat, cause, detail in causes(played) if cause == "crash"}
    assert crashes and crashes <= {(0, "the bot process exited with code 3"), (2, "the bot process exited with code 3")}


@needs_bwrap
def test_a_sandbox_that_cannot_start_voids_the_match_while_a_bot_that_exits_at_once_has_crashed(
    tmp_path: Path,
) -> None:
    gone = tmp_path / "removed-after-it-was-checked"
    vanished = BotProgram("vanished", (sys.executable, "bot.py"), gone)
    with pytest.raises(LaunchError, match="sandbox did not start: bwrap: Can't find source path"):
        asyncio.run(play_programs((vanished, resolve_program("passive")), FAST, 1, sandbox=Limits()))

    quitter = BotProgram("quitter", (sys.executable, "-c", "raise SystemExit(3)"))
    played = asyncio.run(play_programs((quitter, resolve_program("passive")), FAST, 1, sandbox=Limits()))
    assert {(seat, detail) for seat, cause, detail in causes(played) if cause == "crash"} == {
        (0, "the bot process exited with code 3"),
        (2, "the bot process exited with code 3"),
    }
    assert "mus-sandbox" not in played.logs[0].read_text(), "the start marker stays out of the seat's log"


def test_no_word_of_a_command_but_its_program_is_bound_in_even_after_a_stdio_bridges_prefix(tmp_path: Path) -> None:
    """A review registered `python -m clients.stdio -- /another/bot/secret.txt`, with a `clients/stdio.py` of its own
    in its folder: the named file was bound into its sandbox, and the seat read another bot's folder, a worker's
    log. Only the program (the interpreter here) and the bot's own folder are bound."""
    secret = tmp_path / "victim" / "strategy.txt"
    secret.parent.mkdir()
    secret.write_text("always envido with 31")
    (tmp_path / "evil").mkdir()
    program = BotProgram("evil", (sys.executable, "-m", "clients.stdio", "--", str(secret)), tmp_path / "evil")
    command = sandbox_command(program, Sandbox(tmp_path / "socket"), {"PATH": "/usr/bin:/bin"})
    sources = [command[index + 1] for index, word in enumerate(command) if word in ("--ro-bind", "--ro-bind-try")]
    assert not any(str(secret).startswith(source) for source in sources if source != "/"), sources


def test_a_worker_without_a_cpu_cgroup_to_make_and_autogroups_off_says_seats_do_not_share_the_cpu_as_equals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Before the deal every seat runs. A seat's cpu cgroup, or else its session's autogroup, makes them share the
    CPU as equals (docs/sandbox.md); with neither, the worker says so."""
    switch = tmp_path / "sched_autogroup_enabled"
    monkeypatch.setattr(launcher, "AUTOGROUPS", switch)
    pids = launcher._Hierarchy(tmp_path, ("pids",), 1)
    cases = (((), "0", "/", True), (("cpu",), "0", "/", False), ((), "1", "/", False), ((), "1", "/service", True))
    for controllers, autogroups, own_cpu, warned in cases:  # autogroups apply to the root cpu cgroup's tasks only
        found = (pids, *([launcher._Hierarchy(tmp_path / "cpu", controllers, 1)] if controllers else []))
        monkeypatch.setattr(launcher, "_hierarchies", lambda found=found: found)
        monkeypatch.setattr(launcher, "_own_cgroups", lambda own_cpu=own_cpu: {"cpu": own_cpu})
        switch.write_text(autogroups + "\n")
        _usable_hierarchies.cache_clear()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=launcher.log.name):
            _usable_hierarchies()
        said = any("autogroups" in record.getMessage() for record in caplog.records)
        assert said is warned, (controllers, autogroups, own_cpu, caplog.text)
    _usable_hierarchies.cache_clear()


def test_each_seat_has_a_cpu_cgroup_of_its_own_where_autogroups_do_not_share_the_cpu_between_seats(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seats that run at once (before the deal) share the CPU as equals whatever their processes: with autogroups
    off, a seat that forked 50 spinning processes held its rival's join back 10-12 s, and not at all with a cpu
    cgroup a seat (stop 38). Where autogroups share it, no cpu cgroup is made (it would cost context switches)."""
    switch = tmp_path / "sched_autogroup_enabled"
    monkeypatch.setattr(launcher, "AUTOGROUPS", switch)
    try:
        for autogroups in ("1", "0"):
            switch.write_text(autogroups + "\n")
            _usable_hierarchies.cache_clear()
            made = launcher._make_cgroups(Limits())
            try:
                weights = [path for path in made for name in ("cpu.shares", "cpu.weight") if (path / name).is_file()]
            finally:
                for path in made:
                    launcher._remove_cgroup(path)
            if autogroups == "1" and launcher._autogrouped():
                assert not weights, made
            elif autogroups == "0":
                if "cpu" not in cgroup_limits():
                    pytest.skip("no cpu cgroup can be made here")
                assert weights, made
    finally:
        _usable_hierarchies.cache_clear()


@needs_bwrap
def test_a_seat_whose_freezer_cannot_be_opened_never_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`Freezer.of` took any error opening a seat's cgroup.freeze (out of descriptors, say) for no v2 cgroup, and the
    seat ran ungated: at the same time as its partner, which the turn gate exists to prevent (a review, helper-85).
    The launch fails instead, before the seat's process starts; nothing is charged to the bot."""
    if FREEZE not in cgroup_limits():
        pytest.skip("no cgroup v2 here: seats are not stopped outside their turns (docs/sandbox.md)")
    started = tmp_path / "started"

    def out_of_descriptors(self: Freezer, cgroup: Path) -> None:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(Freezer, "__init__", out_of_descriptors)
    program = BotProgram("seat", ("sh", "-c", f"touch {started}; sleep 30"), tmp_path)
    sandbox = Sandbox(tmp_path, Limits())
    with pytest.raises(LaunchError, match="Too many open files"):
        asyncio.run(launcher.launch_bot(program, "unix:/nowhere", "token", sandbox=sandbox))
    time.sleep(0.3)
    assert not started.exists(), "the seat ran"
