"""League benchmark: matches per second of a duplicate round robin of instant bots, by broker and worker count.

The league: six entrants (`instant1` .. `instant6`), every pairing played as duplicate pairs
(`workers.leagues.create_round_robin`, `matches_per_pairing` matches each, 60 matches by default, its deals
fixed by a constant secret), default rules unless options are given (`rules` in the output). Every entrant is
the same program, `bench/league_bot.py`, run by the workers like any hosted bot, one process per seat: an
instant bot that answers every decision as soon as it is asked, imports nothing but grpc, the generated messages
and the random wire policy (`clients/bots/wire_random.py`; no SDK, no rules engine) and leaves with `os._exit`
once it has the outcome. Its choices are seeded by its seat and its first cards, so every configuration plays
exactly the same matches (`identical_results` checks it).

Why this bot: four bot processes start for every match, and a short match of instant bots is dominated by
their start-up. This is the smallest start-up of a Python gRPC bot (about 90 ms of CPU a seat, against about
150 ms for the example bots, whose SDK imports the engine and whose interpreter then spends about 80 ms
tearing grpc down after the outcome, while the worker waits); a smaller one would not be a Python program.
`per_match` times a worker's steps on a few of the league's matches for both bots (`bench.league_probe`), and
`--bot random` runs the whole league with the example random bot. `--bot cpp` runs it with the C++ example bot
(`clients/cpp`, built on the spot when needed), which starts in about 10 ms of CPU: the league machinery
measured without a Python bot's start-up, seeded like the instant bot. Longer matches (`--option
games_to_win_vaca=3`) shift the weight from start-up to play; `--think-ms N` makes the instant bot wait N ms
before each answer, so that matches wait instead of compute (what the league machinery does when the bots
are not what saturates the cores).

The configurations, each on a fresh temporary folder (a new SQLite file in WAL mode, the same league):

- `embedded_1`, `embedded_2`: `run_league(engine, name, workers=N)` on the embedded filesystem broker; it
  starts N Celery worker processes (solo pool) and stops them at the end, as `mus league run --workers N`;
- `redis_1`, `redis_2`: N `mus worker --concurrency 1` processes on Redis (a random database index and a
  unique `MUS_QUEUE`), started just before `run_league`, which then only queues. The database stays SQLite,
  so the comparison is about the broker. Skipped (null figures, with the reason) when Redis is unreachable.

Configurations run back to back in rounds (the order rotates from round to round), `repeats` rounds; each
configuration's figures are the medians over its rounds. What is measured, per configuration:

- `matches_per_s`: the league's matches over the span from the first claim of a match to the last result
  (the database's `started_at` and `finished_at`), so the workers' own start-up (importing Celery, which the
  embedded mode pays in every `mus league run` and a deployed `mus worker` pays once) is left out;
- `wall_s`, `matches_per_s_wall`: from starting the workers to `run_league`'s return, start-up included;
- `in_match_ms`: median time a worker holds a match, from its claim to its result's timestamp (set-up, the
  bots' start-up, play, the bots' exit); `gap_ms`: median time a worker spends between two matches (writing
  the result, acknowledging the message, getting the next one from the broker, claiming it): below zero where a
  worker plays duplicate pairs whole (pooled bots), since it claims the twin before it writes the first's result;
- `cpu_s_per_match`: CPU-seconds per match by component, measured with getrusage and cgroups, not sampled.
  The workers write one line per match (`MUS_CPU_LOG`, workers/cpu_log.py): `bots` (the four seats, sandbox
  included, from each seat's cgroup: cpuacct on cgroup v1, cpu.stat on v2), `referee` (the worker's own CPU
  while the match is played: embedded referee, engine, gRPC, launching), `database` (the worker's CPU in the
  match's transactions; SQLite runs in the worker), `worker` (the rest of each worker's CPU from its first
  claim to its last result: Celery, the broker, the heartbeat, the launch checks; its start-up is left out),
  `scheduler` (this process: queueing and following progress), and `total`;
- `league_cpu_s_per_match`: that `total`; `machine_busy_pct`: how busy the machine's cores were during the
  run, from /proc/stat, every process included (100 = all cores), and `others_busy_pct` the part of it that
  was not the league's (the CPU time above over the run's wall time and cores); `league_cores`: the cores the
  league kept busy while it played (`matches_per_s` times `league_cpu_s_per_match`). Together
  they tell a saturated machine from a slow league.

Pinning (`--pin`, the default where there are at least as many cores as workers): each worker is pinned to a
core of its own (`sched_setaffinity` before its exec, an embedded Celery worker's as a `mus worker`'s), and
everything it starts inherits the core: its embedded referee runs in it,
its bots and their sandboxes are its children. "2 workers over 1" then compares two cores with one, which is
what more machines would give; `pinned_cores` says which. A pinned worker stands for a machine of its own, so it
also has a host play lock of its own (`workers.host_lock`: one machine plays one match's bots at a time, whatever
worker plays it). `--no-pin` leaves placement to the kernel, and the workers share this machine's lock.

Efficiency: before and after each configuration's league, the engine plays random legal matches by itself
(`bench.engine.self_play_rate`) in one process per worker, pinned like the workers, for `engine_s` seconds;
`engine_matches_per_s` is their sum (the mean of the two measurements) and `efficiency` the league's
`matches_per_s` over it. The top-level `efficiency` is the one-worker configuration's on the first broker
(`efficiency_of`, normally `embedded_1`; target 0.05), `efficiency_by_configuration` all of them.

The pool (`--pool`): the entrants are added as persistent bots (`mus bot add --persistent`), so each worker
keeps their seat processes alive across matches (docs/pool.md); `per_match` then also times a pooled match
(`instant_pooled`). A pooled process starts at its first seat, so a short league spends much of its time
starting them (each worker keeps two a bot for each half of the duplicate pairs it plays, and plays both halves
of each pair it begins, docs/leagues.md: 24 for six entrants with one worker, up to 24 each with two). The warm
matches say what the rest of a
long run keeps: the matches for which no pooled process was started (their MUS_CPU_LOG line's `pool_started` is
0; without `--pool`, every match): `warm_matches_per_s` (each worker's warm matches over the time from their
claims to that worker's next claim, or to the result for its last, added up over the workers),
`warm_cpu_s_per_match` (their bots, referee and database, from the same log lines) and `warm_efficiency` (that
rate over the same engine rate; top level: of `efficiency_of`).

Ratios: `scaling_2_over_1` (per broker, two workers over one; target 1.8) and `embedded_over_redis` (per
worker count; target 0.85). The league is CPU-bound (without the pool four bot processes start for every match),
so two workers gain over one only as many more cores as they get: compare `league_cores` and `others_busy_pct`. The
machine is shared: `load_average_1m_before` and `_after` say how busy it was.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from resource import RUSAGE_SELF
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy.engine import Engine

from bench.league_probe import Phases, probe_limits, probe_match, summarize
from clients.cpp.build import BOT as CPP_BOT
from clients.cpp.build import BuildError, build_bot
from referee.engine.rules import Rules
from workers import leagues
from workers.app import match_queues
from workers.cpu_log import CPU_LOG_VARIABLE
from workers.db import repo
from workers.db.session import ensure_schema, make_engine, session_scope
from workers.host_lock import HOST_LOCK_VARIABLE
from workers.launcher import EXAMPLE_BOTS, BotProgram
from workers.league_run import run_league, worker_preexec
from workers.pool import BotPool
from workers.tournament import schedule_round_robin

BOT_SCRIPT = Path(__file__).resolve().parent / "league_bot.py"
BOT_COMMAND = (sys.executable, str(BOT_SCRIPT))
"""The instant bot, run as a script: nothing of this project is imported but the generated messages."""
CPP_COMMAND = (str(CPP_BOT),)
"""The C++ example bot (clients/cpp), built by `make -C clients/cpp`."""
BOTS = {
    "instant": (
        BOT_COMMAND,
        "instant: bench/league_bot.py, a bare mus.v1 client (the generated messages and clients/bots/wire_random.py"
        " only; over frames where it is offered them, as a pooled or a league seat is, else over grpc) answering each"
        " decision at once with a random legal action seeded by its seat and first cards",
    ),
    "cpp": (
        CPP_COMMAND,
        "cpp: clients/cpp's mus-random-bot, the C++ example bot (grpc++), an instant bot that starts in a few ms "
        "of CPU: what the league machinery does when bot start-up costs next to nothing; seeded like instant",
    ),
    "random": (
        tuple(EXAMPLE_BOTS["random"]),
        "random: the example bot (python -m clients.bots.random, through the SDK), unseeded, so its results "
        "differ from run to run; for comparison with the instant bot",
    ),
}
"""The entrants' program: `instant` is the benchmark; `cpp` leaves out a Python bot's start-up; `random` shows
what an SDK bot's start-up costs."""
SEEDED_BOTS = ("instant", "cpp")
"""Bots whose choices the match seed fixes: every configuration must then give identical results."""
LEAGUE = "bench"
LEAGUE_SECRET = hashlib.sha256(b"mus-arena/bench/league").digest()
"""A fixed league secret, so every configuration plays the same deals and must give identical results (a real
league's secret is random and never known in advance)."""
SCALING_TARGET = 1.8
EFFICIENCY_TARGET = 0.05
EMBEDDED_OVER_REDIS_TARGET = 0.85
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379"
BROKERS = ("embedded", "redis")
THINK_ENV = "MUS_BENCH_THINK_MS"
"""The instant bot's wait before each answer (bench/league_bot.py reads it; the workers pass it on to the bots)."""
ENVIRONMENT = (
    "MUS_DATABASE_URL",
    "MUS_BROKER_URL",
    "MUS_BROKER_DIR",
    "MUS_LOG_DIR",
    "MUS_QUEUE",
    THINK_ENV,
    CPU_LOG_VARIABLE,
)
"""What a configuration sets in this process's environment (and restores afterwards)."""


