"""Play one match between two bot programs on a referee embedded in this process, over real gRPC; or, when a
side is a remote bot, on the standalone referee (`mus referee serve`), which offers it its seats in the lobby.

Both are one path (`_play`): the worker is a client of the referee's admin API (create the table, report a
crash, wait for the end, fetch the replay) and builds the result from the fetched replay. The referee in this
process is called without a transport (`InProcessAdmin`: the same servicer, token and messages), and its finished
match is taken as it is; a standalone referee's replay record is re-simulated, and must replay to itself.
Team 0 (seats 0 and 2) is the first program's partnership and team 1 (seats 1 and 3) the second's; each hosted
seat is its own process. The league runner and `mus match play` both use this.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeAlias, TypeVar

import grpc

from mus.v1 import admin_pb2, admin_pb2_grpc
from referee import wire
from referee.causes import CAUSE_FROM_PROTO, IncidentCause
from referee.engine.events import Fault
from referee.engine.match import Match, StepKind
from referee.engine.outcome import FaultCause
from referee.engine.replay import dumps_record, match_record, replay_record
from referee.engine.rules import Rules
from referee.service.frames import FrameServer
from referee.service.loop import new_event_loop
from referee.service.server import start_server
from referee.service.servicer import InProcessAdmin, PlayServicer, Referee
from referee.service.table import Incident
from workers.host_lock import host_play_lock
from workers.launcher import (
    FRAMES_DIR,
    SOCKET_DIR,
    BotProcess,
    BotProgram,
    LaunchError,
    Limits,
    PooledProcess,
    Sandbox,
    TurnGate,
    launch_bot,
    open_to_seat,
    stop_all,
)
from workers.pool import BotPool, place
from workers.relay import SeatRelay, open_relay
from workers.scratch import own_folder

log = logging.getLogger(__name__)

WARM_JOIN_S = 10.0
"""A match's join timeout when all four seats go to pooled processes that have played before (`play_programs`):
they join within milliseconds; one that does not join within this is absent."""

EXIT_WAIT_S = 5.0
"""How long bot processes get to exit on their own after the match before they are killed."""

POOL_WATCH_S = 0.05
"""How often a match checks that its pooled seat processes are alive (they are not children of its loop)."""


@dataclass(frozen=True)
class PlayedMatch:
    """A finished match as its referee's replay tells it, and where each hosted seat's bot output was written.

    `launched_at`, `started_at`, `ended_at` and `exited_at` (`time.monotonic` of this process) say when the first
    bot was launched, when the match started (the referee's time from the table's creation to its start, counted
    from the launch), when the worker learnt of its end and when the last bot had exited, for
    `bench.league_probe`.
    """

    table_id: str
    match: Match
    """The match: re-simulated from a standalone referee's replay record (rules, seed, steps), or the one the
    referee in this process played. Its outcome is the match's."""
    record_json: str
    """The referee's replay record (`match_record`) as it wrote it (`dumps_record`), stored as is; a standalone
    referee's is checked against the re-simulation."""
    incidents: tuple[Incident, ...]
    """The referee's incidents, in the order recorded (`incident_records`); the faults are the match's."""
    decision_seconds: tuple[tuple[float, ...], ...]
    """Each seat's decision times, in seat order."""
    joined_as: tuple[str, ...]
    """The name each seat's bot gave in its Join (empty for a seat that never joined), in seat order."""
    logs: dict[int, Path]
    """Where each hosted seat's bot output was written, by seat (a remote seat has none)."""
    _: KW_ONLY
    launched_at: float
    started_at: float
    ended_at: float
    exited_at: float
    bots_cpu_s: float | None
    """CPU-seconds of the hosted seats' processes, from their cgroups; None where a seat had none."""


class EmbeddedReferee:
    """A referee in this process, on unix sockets in private folders, that outlives the matches played on it.

    A league worker keeps one for its life (`worker_referee`). A pooled process is served on sockets in its own
    folder for its whole life (the same address in every seat line, so the bot may keep its channel open from seat
    to seat); a launched seat, on sockets in a folder of its own for its match (`open_seat`). No socket is shared
    by two seats. Its admin API is called in this process (`InProcessAdmin`), under an admin token of this
    referee's own (never in a bot's environment); no socket serves it. `play_programs` makes a short-lived
    one when it is given none (`mus match play`, `mus bot check`).
    """

    def __init__(self) -> None:
        suffix = "x" * 8  # what mkdtemp appends to a prefix
        own = f"{FRAMES_PREFIX}-{os.getpid()}-{suffix}"  # scratch.own_folder's name
        longest = Path(tempfile.gettempdir(), own, SEAT_FRAMES_PREFIX + suffix, FRAMES_SOCKET)
        if len(bytes(longest)) > MAX_SOCKET_PATH:
            raise LaunchError(
                f"the temporary folder {tempfile.gettempdir()!r} is too long a path for the referee's unix sockets"
                f" ({len(bytes(longest))} bytes with them, at most {MAX_SOCKET_PATH}): set TMPDIR to a shorter one"
            )
        self.referee = Referee(resends_per_table=True)  # a duplicate pair's halves share nothing (see there)
        self.frames_dir = own_folder(FRAMES_PREFIX)
        """Where each launched seat's own folder of sockets is made (`open_seat`; a sandbox binds only its own)."""
        self._pooled: dict[Path, tuple[grpc.aio.Server, FrameServer]] = {}
        """The servers listening in each pooled process's folder (gRPC and frames), by folder."""

    async def serve(self, member: PooledProcess) -> tuple[str, str]:
        """Listen in `member`'s own folder (once for its life), for gRPC and for frames (`service.frames`); the
        addresses of the two sockets on this host."""
        folder = member.socket_dir
        if folder not in self._pooled:
            server = await self.seat_server(folder)
            self._pooled[folder] = (server, await FrameServer(self.referee, folder / FRAMES_SOCKET).start())
            open_to_seat(folder / FRAMES_SOCKET)
        return f"unix:{folder / POOLED_SOCKET}", f"unix:{folder / FRAMES_SOCKET}"

    async def seat_server(self, folder: Path) -> grpc.aio.Server:
        """This referee's gRPC server on a socket in one seat's (or one pooled process's) own folder, taking at most
        MAX_SEAT_CONNECTIONS connections at once: whatever the bot opens there, it cannot exhaust this worker's
        file descriptors, which every other match and the database need."""
        address = f"unix:{folder / POOLED_SOCKET}"
        server, _ = await start_server(
            self.referee, address, public_address=address, admin=False, max_connections=MAX_SEAT_CONNECTIONS
        )
        open_to_seat(folder / POOLED_SOCKET)
        return server

    async def open_seat(self) -> SeatFrames:
        """One launched seat's own folder, with its frames socket and this referee's gRPC socket (`seat_server`),
        which no other seat can reach. Closed after the match."""
        return await SeatFrames.open(self.referee, self.frames_dir, grpc_server=self.seat_server)

    async def forget(self, pool: BotPool) -> None:
        """Stop listening in the folders of `pool`'s processes that it has retired (a worker may have two pools,
        one for sandboxed leagues and one for unconfined ones: the other's processes are left alone)."""
        kept = {member.socket_dir for member in pool.processes()}
        gone = [folder for folder in self._pooled if folder.parent == pool.root and folder not in kept]
        servers = [self._pooled.pop(folder) for folder in gone]
        await asyncio.gather(
            *(server.stop(grace=0.5) for server, _ in servers), *(frames.stop() for _, frames in servers)
        )
        for folder in gone:
            (folder / POOLED_SOCKET).unlink(missing_ok=True)

    async def close(self) -> None:
        """Stop every server and remove its sockets (those in pooled processes' folders included)."""
        folders = list(self._pooled)
        servers = [server for server, _ in self._pooled.values()]
        frames = [frames for _, frames in self._pooled.values()]
        self._pooled = {}
        await asyncio.gather(*(server.stop(grace=1.0) for server in servers), *(server.stop() for server in frames))
        for folder in folders:
            (folder / POOLED_SOCKET).unlink(missing_ok=True)
        shutil.rmtree(self.frames_dir, ignore_errors=True)


@dataclass(frozen=True, slots=True)
class SeatFrames:
    """A launched seat's own folder of sockets: its frames socket and, on a worker's referee, its gRPC socket
    (`EmbeddedReferee.open_seat`)."""

    folder: Path
    server: FrameServer
    grpc_server: grpc.aio.Server | None = None

    @classmethod
    async def open(
        cls,
        referee: Referee,
        parent: Path,
        servicer: PlayServicer | None = None,
        *,
        grpc_server: Callable[[Path], Awaitable[grpc.aio.Server]] | None = None,
    ) -> SeatFrames:
        """A frames socket (`service.frames`, served by `servicer` if given) in a new private folder under
        `parent`, which only that seat's sandbox binds: no seat can reach or fill another's. `grpc_server` starts
        the referee's gRPC server in the folder too (POOLED_SOCKET); the sandbox then binds the folder at
        SOCKET_DIR (`referee_address`), else at FRAMES_DIR."""
        folder = open_to_seat(Path(tempfile.mkdtemp(prefix=SEAT_FRAMES_PREFIX, dir=parent)))
        server = FrameServer(referee, folder / FRAMES_SOCKET, servicer=servicer)
        served: grpc.aio.Server | None = None
        try:
            await server.start()
            open_to_seat(folder / FRAMES_SOCKET)
            if grpc_server is not None:
                served = await grpc_server(folder)
            return cls(folder, server, served)
        except BaseException:  # a failure, or the match cancelled as the socket opened: nothing stays listening
            await server.stop()
            if served is not None:
                await served.stop(grace=None)
            shutil.rmtree(folder, ignore_errors=True)
            raise

    def address(self, confined: bool) -> str:
        """MUS_FRAMES: the socket as the seat sees it, inside its sandbox or on this host."""
        if not confined:
            return f"unix:{self.folder / FRAMES_SOCKET}"
        return f"unix:{SOCKET_DIR if self.grpc_server is not None else FRAMES_DIR}/{FRAMES_SOCKET}"

    def referee_address(self, confined: bool) -> str:
        """MUS_REFEREE, where the folder has the referee's gRPC socket: as the seat sees it, or on this host."""
        return f"unix:{SOCKET_DIR}/{POOLED_SOCKET}" if confined else f"unix:{self.folder / POOLED_SOCKET}"

    async def close(self) -> None:
        await asyncio.gather(
            self.server.stop(), *([self.grpc_server.stop(grace=0.2)] if self.grpc_server is not None else [])
        )
        shutil.rmtree(self.folder, ignore_errors=True)


POOLED_SOCKET = "referee.sock"
"""The referee's socket in a pooled process's own folder, and in a launched seat's on a worker's referee (bound at
SOCKET_DIR in its sandbox)."""