@dataclass(frozen=True)
class Settings:
    bots: int = 6
    matches_per_pairing: int = 4
    repeats: int = 3
    workers: tuple[int, ...] = (1, 2)
    brokers: tuple[str, ...] = BROKERS
    options: Mapping[str, Any] = field(default_factory=dict)
    probe_matches: int = 6
    """Matches of the per-match probe, for each of the two bots (the instant bot and the example random bot)."""
    redis_url: str = DEFAULT_REDIS_URL
    bot: str = "instant"
    """A key of `BOTS`: the program every entrant runs."""
    think_ms: float = 0.0
    """The instant bot's wait before each answer: 0 is the benchmark; more makes matches wait instead of compute."""
    pin: bool = True
    """Pin each worker (and so its referee and its bots) to a core of its own, when there are enough cores."""
    engine_s: float = 2.0
    """How long the engine plays on each configuration's cores, for `efficiency`."""
    pool: bool = False
    """Hosted bots stay alive across matches (workers.pool): the entrants are persistent bots."""


QUICK = Settings(bots=3, matches_per_pairing=2, repeats=1, probe_matches=1, engine_s=0.25)
"""A smoke test's run (three entrants, six matches a configuration, one round): not a measurement."""


class _Deadline(KeyboardInterrupt):
    """Raised from `run_league`'s progress callback when a configuration runs too long or its `mus worker`
    processes are gone: `run_league` handles an interrupt by stopping its embedded workers cleanly, and so it
    does for this."""