MAX_SEAT_CONNECTIONS = 4
"""Connections one seat (or pooled process) may hold open at once on its own sockets: a bot needs one (grpc
multiplexes its streams on it), two while it reconnects; past it, a new one is closed at once. A security review
held 20,000 of a worker's file descriptors open from one pooled process's children, and the worker then failed
other bots' matches."""

FRAMES_PREFIX = "mus-referee-frames"
"""The folder of a referee's seat frames folders, under the temporary folder (`EmbeddedReferee.frames_dir`)."""
SEAT_FRAMES_PREFIX = "seat-"
"""One seat's frames folder in it (`SeatFrames.open`): the deepest socket a referee makes, checked against
MAX_SOCKET_PATH when it starts."""
MAX_SOCKET_PATH = 107
"""The longest unix socket path Linux takes (`sun_path` holds 108 bytes, with the final NUL)."""

FRAMES_SOCKET = "play.sock"
"""Beside it, the socket where the same process may play its seats over frames instead (`service.frames`)."""


async def play_programs(
    programs: tuple[BotProgram, BotProgram],
    rules: Rules,
    seed: int,
    *,
    log_dir: Path | None = None,
    join_timeout_s: float = 30.0,
    sandbox: Limits | None = None,
    pool: BotPool | None = None,
    referee: EmbeddedReferee | None = None,
    half: int = 0,
    label: str = "",
) -> PlayedMatch:
    """Play the match on a referee in this process (`referee`, or one made for this match alone) as on the
    standalone referee (`play_on_referee`, the same code): the table is created, watched and fetched through the
    admin API, called in this process.

    With `sandbox` limits each seat runs in its own sandbox, which sees only the referee's socket; with None the
    bots run unconfined (a `--no-sandbox` league, or a machine without bwrap).

    Each launched seat is also offered frames (`MUS_FRAMES`): a socket of its own, which only its sandbox binds,
    where it may play the same Play stream without HTTP/2 (docs/protocol.md); a bot that ignores it plays over
    gRPC.

    With a `pool` (made for the same `sandbox` limits), the seats of a bot the pool accepts are handed to its
    live processes (`workers.pool`) instead of launched: the referee listens on a socket in each such process's
    own folder, which only that process's sandbox binds. `half` is which half of its duplicate pair the match is
    (`workers.db.repo.half_of`): the pool plays the two halves of a pair with different processes. Every
    pooled process is frozen before any process of the match runs and again when it has ended (`stop_all`): one
    may have played the match's twin, and another worker of the machine may play next. `label` names the match in
    each pooled process's log, before its seat (a league's `league/match/attempt`)."""
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="mus-match-"))
    # No process of another match of this machine runs beside this one's (unconfined bots are confined by nothing).
    async with host_play_lock() if sandbox is not None else contextlib.nullcontext():
        own = referee is None
        embedded = EmbeddedReferee() if referee is None else referee
        members: dict[int, PooledProcess] = {}
        frames: dict[int, SeatFrames] = {}
        try:
            if pool is not None:
                # No process of this match runs beside one of the worker's pooled processes, frozen first: one that
                # has just played may have played this match's twin, and would pass its deal on through the CPU
                # while this match's seats join (a security review, stop 35).
                await stop_all(pool.freezers())
            # Pooled seats: a live process of the bot's for each, served in its own folder (thawed for its seat).
            meets_itself = programs[0].name == programs[1].name
            for seat in range(4):
                if pool is not None and pool.accepts(programs[seat % 2]):
                    members[seat] = pool.acquire(programs[seat % 2], half, place(seat, meets_itself))
            pooled = {}
            for seat, member in members.items():
                addresses = await embedded.serve(member)
                if sandbox is not None:  # the sandbox binds the process's folder at SOCKET_DIR
                    addresses = f"unix:{SOCKET_DIR}/{POOLED_SOCKET}", f"unix:{SOCKET_DIR}/{FRAMES_SOCKET}"
                pooled[seat] = (member, *addresses)
            for seat in range(4):
                if seat not in members:  # launched: its own folder of sockets, bound at SOCKET_DIR in its sandbox
                    frames[seat] = await embedded.open_seat()
            confined = sandbox is not None
            if len(members) == 4 and all(member.seats_played for member in members.values()):
                # Four processes that have played before, each given its seat while it waits for one: it joins at once.
                # A broken one held its worker for the whole join timeout in every match (a review, stop 35).
                join_timeout_s = min(join_timeout_s, WARM_JOIN_S)
            return await _play(
                programs,
                rules,
                seed,
                admin_address="this process",
                admin_token=embedded.referee.admin_token,
                external_id="",
                label=label,
                join_timeout_s=join_timeout_s,
                log_dir=log_dir,
                sandboxes=[
                    Sandbox(frames[seat].folder, sandbox, hidden=log_dir)
                    if sandbox is not None and seat in frames
                    else None
                    for seat in range(4)
                ],
                pool=pool,
                pooled=pooled,
                referees={seat: own.referee_address(confined) for seat, own in frames.items()},
                frames={seat: own.address(confined) for seat, own in frames.items()},
                local=embedded.referee,
            )
        finally:
            await asyncio.gather(*(own_frames.close() for own_frames in frames.values()))
            if pool is not None:
                # Its time to exit ends here: no pooled process runs while this worker does not hold the host's play
                # lock, where another worker's match may be played (a security review, stop 36).
                await stop_all(pool.freezers())
            if own:
                await embedded.close()
            elif pool is not None:
                await embedded.forget(pool)


_WORKER: tuple[asyncio.AbstractEventLoop, EmbeddedReferee] | None = None
_IN_HAND: asyncio.Task[Any] | None = None
"""The match `run_on_worker_referee` plays now, if any (`stop_match_in_hand`)."""
_Result = TypeVar("_Result")


def stop_match_in_hand() -> bool:
    """Cancel the match this worker process plays, at its next await; whether there was one. Safe from a signal
    handler of the thread that runs the loop (a cold shutdown's): it is scheduled as asyncio's own signal handling
    schedules, through the loop's wake-up pipe."""
    if _WORKER is None or _IN_HAND is None or _IN_HAND.done():
        return False
    _WORKER[0].call_soon_threadsafe(_IN_HAND.cancel)
    return True


def run_on_worker_referee(play: Callable[[EmbeddedReferee], Coroutine[Any, Any, _Result]]) -> _Result:
    """Run `play(referee)` to its end on this process's long-lived referee and event loop (made at the first
    call, closed at exit): a league worker's matches share them, so a match starts no server.

    Whatever interrupts the call (a time limit, Ctrl-C) also ends the match: it is cancelled and its clean-up
    runs (its bots killed, its pooled seats given back) before this raises, so no match plays on in the
    background of the next one."""
    global _WORKER, _IN_HAND
    if _WORKER is None:
        loop = new_event_loop()
        _WORKER = (loop, EmbeddedReferee())
        atexit.register(close_worker_referee)
    loop, referee = _WORKER
    task = loop.create_task(play(referee))
    _IN_HAND = task
    try:
        return loop.run_until_complete(task)
    except BaseException:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                loop.run_until_complete(task)
        raise
    finally:
        _IN_HAND = None


def close_worker_referee() -> None:
    """Close this process's worker referee (`run_on_worker_referee`), at its exit."""
    global _WORKER
    if _WORKER is not None:
        loop, referee = _WORKER
        _WORKER = None
        with contextlib.suppress(Exception):
            loop.run_until_complete(referee.close())
        loop.close()


# ------------------------------------------------------------------------------ on the standalone referee

RPC_TIMEOUT_S = 10.0
"""The deadline of one admin call to the referee (a WaitTable call's is this past its wait)."""

RPC_RETRY_S = 15.0
"""How long an unreachable or overloaded referee is retried (per call) before the attempt is given up as an
infrastructure failure; every admin call the worker makes is idempotent (CreateTable through its external_id).
The wait for the table's end is more patient: as long as the match's own clocks could keep it waiting."""

WAIT_S = 30.0
"""How long one WaitTable call waits for the table's end before the worker calls again (the referee caps it)."""

REPLAY_MESSAGE_BYTES = 16 * 1024 * 1024
"""The largest replay the worker accepts: what the referee may send (`grpc.max_send_message_length`)."""

_RETRIED = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED}
)
"""Retried, never a refusal. RESOURCE_EXHAUSTED included: anyone who can reach the referee (a hosted seat
through its relay) can fill its call slots for a while, and a void caused by a seat would let a losing bot
void its match on demand; the admin calls have their own server besides (`mus referee serve --admin-address`)."""

_Request = TypeVar("_Request")
_Response = TypeVar("_Response")


Admin: TypeAlias = "admin_pb2_grpc.TableAdminServiceAsyncStub | InProcessAdmin"
"""The admin API of a referee: over gRPC, or in this process."""


class RefereeFailure(RuntimeError):
    """The referee could not be reached, refused a call, cancelled or lost the table: never a bot's fault."""


@dataclass(frozen=True, slots=True)
class RemoteBot:
    """A bot that runs elsewhere: registered with the referee by the SHA-256 of its token, it is offered its
    seats through the lobby."""

    name: str
    token_sha256: str


def register_remote_bots(address: str, admin_token: str, bots: Sequence[RemoteBot]) -> None:
    """Tell the referee about remote bots before their first match, so they can hold their lobby stream now
    (a bot the referee does not know is refused). Raises `grpc.RpcError` when the referee refuses or is away."""
    auth = (("authorization", f"Bearer {admin_token}"),)
    with grpc.insecure_channel(address) as channel:
        admin = admin_pb2_grpc.TableAdminServiceStub(channel)
        for bot in bots:
            request = admin_pb2.RegisterRemoteBotRequest(bot_name=bot.name, token_sha256=bot.token_sha256)
            admin.RegisterRemoteBot(request, metadata=auth, timeout=10)