def entrants(settings: Settings) -> list[str]:
    return [f"{settings.bot}{index}" for index in range(1, settings.bots + 1)]


def create_league(engine: Engine, settings: Settings) -> int:
    """The benchmark league in a fresh database: the entrants, all the same program, and every match."""
    names = entrants(settings)
    with session_scope(engine) as session:
        for name in names:
            language = "cpp" if settings.bot == "cpp" else "python"
            # The instant bot's script is bound into each seat's sandbox with its folder (bench/).
            folder = str(BOT_SCRIPT.parent) if settings.bot == "instant" else None
            repo.add_bot(
                session,
                name,
                command=BOTS[settings.bot][0],
                folder=folder,
                language=language,
                persistent=settings.pool,
            )
        league = leagues.create_round_robin(
            session,
            LEAGUE,
            bot_names=names,
            matches_per_pairing=settings.matches_per_pairing,
            options=dict(settings.options),
            secret=LEAGUE_SECRET,
        )
        assert league.id is not None
        return league.id


@contextlib.contextmanager
def environment(values: Mapping[str, str | None]) -> Iterator[None]:
    """Set (or unset, for None) the deployment's variables for the block; restore them after."""
    saved = {name: os.environ.get(name) for name in ENVIRONMENT}
    try:
        for name in ENVIRONMENT:
            value = values.get(name)
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def deployment(broker_url: str | None, think_ms: float = 0.0) -> Iterator[tuple[Path, Engine]]:
    """A fresh temporary folder with its SQLite database, broker folder and logs, as the environment."""
    root = Path(tempfile.mkdtemp(prefix="mus-bench-league-"))
    values = {
        "MUS_DATABASE_URL": f"sqlite:///{root / 'mus.db'}",
        "MUS_BROKER_DIR": str(root / "broker"),
        "MUS_LOG_DIR": str(root / "logs"),
        "MUS_BROKER_URL": broker_url,
        "MUS_QUEUE": f"mus-bench-{secrets.token_hex(4)}" if broker_url else None,
        THINK_ENV: f"{think_ms:g}" if think_ms else None,
        CPU_LOG_VARIABLE: str(root / "cpu.jsonl"),
    }
    engine = make_engine(values["MUS_DATABASE_URL"])
    try:
        with environment(values):
            ensure_schema(engine)
            yield root, engine
    finally:
        engine.dispose()
        shutil.rmtree(root, ignore_errors=True)