async def play_on_referee(
    teams: tuple[BotProgram | RemoteBot, BotProgram | RemoteBot],
    rules: Rules,
    seed: int,
    *,
    address: str,
    admin_token: str,
    admin_address: str | None = None,
    external_id: str = "",
    join_timeout_s: float = 30.0,
    log_dir: Path | None = None,
    sandbox: Limits | None = None,
) -> PlayedMatch:
    """Play a match on the standalone referee at `address` and return it once it has finished.

    The admin calls go to `admin_address` (`mus referee serve --admin-address`: a server of their own, which no
    bot can fill with calls) when given, else to `address`.

    Registers each remote bot (RegisterRemoteBot), creates the table (its remote seats are offered through the
    lobby; `external_id` makes a retried creation return the same table), launches the hosted seats' programs
    pointed at that referee, waits for the end (WaitTable), and fetches the replay (GetTableReplay), as
    `play_programs` does on its own referee. Every seat has `join_timeout_s` to join; one that has not is
    `absent` and its decisions time out at once. Raises `RefereeFailure` when the referee is unreachable or the
    table does not finish (cancelled, lost), and cancels the table when anything here fails before its end.

    With `sandbox` limits the hosted seats are confined like on the embedded referee: each sees only a unix
    socket of its own, on which this worker relays its `Play` calls to the referee over a connection of the
    seat's own (`workers.relay`), and which holds at most `MAX_SEAT_CONNECTIONS` connections at once.
    """
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="mus-match-"))
    hosted = [seat for seat in range(4) if isinstance(teams[seat % 2], BotProgram)]
    async with host_play_lock() if hosted and sandbox is not None else contextlib.nullcontext():  # as `play_programs`
        sandboxes: list[Sandbox | None] = [None] * 4
        relays: list[SeatRelay] = []
        socket_dirs: list[Path] = []
        try:
            if sandbox is not None:
                for seat in hosted:
                    socket_dirs.append(open_to_seat(own_folder(f"mus-referee-seat{seat}")))
                    relays.append(
                        await open_relay(
                            socket_dirs[-1] / "referee.sock", address, max_connections=MAX_SEAT_CONNECTIONS
                        )
                    )
                    open_to_seat(socket_dirs[-1] / "referee.sock")
                    sandboxes[seat] = Sandbox(socket_dirs[-1], sandbox, hidden=log_dir)
            return await _play(
                teams,
                rules,
                seed,
                admin_address=admin_address or address,
                admin_token=admin_token,
                external_id=external_id,
                join_timeout_s=join_timeout_s,
                log_dir=log_dir,
                sandboxes=sandboxes,
                pool=None,
                pooled={},
                referees={
                    seat: f"unix:{SOCKET_DIR}/referee.sock" if sandbox is not None else address for seat in hosted
                },
            )
        finally:
            for relay in relays:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(relay.close(), 2.0)
            for socket_dir in socket_dirs:
                shutil.rmtree(socket_dir, ignore_errors=True)


# ------------------------------------------------------------------------------ the one match path


async def _play(
    teams: tuple[BotProgram | RemoteBot, BotProgram | RemoteBot],
    rules: Rules,
    seed: int,
    *,
    admin_address: str,
    admin_token: str,
    external_id: str,
    join_timeout_s: float,
    log_dir: Path,
    sandboxes: Sequence[Sandbox | None],
    pool: BotPool | None,
    label: str = "",
    pooled: Mapping[int, tuple[PooledProcess, str, str]],
    referees: Mapping[int, str],
    frames: Mapping[int, str] | None = None,
    local: Referee | None = None,
) -> PlayedMatch:
    """A match on the referee whose admin API is at `admin_address`, whichever it is: register the remote bots,
    create the table, start each hosted seat with its token from CreateTableResponse, report a seat whose
    process exits (ReportCrash), wait for the end (WaitTable), fetch the replay (GetTableReplay) and rebuild the
    result from it. Each launched seat reaches the referee where `referees` names it (and, where `frames` names it,
    may play over frames there instead); a pooled seat, where `pooled` names it. `local` is the referee when it
    runs in this process: its admin API is then called without a transport (`admin_address` only names it in
    messages), and its finished match is taken as it is instead of re-simulated from the record."""
    names = [teams[seat % 2].name for seat in range(4)]
    auth = (("authorization", f"Bearer {admin_token}"),)
    options = [("grpc.max_receive_message_length", REPLAY_MESSAGE_BYTES)]
    # The longest the table can go on without ending while the worker cannot reach the referee: every seat's
    # join, then one whole decision and the seat's bank. The wait for its end is patient that long.
    patience_s = max(RPC_RETRY_S, join_timeout_s + rules.decision_timeout_s + rules.time_bank_s)
    healthy: set[int] = set()
    cpu_before: dict[int, float | None] = {}
    try:
        async with contextlib.AsyncExitStack() as channels:
            admin: Admin
            stub: admin_pb2_grpc.TableAdminServiceAsyncStub | None = None
            if local is None:
                channel = grpc.aio.insecure_channel(admin_address, options=options)
                admin = stub = admin_pb2_grpc.TableAdminServiceStub(await channels.enter_async_context(channel))
            else:
                admin = InProcessAdmin(local)
            for bot in {team.name: team for team in teams if isinstance(team, RemoteBot)}.values():
                await _call(
                    admin.RegisterRemoteBot,
                    admin_pb2.RegisterRemoteBotRequest(bot_name=bot.name, token_sha256=bot.token_sha256),
                    auth,
                    admin_address,
                )
            request = admin_pb2.CreateTableRequest(
                rules=wire.rules_to_map(rules),
                seed=seed,
                seats=[
                    admin_pb2.SeatConfig(bot_name=names[seat], remote=isinstance(teams[seat % 2], RemoteBot))
                    for seat in range(4)
                ],
                join_timeout_s=join_timeout_s,
                external_id=external_id,
            )
            created = await _call(admin.CreateTable, request, auth, admin_address)
            table_id = created.table_id
            programs = {seat: team for seat in range(4) if isinstance(team := teams[seat % 2], BotProgram)}
            logs = {seat: log_dir / f"seat{seat}-{names[seat]}.log" for seat in programs}
            if any(seat not in pooled for seat in programs):
                log_dir.mkdir(parents=True, exist_ok=True)
            processes: list[BotProcess] = []
            launched: dict[int, _Seat] = {}  # by seat: its own process, or a pooled one
            watchers: list[asyncio.Task[None]] = []
            ended = False
            # A seat's processes run only in its turns, where this worker can stop them (`TurnGate`): the table of
            # the referee in this process tells the gate itself, a standalone referee's over admin Turns.
            gate = TurnGate()
            follower: asyncio.Task[None] | None = None
            if local is not None:
                local.tables[table_id].turns = gate
            elif stub is not None and (any(sandbox is not None for sandbox in sandboxes) or pooled):
                follower = await _follow_turns(stub, auth, table_id, gate, admin_address)
            launched_at = time.monotonic()
            try:
                for seat, program in programs.items():
                    token = created.seat_tokens[seat]
                    if seat in pooled:  # the pool hand-off: a live process of the bot's takes the seat
                        member, own_address, frames_address = pooled[seat]
                        cpu_before[seat] = member.cpu_seen if member.cpu_seen is not None else member.cpu_s()
                        gate.add(seat, member.freezer)
                        member.note(f"seat {seat} of table {table_id}" + (f", match {label}" if label else ""))
                        member.offer(own_address, token, frames=frames_address)
                        launched[seat] = member
                        watchers.append(
                            asyncio.create_task(_watch(admin, auth, table_id, seat, member, partial(_left, member)))
                        )
                        continue
                    process = await launch_bot(
                        program,
                        referees[seat],
                        token,
                        log_path=logs[seat],
                        sandbox=sandboxes[seat],
                        frames=(frames or {}).get(seat),
                    )
                    gate.add(seat, process.freezer)
                    processes.append(process)
                    launched[seat] = process
                    watchers.append(
                        asyncio.create_task(_watch(admin, auth, table_id, seat, process, partial(_exited, process)))
                    )
                if local is not None and not gate:  # no seat can be stopped here: nothing to gate
                    local.tables[table_id].ungate()
                final = await _wait_for_end(admin, table_id, auth, admin_address, patience_s=patience_s)
                ended = True
                ended_at = time.monotonic()
                for watcher in watchers:
                    watcher.cancel()
                _raise_if_a_sandbox_failed(launched, final)
                await _reap(processes)
                exited_at = time.monotonic()
                if final.status != admin_pb2.TABLE_STATUS_FINISHED:
                    raise RefereeFailure(f"table {table_id} on the referee ({admin_address}) was cancelled")
                replay = await _call(
                    admin.GetTableReplay, admin_pb2.GetTableReplayRequest(table_id=table_id), auth, admin_address
                )
                incidents = _incidents(replay)
                healthy = set(programs) - {incident.seat for incident in incidents}
            finally:
                if follower is not None:
                    follower.cancel()
                await _stop(watchers, processes)
                if not ended:
                    with contextlib.suppress(Exception):
                        await admin.CancelTable(
                            admin_pb2.CancelTableRequest(table_id=table_id, reason="the match runner stopped"),
                            metadata=auth,
                            timeout=RPC_TIMEOUT_S,
                        )
    finally:  # every pooled process goes back, also when the table was never made
        cpu_after = {seat: member.cpu_s() for seat, (member, *_) in pooled.items()}
        for seat, (member, *_) in pooled.items():
            member.cpu_seen = cpu_after[seat]
        if pool is not None:
            for seat, (member, *_) in pooled.items():
                pool.release(member, healthy=seat in healthy, cpu_s=cpu_after[seat])
    counted: list[float | None] = [process.cpu_s for process in processes]
    for seat, before in cpu_before.items():
        after = cpu_after[seat]
        counted.append(after - before if after is not None and before is not None else None)
    match, record_json = _resimulated(replay) if local is None else _finished(local, replay)
    return PlayedMatch(
        table_id,
        match,
        record_json,
        incidents,
        _decision_seconds(replay),
        _joined_as(final),
        logs,
        launched_at=launched_at,
        started_at=launched_at + final.started_after_s,
        ended_at=ended_at,
        exited_at=exited_at,
        bots_cpu_s=_sum_or_none(counted),
    )


async def _follow_turns(
    admin: admin_pb2_grpc.TableAdminServiceAsyncStub,
    auth: Sequence[tuple[str, str]],
    table_id: str,
    gate: TurnGate,
    address: str,
) -> asyncio.Task[None] | None:
    """Gate a table of a standalone referee (admin Turns), as the worker's own referee's table is gated through
    `Table.turns`: it sends the seats that may run whenever that changes, the gate stops the others, and the
    worker acknowledges each turn once it has. Returns the task that follows the turns until the table ends,
    once the table is gated (its first turn, every seat, has come); None where the referee cannot gate it (its
    hosted seats then run throughout, as the warning says)."""
    call = admin.Turns(metadata=auth)

    async def gated() -> None:
        await call.write(admin_pb2.TurnsRequest(table_id=table_id))
        first = await call.read()
        if not isinstance(first, admin_pb2.TurnsResponse):
            raise RefereeFailure(f"table {table_id} on the referee ({address}) ended before it was gated")
        await call.write(admin_pb2.TurnsRequest(done=first.turn))

    try:
        await asyncio.wait_for(gated(), RPC_TIMEOUT_S)
    except (grpc.aio.AioRpcError, TimeoutError) as error:
        call.cancel()
        log.warning("the referee at %s cannot gate table %s (%r): its seats run throughout", address, table_id, error)
        return None

    async def follow() -> None:
        try:
            while isinstance(turn := await call.read(), admin_pb2.TurnsResponse):
                held = gate(frozenset(turn.running_seats))
                if held is not None:
                    await held
                await call.write(admin_pb2.TurnsRequest(done=turn.turn))
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as error:
            log.info("table %s: the referee's turns ended early: %s", table_id, error)
        finally:
            gate(frozenset(range(4)))  # ungated: every seat runs
            call.cancel()

    return asyncio.create_task(follow())