def redis_url(settings: Settings) -> tuple[str | None, str]:
    """The Redis URL to use (a random database index unless one is given) and a note; None if unreachable."""
    parts = urlsplit(settings.redis_url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 6379
    try:
        with socket.create_connection((host, port), timeout=2):
            pass
    except OSError as error:
        return None, f"unreachable at {host}:{port} ({error.strerror or error}): Redis configurations skipped"
    url = settings.redis_url.rstrip("/")
    if parts.path.strip("/") == "":
        url = f"{url}/{secrets.randbelow(14) + 1}"
    return url, url


def host_of(root: Path, cores: Sequence[int] | None) -> Callable[[int], dict[str, str]]:
    """The environment of the `index`th worker: pinned, a worker stands for a machine of its own (what more machines
    would give), so it has a host play lock of its own (`workers.host_lock`); unpinned, they share this machine's."""
    if cores is None:
        return lambda index: {}
    return lambda index: {HOST_LOCK_VARIABLE: str(root / f"host-{index}.lock")}


def start_mus_workers(
    count: int,
    root: Path,
    cores: Sequence[int] | None = None,
    environment: Callable[[int], Mapping[str, str]] = lambda index: {},
) -> list[subprocess.Popen[bytes]]:
    """`mus worker --concurrency 1` processes on this environment's broker, each in its own process group, the
    `index`th pinned to `cores[index]` when cores are given (its pool child and its bots inherit it), with
    `environment(index)` added to this one, and preferring half `index % 2` of the duplicate pairs, as `mus league
    run` starts its embedded workers."""
    workers = []
    for index in range(count):
        core = cores[index] if cores else None
        with (root / f"worker-{index}.log").open("wb") as log:
            workers.append(
                subprocess.Popen(
                    [
                        *(sys.executable, "-m", "workers.cli.main", "worker", "--concurrency", "1"),
                        *("--loglevel", "WARNING", "--prefer-half", str(index % 2)),
                    ],
                    env={**os.environ, **environment(index)},
                    cwd=root,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=log,
                    start_new_session=True,
                    preexec_fn=worker_preexec(None if core is None else {core}),
                )
            )
    return workers


def stop_mus_workers(workers: Sequence[subprocess.Popen[bytes]]) -> None:
    """A warm shutdown (they are idle), then kill what is left of each worker's process group."""
    for worker in workers:
        if worker.poll() is None:
            worker.terminate()
    deadline = time.monotonic() + 20
    for worker in workers:
        try:
            worker.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(worker.pid, signal.SIGKILL)  # a pool child left behind


# ---------------------------------------------------------------------------------------------- cores


def usable_cores() -> list[int]:
    """The cores this process may run on."""
    return sorted(os.sched_getaffinity(0))


def core_plan(workers: int, settings: Settings) -> list[int] | None:
    """The core of each worker (one each), or None when not pinning or when there are fewer cores than workers."""
    cores = usable_cores()
    if not settings.pin or workers > len(cores):
        return None
    return cores[:workers]


ENGINE_CODE = (
    "import json, sys\n"
    "from bench.engine import self_play_rate\n"
    "from referee.engine.rules import Rules\n"
    "print(json.dumps(self_play_rate(Rules.from_options(json.loads(sys.argv[1])), float(sys.argv[2]))))\n"
)


def engine_rate(workers: int, cores: Sequence[int] | None, settings: Settings) -> dict[str, Any]:
    """The engine's self-play on the configuration's cores: one process per worker, pinned like the workers,
    all at once for `settings.engine_s`; matches per second summed (the league's ceiling on those cores).
    `run_configuration` measures it just before and just after the league and takes the mean."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", ENGINE_CODE, json.dumps(dict(settings.options)), str(settings.engine_s)],
            stdout=subprocess.PIPE,
            preexec_fn=worker_preexec(None if cores is None else {cores[index]}),
        )
        for index in range(workers)
    ]
    rates = []
    for process in processes:
        out, _ = process.communicate(timeout=60 + 10 * settings.engine_s)
        rates.append(json.loads(out))
    return {
        "matches_per_s": sum(rate["matches_per_s"] for rate in rates),
        "decisions_per_match": statistics.median(rate["decisions_per_match"] for rate in rates),
    }


def cpu_lines(path: Path) -> list[dict[str, Any]]:
    """The workers' MUS_CPU_LOG lines (workers/cpu_log.py), one a played match."""
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def cpu_components(path: Path, matches: int, scheduler_s: float) -> dict[str, Any]:
    """CPU-seconds per match by component, from the workers' MUS_CPU_LOG (workers/cpu_log.py) and this process's
    getrusage. `worker` is each worker process's CPU from its first claim to its last result that was not a
    match's database or referee work (Celery, the broker, the heartbeat, the launch checks);
    `scheduler` is `run_league`'s process (queueing, following progress in the database)."""
    lines = cpu_lines(path)
    if not lines or not matches:
        return {"cpu_s_per_match": None}
    sums = _component_sums(lines)
    worker = 0.0
    for pid in {line["pid"] for line in lines}:
        own = [line for line in lines if line["pid"] == pid]
        span = max(line["cpu_after_s"] for line in own) - min(line["cpu_before_s"] for line in own)
        worker += span - sum(line["referee_s"] + line["database_s"] for line in own)
    per_match = {name: value / matches for name, value in sums.items()}
    per_match["worker"] = worker / matches
    per_match["scheduler"] = scheduler_s / matches
    per_match["total"] = sum(per_match.values())
    return {"cpu_s_per_match": {name: round(value, 4) for name, value in per_match.items()}}


def _component_sums(lines: Sequence[dict[str, Any]]) -> dict[str, float]:
    """The bots', referee's and database's CPU-seconds of these MUS_CPU_LOG lines, added up."""
    return {name: sum(line[f"{name}_s"] for line in lines) for name in ("bots", "referee", "database")}


def cleanup_redis(url: str) -> None:
    """Delete what this run's queues left on Redis (the queues and their exchanges' bindings), nothing else."""
    try:
        import redis

        client = redis.Redis.from_url(url, socket_timeout=5)
        for queue in match_queues():
            client.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
            client.zrem("_kombu.binding_deadlines", queue)
        client.close()
    except Exception:  # best effort: a benchmark does not fail over leftovers of a unique queue name
        return


def machine_ticks() -> tuple[int, int] | None:
    """Busy and total CPU ticks of the whole machine since boot, from /proc/stat (None where there is none)."""
    try:
        fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return sum(fields) - idle, sum(fields)


def cpu_seconds(*who: int) -> float:
    """CPU time of this process and of every child it has waited for (their children included); or of `who`."""
    import resource

    total = 0.0
    for target in who or (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(target)
        total += usage.ru_utime + usage.ru_stime
    return total


def _seconds(later: datetime, earlier: datetime) -> float:
    return (later - earlier).total_seconds()


def timings(engine: Engine, league_id: int, lines: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """From the database: the span from the first claim to the last result, time in a match, gaps between; with
    the workers' MUS_CPU_LOG `lines`, its warm matches (`warm`)."""
    with session_scope(engine) as session:
        matches = repo.list_matches(session, league_id)
        results = repo.league_results(session, league_id)
    played = [(m.started_at, m.finished_at, m.worker or "", m.id) for m in matches if m.started_at and m.finished_at]
    later = warm([(match_id, start, end, worker) for start, end, worker, match_id in played], lines)
    if not played:
        return {"span_s": None, "in_match_ms": None, "gap_ms": None, "retries": 0, "faults": 0, "signature": ""} | later
    span = _seconds(max(end for _, end, _, _ in played), min(start for start, _, _, _ in played))
    in_match = [_seconds(end, start) for start, end, _, _ in played]
    by_worker: dict[str, list[tuple[datetime, datetime]]] = {}
    for start, end, worker, _ in played:
        by_worker.setdefault(worker, []).append((start, end))
    gaps: list[float] = []
    for spans in by_worker.values():
        spans.sort()
        gaps += [_seconds(following[0], previous[1]) for previous, following in itertools.pairwise(spans)]
    signature = sorted((r.index, r.winner_team, r.termination, r.points, r.games) for r in results)
    return {
        "span_s": span,
        "in_match_ms": 1000 * statistics.median(in_match),
        "gap_ms": 1000 * statistics.median(gaps) if gaps else None,
        "retries": sum(max(m.attempt - 1, 0) for m in matches),
        "faults": sum(len(r.faults) for r in results),
        "signature": hashlib.sha256(repr(signature).encode()).hexdigest()[:16],
        **later,
    }


def warm(
    played: Sequence[tuple[int | None, datetime, datetime, str]], lines: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """The league's warm matches, `played` being (match id, claim, result, worker) of every played match: those for
    which no pooled process was started (`pool_started` 0 in their MUS_CPU_LOG `lines`; a match without a line
    is not counted). A pooled process starts at its first seat and plays on (docs/pool.md), so the first matches
    of each worker and half also pay the pool's start-ups; the warm ones show the pace a long run keeps. Each
    worker's warm matches are timed from their claim to that worker's next claim (its wait for the next message
    included) or, for its last, to their result; the rate is each worker's count over its time, added up over the
    workers, which play side by side."""
    started = {line.get("match_id"): line.get("pool_started", 0) for line in lines}
    by_worker: dict[str, list[tuple[datetime, datetime, int | None]]] = {}
    for match_id, claim, result, worker in played:
        by_worker.setdefault(worker, []).append((claim, result, match_id))
    rate, ids = 0.0, set()
    for spans in by_worker.values():
        spans.sort(key=lambda span: span[0])
        seconds, count = 0.0, 0
        for index, (claim, result, match_id) in enumerate(spans):
            if started.get(match_id, 1) != 0:
                continue
            end = spans[index + 1][0] if index + 1 < len(spans) else result
            seconds, count = seconds + _seconds(end, claim), count + 1
            ids.add(match_id)
        rate += count / seconds if count and seconds > 0 else 0.0
    own = [line for line in lines if line.get("match_id") in ids]
    cpu = {name: round(value / len(own), 4) for name, value in _component_sums(own).items()} if own else None
    return {"warm_matches": len(ids), "warm_matches_per_s": rate or None, "warm_cpu_s_per_match": cpu}


def run_configuration(broker: str, workers: int, settings: Settings, url: str | None) -> dict[str, Any]:
    """One league on a fresh deployment: `workers` workers on `broker`; its figures."""
    with deployment(url if broker == "redis" else None, settings.think_ms) as (root, engine):
        league_id = create_league(engine, settings)
        cores = core_plan(workers, settings)
        with session_scope(engine) as session:
            total = repo.league_progress(session, league_id)["total"]
        deadline = time.monotonic() + 60 + 10 * total
        mus_workers: list[subprocess.Popen[bytes]] = []
        stopped: list[str] = []

        def watch(progress: dict[str, int]) -> None:
            if time.monotonic() > deadline:
                stopped.append(f"stopped after {60 + 10 * total} s")
            elif mus_workers and all(worker.poll() is not None for worker in mus_workers):
                stopped.append("every mus worker exited")
            if stopped:
                raise _Deadline

        engine_before = engine_rate(workers, cores, settings)
        ticks_before, cpu_before = machine_ticks(), cpu_seconds()
        self_before = cpu_seconds(RUSAGE_SELF)
        started = time.monotonic()
        if broker == "redis":
            mus_workers.extend(start_mus_workers(workers, root, cores, host_of(root, cores)))
        try:
            report = run_league(
                engine,
                LEAGUE,
                workers=workers,
                on_progress=watch,
                worker_environment=host_of(root, cores),
                worker_cores=lambda index: None if cores is None else {cores[index]},
            )
        finally:
            stop_mus_workers(mus_workers)
            if broker == "redis" and url is not None:
                cleanup_redis(url)
        wall = time.monotonic() - started
        cpu, ticks_after = cpu_seconds() - cpu_before, machine_ticks()
        self_cpu = cpu_seconds(RUSAGE_SELF) - self_before
        if report.interrupted and not stopped:
            raise KeyboardInterrupt  # Ctrl-C: run_league stopped cleanly, and so does the benchmark
        figures = timings(engine, league_id, cpu_lines(root / "cpu.jsonl"))
        finished = report.progress.get("finished", 0)
        span = figures.pop("span_s")
        busy, cpus = None, os.cpu_count() or 1
        if ticks_before is not None and ticks_after is not None and ticks_after[1] > ticks_before[1]:
            busy = 100 * (ticks_after[0] - ticks_before[0]) / (ticks_after[1] - ticks_before[1])
        components = cpu_components(root / "cpu.jsonl", finished, self_cpu)
        # Sandboxed bots are mostly reaped by the host's init (bwrap's pid namespace), out of getrusage's reach:
        # their cgroups count them, so the per-match total is the league's CPU whenever it is there.
        component_total = (components["cpu_s_per_match"] or {}).get("total")
        league_cpu = component_total * finished if component_total is not None else cpu
        engine_after = engine_rate(workers, cores, settings)
        engine_figures = {
            key: statistics.mean((engine_before[key], engine_after[key]))
            for key in ("matches_per_s", "decisions_per_match")
        }
        rate = finished / span if report.completed and span else None
        warm_rate = figures["warm_matches_per_s"] if report.completed else None
        result: dict[str, Any] = {
            "completed": report.completed,
            "matches": finished,
            "matches_per_s": rate,
            "pinned_cores": cores,
            "engine_matches_per_s": engine_figures["matches_per_s"],
            "engine_decisions_per_match": engine_figures["decisions_per_match"],
            "efficiency": rate / engine_figures["matches_per_s"] if rate is not None else None,
            "wall_s": wall,
            "matches_per_s_wall": finished / wall if report.completed else None,
            **figures,
            "league_cpu_s_per_match": league_cpu / finished if finished else None,
            "machine_busy_pct": busy,
            "others_busy_pct": busy - 100 * league_cpu / (wall * cpus) if busy is not None else None,
            **components,
            "warm_efficiency": warm_rate / engine_figures["matches_per_s"] if warm_rate is not None else None,
        }
        if not report.completed:
            reason = f" ({stopped[0]})" if stopped else ""
            result["error"] = f"{finished} of {total} matches finished{reason}; " + worker_log_tail(root)
        return result


def worker_log_tail(root: Path) -> str:
    """The end of the first non-empty worker log of a failed configuration."""
    for log in sorted([*root.glob("worker-*.log"), *(root / "broker").glob("worker-*.log")]):
        text = log.read_text(errors="replace").strip()
        if text:
            return f"{log.name}: {text[-400:]}"
    return "the workers logged nothing"


def configurations(settings: Settings) -> list[tuple[str, int]]:
    return [(broker, workers) for broker in settings.brokers for workers in settings.workers]


def aggregate(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A configuration's rounds: medians of its figures, and each round's matches per second."""
    merged: dict[str, Any] = {}
    for key in runs[0]:
        values = [run[key] for run in runs if key in run]
        numbers = [value for value in values if isinstance(value, int | float) and not isinstance(value, bool)]
        if key in ("completed",):
            merged[key] = all(values)
        elif key == "signature":
            merged[key] = values
        elif key in ("error", "pinned_cores"):
            merged[key] = values[0]
        elif key in ("cpu_s_per_match", "warm_cpu_s_per_match"):
            parts = [value for value in values if isinstance(value, dict)]
            merged[key] = (
                {name: round(statistics.median(part[name] for part in parts), 4) for name in parts[0]}
                if parts
                else None
            )
        elif numbers and len(numbers) == len(values):
            merged[key] = statistics.median(numbers)
        else:
            merged[key] = None
    rate, cpu = merged.get("matches_per_s"), merged.get("league_cpu_s_per_match")
    merged["league_cores"] = rate * cpu if rate is not None and cpu is not None else None
    merged["matches_per_s_runs"] = [
        round(run["matches_per_s"], 3) if run.get("matches_per_s") is not None else None for run in runs
    ]
    return merged


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def probe(settings: Settings) -> dict[str, Any]:
    """Where a match's time goes, for the instant bot and for the example random bot (see `bench.league_probe`);
    with `settings.pool`, also for the instant bot's pooled processes (`instant_pooled`), warmed up by one match
    first (a pooled process starts once, then plays seat after seat)."""
    if settings.probe_matches <= 0:
        return {}
    out: dict[str, Any] = {}
    programs = {"instant": BOT_COMMAND, "example_random": BOTS["random"][0]}
    if settings.bot == "cpp":
        programs["cpp"] = CPP_COMMAND
    if settings.pool:
        programs["instant_pooled"] = BOT_COMMAND
    for label, command in programs.items():
        pooled = label.endswith("_pooled")
        pool = BotPool(probe_limits()) if pooled else None
        try:
            with deployment(None) as (root, engine):
                league_id = create_league(engine, replace(settings, bot="instant"))
                with session_scope(engine) as session:
                    match_ids = [m.id for m in repo.list_matches(session, league_id) if m.id is not None]
                phases: list[Phases] = []
                log_dir = root / "logs"
                log_dir.mkdir(parents=True, exist_ok=True)
                # The instant bot's script is bound into its sandbox with its folder, as in the league.
                folder = BOT_SCRIPT.parent if command == BOT_COMMAND else None
                program = BotProgram(label, command, folder, persistent=pooled)
                warm_up = 1 if pool is not None else 0
                for index, match_id in enumerate(match_ids[: settings.probe_matches + warm_up]):
                    phase = probe_match(engine, match_id, program, log_dir, pool)
                    if index >= warm_up:
                        phases.append(phase)
                out[label] = summarize(phases)
        finally:
            if pool is not None:
                pool.close()
    return out


def describe_rules(options: Mapping[str, Any]) -> str:
    rules = Rules.from_options(dict(options))
    changed = rules.changed_options()
    shown = ", ".join(f"{key}={value}" for key, value in sorted(changed.items())) if changed else "defaults"
    return (
        f"{shown} (target_score={rules.target_score}, games_to_win_vaca={rules.games_to_win_vaca}, "
        f"vacas_to_win_match={rules.vacas_to_win_match})"
    )


def prepare(bot: str) -> str | None:
    """Make sure the entrants' program can run; None, or why it cannot (the C++ bot is built here if needed)."""
    if bot != "cpp":
        return None
    try:
        build_bot()
    except BuildError as error:
        return f"cannot build the C++ bot: {error}"
    return None


def run(settings: Settings | None = None, *, quick: bool = False) -> dict[str, Any]:
    """The league benchmark; one JSON-ready object. `quick` is a short run (a smoke test), not a measurement."""
    settings = settings or (QUICK if quick else Settings())
    load_before = os.getloadavg()[0]
    url, redis_note = (None, "not asked") if "redis" not in settings.brokers else redis_url(settings)
    matches = len(schedule_round_robin(entrants(settings), settings.matches_per_pairing))
    result: dict[str, Any] = {
        "bot": BOTS[settings.bot][1],
        "think_ms": settings.think_ms if settings.bot == "instant" else None,
        "rules": describe_rules(settings.options),
        "entrants": settings.bots,
        "matches_per_pairing": settings.matches_per_pairing,
        "matches": matches,
        "repeats": settings.repeats,
        "database": "SQLite (WAL), a new file for every configuration and round, Redis runs included",
        "redis": redis_note,
        "pinning": (
            "each worker, with its embedded referee and its bots (children inherit affinity), on a core of its own,"
            " with a host play lock of its own: a machine of its own"
            if settings.pin
            else "off (--no-pin): the kernel places every process; the workers share this machine's host play lock"
        ),
        "what_cpu_s_per_match_means": (
            "the workers' MUS_CPU_LOG (workers/cpu_log.py) and getrusage: bots = the four seats' cgroups (cpuacct "
            "on cgroup v1, cpu.stat on v2: sandbox included; the reaped children's CPU where there is none); "
            "referee and database = the worker's own CPU while playing and in the match's transactions; worker = "
            "the rest of the worker's CPU between its first claim and its last result; scheduler = the run_league "
            "process; total = their sum (league_cpu_s_per_match). warm_cpu_s_per_match: bots, referee and "
            "database of the matches for which no pooled process was started"
        ),
        "what_efficiency_means": (
            "league matches_per_s / the engine's random self-play matches_per_s on the same cores, in the same round"
        ),
        "what_matches_per_s_means": (
            "league matches / (last result - first claim), from the database; workers' start-up excluded "
            "(wall_s and matches_per_s_wall include it)"
        ),
    }
    todo = [(broker, workers) for broker, workers in configurations(settings) if broker != "redis" or url]
    runs: dict[str, list[dict[str, Any]]] = {f"{broker}_{workers}": [] for broker, workers in todo}
    for round_index in range(settings.repeats):
        shift = round_index % len(todo) if todo else 0
        for broker, workers in todo[shift:] + todo[:shift]:
            runs[f"{broker}_{workers}"].append(run_configuration(broker, workers, settings, url))
    configs: dict[str, Any] = {}
    signatures: set[str] = set()
    for broker, workers in configurations(settings):
        name = f"{broker}_{workers}"
        if name in runs:
            merged = aggregate(runs[name])
            signatures.update(merged.pop("signature", []))
            configs[name] = {"broker": broker, "workers": workers, **merged}
        else:
            configs[name] = {"broker": broker, "workers": workers, "matches_per_s": None, "skipped": redis_note}
    result["configurations"] = configs
    deterministic = settings.bot in SEEDED_BOTS and signatures
    result["identical_results"] = len(signatures) == 1 if deterministic else None

    def rate(name: str) -> float | None:
        value = configs.get(name, {}).get("matches_per_s")
        return float(value) if value is not None else None

    low, high = (min(settings.workers), max(settings.workers)) if settings.workers else (1, 1)
    result["scaling_2_over_1"] = {
        broker: ratio(rate(f"{broker}_{high}"), rate(f"{broker}_{low}")) for broker in settings.brokers
    }
    result["scaling_target"] = SCALING_TARGET
    result["embedded_over_redis"] = {
        str(workers): ratio(rate(f"embedded_{workers}"), rate(f"redis_{workers}")) for workers in settings.workers
    }
    result["embedded_over_redis_target"] = EMBEDDED_OVER_REDIS_TARGET
    efficiencies = {name: config.get("efficiency") for name, config in configs.items()}
    first = [name for name in (f"{broker}_{low}" for broker in settings.brokers) if efficiencies.get(name) is not None]
    result["efficiency"] = efficiencies[first[0]] if first else None
    result["efficiency_of"] = first[0] if first else None
    result["efficiency_by_configuration"] = efficiencies
    result["efficiency_target"] = EFFICIENCY_TARGET
    result["warm_efficiency"] = configs[first[0]].get("warm_efficiency") if first else None
    result["per_match"] = probe(settings)
    result["cpus"] = os.cpu_count()
    result["load_average_1m_before"], result["load_average_1m_after"] = load_before, os.getloadavg()[0]
    result["quick"] = quick
    return result


def with_overrides(
    quick: bool,
    *,
    repeats: int | None = None,
    matches_per_pairing: int | None = None,
    brokers: Sequence[str] | None = None,
    options: Mapping[str, Any] | None = None,
    redis: str | None = None,
    bot: str | None = None,
    think_ms: float | None = None,
    pin: bool | None = None,
    pool: bool | None = None,
) -> Settings:
    """The settings for the command line's flags: the full run or `--quick`, then what was given."""
    settings = QUICK if quick else Settings()
    changes: dict[str, Any] = {}
    if repeats is not None:
        changes["repeats"] = repeats
    if matches_per_pairing is not None:
        changes["matches_per_pairing"] = matches_per_pairing
    if brokers:
        changes["brokers"] = tuple(dict.fromkeys(brokers))
    if options:
        changes["options"] = dict(options)
    if redis is not None:
        changes["redis_url"] = redis
    if bot is not None:
        changes["bot"] = bot
    if think_ms is not None:
        changes["think_ms"] = think_ms
    if pin is not None:
        changes["pin"] = pin
    if pool is not None:
        changes["pool"] = pool
    return replace(settings, **changes)


def table_rows(result: dict[str, Any]) -> dict[str, Any]:
    """The result flattened to one value a row, for the table view."""
    rows = {key: value for key, value in result.items() if key not in ("configurations", "per_match")}
    for key in ("scaling_2_over_1", "embedded_over_redis"):
        rows[key] = ", ".join(
            f"{name}: {value:.2f}" if value is not None else f"{name}: n/a" for name, value in result[key].items()
        )
    for name, config in result["configurations"].items():
        for key, value in config.items():
            if key not in ("broker", "workers"):
                rows[f"{name}: {key}"] = value
    for bot, phases in result["per_match"].items():
        for key, value in phases.items():
            rows[f"per match ({bot}): {key}"] = value
    return rows