class _Seat(Protocol):
    """A hosted seat's process: launched for this match (`BotProcess`) or lent by the pool (`PooledProcess`)."""

    @property
    def sandbox_failed(self) -> str: ...


async def _exited(process: BotProcess) -> str:
    """How a launched seat's process ended, once it has."""
    return process.describe_exit(await process.wait())


async def _left(member: PooledProcess) -> str:
    """How a pooled seat's process ended, once it has (it is no child of this loop: it is looked at)."""
    while member.alive:
        await asyncio.sleep(POOL_WATCH_S)
    return member.describe_exit()


async def _watch(
    admin: Admin,
    auth: Sequence[tuple[str, str]],
    table_id: str,
    seat: int,
    process: _Seat,
    exit: Callable[[], Awaitable[str]],
) -> None:
    """A hosted seat's process that exits before its table ends has crashed: tell the referee (ReportCrash).
    `exit` makes the wait for its end only once this runs (a task cancelled before it starts, when a later seat
    cannot be launched, leaves no coroutine behind never awaited).

    A sandbox that never ran its bot is no crash: the table is cancelled, and the runner raises (a void, not a
    result); but a seat that joined its table ran, whatever its output says (`_joined`). Cancelled once the table
    has ended; a report that cannot be delivered leaves the referee to charge a disconnect after its grace period
    instead.
    """
    detail = await exit()
    with contextlib.suppress(grpc.RpcError):
        if process.sandbox_failed and not await _joined(admin, auth, table_id, seat):
            reason = f"the sandbox of seat {seat} did not start: {process.sandbox_failed}"
            await admin.CancelTable(
                admin_pb2.CancelTableRequest(table_id=table_id, reason=reason), metadata=auth, timeout=RPC_TIMEOUT_S
            )
            return
        await admin.ReportCrash(
            admin_pb2.ReportCrashRequest(table_id=table_id, seat=seat, detail=detail),
            metadata=auth,
            timeout=RPC_TIMEOUT_S,
        )


async def _joined(admin: Admin, auth: Sequence[tuple[str, str]], table_id: str, seat: int) -> bool:
    """Whether the seat has joined its table: then its bot ran, and a sandbox that seems never to have started (no
    start line in its output) is the bot's doing. A second lock: a review's bot took the line out of its own output,
    and its crash voided the match onto a fresh deal, nothing charged (stop 43), before the pipes were sealed."""
    status = await admin.GetTableStatus(
        admin_pb2.GetTableStatusRequest(table_id=table_id), metadata=auth, timeout=RPC_TIMEOUT_S
    )
    return _has_joined(status, seat)


def _has_joined(status: admin_pb2.GetTableStatusResponse, seat: int) -> bool:
    return len(status.seats) > seat and status.seats[seat].joined


def _raise_if_a_sandbox_failed(seats: Mapping[int, _Seat], final: admin_pb2.GetTableStatusResponse) -> None:
    """`LaunchError` when a seat's sandbox never ran its bot: an infrastructure failure, charged to nobody. Not
    for a seat that joined its table (`_joined`)."""
    for seat, process in seats.items():
        if isinstance(process, BotProcess) and process.returncode is None:
            continue  # still running: it started
        if process.sandbox_failed and not _has_joined(final, seat):
            raise LaunchError(f"a seat's sandbox did not start: {process.sandbox_failed}")


def _sum_or_none(values: Sequence[float | None]) -> float | None:
    """The sum, when every value is known."""
    return sum(value for value in values if value is not None) if values and None not in values else None


async def _stop(watchers: list[asyncio.Task[None]], processes: list[BotProcess]) -> None:
    """However a match runner ends: stop watching the bots, and kill everything a seat started."""
    for watcher in watchers:
        watcher.cancel()
    failures = [
        error
        for error in await asyncio.gather(*(process.close() for process in processes), return_exceptions=True)
        if error is not None
    ]
    if failures:  # every seat was closed all the same: one that raised must not leave the others running
        raise failures[0]


async def _reap(processes: list[BotProcess]) -> None:
    """Give bots a moment to exit after the outcome, then terminate the rest."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*(process.wait() for process in processes)), EXIT_WAIT_S)
    for process in processes:
        if process.returncode is None:
            process.terminate()


async def _wait_for_end(
    admin: Admin,
    table_id: str,
    auth: Sequence[tuple[str, str]],
    address: str,
    *,
    patience_s: float = RPC_RETRY_S,
) -> admin_pb2.GetTableStatusResponse:
    """The table's status once it has finished or was cancelled: WaitTable, called again while it runs on; each
    call retries for up to `patience_s`."""
    request = admin_pb2.WaitTableRequest(table_id=table_id, wait_s=WAIT_S)
    ended = (admin_pb2.TABLE_STATUS_FINISHED, admin_pb2.TABLE_STATUS_CANCELLED)
    while True:
        waited = await _call(
            admin.WaitTable, request, auth, address, patience_s=patience_s, timeout_s=WAIT_S + RPC_TIMEOUT_S
        )
        if waited.table.status in ended:
            return waited.table


async def _call(
    method: Callable[..., Awaitable[_Response]],
    request: _Request,
    auth: Sequence[tuple[str, str]],
    address: str,
    *,
    patience_s: float | None = None,
    timeout_s: float = RPC_TIMEOUT_S,
) -> _Response:
    """One admin call, retried while the referee is unreachable or out of call slots (for up to `patience_s`,
    default RPC_RETRY_S); `RefereeFailure` when it stays so, or refuses."""
    name = type(request).__name__.removesuffix("Request")
    deadline = time.monotonic() + (RPC_RETRY_S if patience_s is None else patience_s)
    pause = 0.1
    while True:
        try:
            return await method(request, metadata=tuple(auth), timeout=timeout_s)
        except grpc.aio.AioRpcError as error:
            code = error.code()
            if code in _RETRIED and time.monotonic() + pause < deadline:
                log.warning("%s on the referee (%s): %s; retrying in %.1f s", name, address, code.name, pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 2.0)
                continue
            what = "is unreachable or overloaded" if code in _RETRIED else "refused it"
            raise RefereeFailure(f"{name}: the referee ({address}) {what} ({code.name}: {error.details()})") from None


def _resimulated(replay: admin_pb2.GetTableReplayResponse) -> tuple[Match, str]:
    """The fetched replay record, re-simulated: a record that does not replay to itself is the referee's failure."""
    record = _record(replay)
    match = replay_record(record)
    if match.outcome is None:
        raise RefereeFailure(f"table {replay.table_id}: the replay ends before the match does")
    # The referee writes the record with `dumps_record`: the same text is the quick proof; other text (another
    # version's key order) may still hold the same record.
    if dumps_record(match) != replay.record_json and json.loads(json.dumps(match_record(match))) != record:
        raise RefereeFailure(f"table {replay.table_id}: the replay record does not re-simulate to itself")
    return match, replay.record_json


def _finished(local: Referee, replay: admin_pb2.GetTableReplayResponse) -> tuple[Match, str]:
    """A finished table of the referee in this process: its match as the referee played it (the same engine
    re-simulating it would prove nothing), and its record as the replay holds it, not read here: the database
    stores the text as it is (`record_result` reads it once). The referee then forgets the table: nothing asks it
    again, and a worker's referee kept a thousand, all walked by its garbage collector."""
    table = local.tables.get(replay.table_id)  # a thousand later tables would have evicted it
    if table is None or table.match is None or table.match.outcome is None:
        raise RefereeFailure(f"table {replay.table_id}: the referee in this process no longer holds its match")
    local.forget(replay.table_id)
    return table.match, replay.record_json


def _record(replay: admin_pb2.GetTableReplayResponse) -> dict[str, Any]:
    """The fetched replay's record, parsed: anything but a JSON object is the referee's failure."""
    record = json.loads(replay.record_json)
    if not isinstance(record, dict):
        raise RefereeFailure(f"table {replay.table_id}: the replay record is not a JSON object")
    return record


def _incidents(replay: admin_pb2.GetTableReplayResponse) -> tuple[Incident, ...]:
    """The replay's incidents, their causes read through the one table of causes (`causes.CAUSE_FROM_PROTO`)."""
    incidents = []
    for message in replay.incidents:
        cause = CAUSE_FROM_PROTO.get(message.cause)
        if not isinstance(cause, IncidentCause):
            raise RefereeFailure(f"table {replay.table_id}: an incident's cause {message.cause} names no incident")
        incidents.append(Incident(message.seat, cause, message.detail))
    return tuple(incidents)


def _decision_seconds(replay: admin_pb2.GetTableReplayResponse) -> tuple[tuple[float, ...], ...]:
    seconds: list[tuple[float, ...]] = [(), (), (), ()]
    for times in replay.decision_times:
        if times.seat < 4:
            seconds[times.seat] = tuple(times.seconds)
    return tuple(seconds)


def _joined_as(final: admin_pb2.GetTableStatusResponse) -> tuple[str, ...]:
    names = ["", "", "", ""]
    for seat in final.seats:
        if seat.seat < 4:
            names[seat.seat] = seat.joined_as
    return tuple(names)


def fault_records(match: Match) -> list[dict[str, Any]]:
    """The rules' faults (rules §13: illegal_action, timeout, limit), in the order charged, from the engine's
    `Fault` events (as the referee's `wire.match_faults` lists them), as {seat, cause, detail}: the detail is the
    referee's reason for an illegal action or a limit (`fault_details`). Never an incident: those are
    `incident_records`."""
    details = fault_details(match)
    return [
        {"seat": fault.seat, "cause": fault.cause.value, "detail": details.get(fault, "")}
        for event in match.events
        if isinstance(fault := event.payload, Fault)
    ]


_REASONED_FAULTS = {FaultCause.ILLEGAL_ACTION: StepKind.ILLEGAL, FaultCause.LIMIT: StepKind.LIMIT}
"""The faults whose step in the match's log carries the referee's reason: one step charges one such fault."""


def fault_details(match: Match) -> dict[Fault, str]:
    """Each illegal-action or limit fault of the match with the reason its step carries (`Step.reason`: "envido 1 is
    below min_bet 2; legal: ..."), paired in order, cause by cause; a timeout needs none. A Fault's value is unique
    in its match (its team's count grows with each)."""
    reasons = {
        cause: iter([step.reason for step in match.log if step.kind is kind])
        for cause, kind in _REASONED_FAULTS.items()
    }
    return {
        fault: next(reasons[fault.cause], "")
        for event in match.events
        if isinstance(fault := event.payload, Fault) and fault.cause in reasons
    }


def incident_records(incidents: Iterable[Incident]) -> list[dict[str, Any]]:
    """The referee's incidents (a seat's connection or process: protocol_error, disconnect, crash, absent), in the
    order recorded, as {seat, cause, detail}. Never a fault."""
    return [{"seat": incident.seat, "cause": incident.cause.value, "detail": incident.detail} for incident in incidents]
