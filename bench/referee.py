"""Referee benchmark: the referee's decision round trip against a raw gRPC ping-pong, and throughput under load.

The servers run in a separate process (`bench.referee_server`): the real referee, started with
`start_server(Referee(admin_token=...))`, and a trivial `grpc.aio` servicer that echoes bytes on one
bidirectional method, with the same server options. The round-trip comparison's clients run here, in one asyncio
event loop; the load levels' in client processes (below). Tables are created through the admin API
(`TableAdminService.CreateTable`) with default rules.

What is measured:

- Raw round trip: on one bidirectional stream of the echo servicer, the time from just before `call.write` of
  a message to the return of `call.read` with its echo. Both messages have `raw_payload_bytes` bytes: the
  median serialized size of the PlayResponse messages carrying a DecisionRequest in the warm-up matches
  (`decision_request_bytes` is the same median over every match of the comparison).
- Referee round trip, with instant bots: one client process holds all four seats' streams of a table and
  answers every DecisionRequest at once with a random legal action. For an Act that answers the table's only
  open decision (every decision kind except the simultaneous discard), the time from just before `call.write`
  of that Act to the return of `call.read` with the next DecisionRequest of the same table, on any of its four
  streams (the first of them, when the Act opens several). In between the referee validates and applies the
  action, converts the new events and sends them to every seat, builds the next seat's view and legal actions
  and sends the DecisionRequest; the client reads, on the four streams, every event sent before it
  (`referee_messages_per_round_trip` is how many messages that is on average, the DecisionRequest included).
  Acts that end the match are not timed.
- Where the referee's extra time goes: `referee_act_us_median` (and p99) is the server's own time in
  `Table.act` for the Acts of those rounds (validation, the engine's step, events converted and routed, the
  next decision's view and legal actions, the messages queued: everything but gRPC), timed in the server
  process; `referee_rest_us` is what remains of the referee median beyond the raw median and that: the
  referee's extra hops between streams (the Act is read on one seat's stream, the next request leaves on
  another's) and the event loop's scheduling of them.
- `act_over_engine` is `referee_act_us_median` over the engine's µs per decision (`engine_us_per_decision_median`,
  random self-play timed in this process after the rounds). The two are not timed in the same conditions: the
  engine's steps run back to back, with the processor's caches holding nothing else, while each Act runs
  between the gRPC work of the server's event loop. So the same run also times the engine's part of each Act
  (`referee_engine_us_median`: the step, the next decision's seats, kind and legal actions, every call the Act
  makes into the match, as `engine_us_per_decision_median` counts the awaited seat, its legal actions and the step)
  and gives `act_over_engine_in_referee`, the Act over the engine's part both timed in the server: how much the
  referee adds to the engine, like for like.
- The ratio is referee median over raw median. Both are measured in the same run, in interleaved rounds
  (raw then referee, referee then raw, ...), after a warm-up of both; the medians and p99 pool every round,
  and `ratio_per_round` shows how much the ratio moves from round to round on this machine.
- Throughput: for each concurrency level, that many table slots play whole matches back to back with instant
  bots (four channels per slot, one per bot, each with a connection of its own). The slots are spread over
  `CLIENT_PROCESSES` client processes (`bench.referee_load`), each with its own event loop: one loop holding the
  2,000 streams of 500 tables would itself be what is measured (its own lag would show as the referee's latency,
  and late Joins as the referee's fault). After a warm-up, Acts sent during a fixed window give
  `decisions_per_s`, and round trips (as above) of Acts sent in it give the decision latency
  (`decision_latency_p50_ms`, `_p99_ms`, `_max_ms`: an instant bot's Act to its table's next DecisionRequest);
  matches started before the window's end are played out, and `matches` counts every match of the level.
  `timeouts` counts the faults of cause TIMEOUT in the outcomes of every match of the level (the outcome carries
  the table's `faults()`), `faults` every fault of any cause, and `incidents` the outcomes' incidents: a seat
  absent at the join deadline or disconnected has its decisions time out at once, so a timeout with an incident
  is not the decision clock of the rules (`rules`) running out. `join_latency_*_ms`: for the streams opened in
  the window, from opening the stream to reading its Joined: how long the referee takes to take a new call and
  read its Join (every match opens four new streams). `stream_errors` counts the bots' streams that
  ended with a status other than OK (`stream_errors_by_status`: how many with each status and details).
  `server_cpu_pct` and `client_cpu_pct` are the CPU time of the server process
  and of all client processes over the window (100 = one core; the machine's cores are shared by all of them),
  `server_cpu_us_per_decision` the server's CPU time over the window divided by the decisions in it (match
  set-up included), and `referee_rss_mb` the referee process's resident memory, the most sampled over the window
  (every 0.1 s).

With a profile path, the server process runs cProfile during the load levels and writes a pstats file there
(the levels' figures are then slower than normal).
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import secrets
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc

from bench.engine import bench_decisions
from bench.referee_clients import Admin, Tally, clock, ping_pong, play_matches, play_until
from mus.v1 import admin_pb2_grpc
from referee.engine.rules import Rules

WHAT_RTT_MEANS = (
    "raw: write of a message to the return of read with its echo, on one bidirectional stream of a trivial "
    "bytes echo servicer, both messages of raw_payload_bytes bytes. referee: with instant bots holding "
    "all four seats of a table in one client process, write of an Act answering the table's only open "
    "decision (all kinds but the simultaneous discard) to the return of read with the next DecisionRequest "
    "of that table on any of its four streams; the events the referee sends before it are read on the way."
)
RATIO_TARGET = 1.5
"""Issue 12: the decision round trip at most 1.5 times a raw grpc.aio ping-pong of the same size."""
ACT_OVER_ENGINE_TARGET = 2.0
"""Issue 12: the referee's own work per decision at most twice the engine's step."""
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
"""The directory that holds this `bench` package."""
LEVELS = (1, 4, 16, 100)
CLIENT_PROCESSES = 4
"""Client processes of a load level (fewer for fewer tables): one event loop holding the 2,000 streams of 500
tables, on a machine whose cores it shares with the referee, would be what the level measures."""


@dataclass(frozen=True)
class Settings:
    """How long each part runs."""

    warmup_matches: int = 3
    rounds: int = 6
    """Interleaved rounds of the round-trip comparison."""
    matches_per_round: int = 3
    """Single-table matches of the referee side of a round (about 40 timed round trips each)."""
    raw_exchanges_per_round: int = 200
    level_warmup_s: float = 1.5
    level_window_s: float = 8.0
    levels: tuple[int, ...] = LEVELS
    engine_matches: int = 100
    """Random self-play matches timed in this process for the engine's own µs per decision (`act_over_engine`)."""


QUICK = Settings(
    warmup_matches=1,
    rounds=2,
    matches_per_round=1,
    raw_exchanges_per_round=100,
    level_warmup_s=0.3,
    level_window_s=1.0,
    engine_matches=5,
)


def percentile(samples: Sequence[int], fraction: float) -> float:
    ordered = sorted(samples)
    return float(ordered[int(fraction * (len(ordered) - 1))])


class ServerProcess:
    """`python -m bench.referee_server` as a child process, driven by lines on its stdin."""

    def __init__(self) -> None:
        self.admin_token = secrets.token_urlsafe(24)
        self.process: asyncio.subprocess.Process | None = None
        self.referee_address = self.raw_address = ""
        self.pid = 0

    async def start(self) -> None:
        self.process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.referee_server",
            f"--admin-token={self.admin_token}",  # a token may begin with "-"
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=PACKAGE_ROOT,  # `-m` looks in the working directory first: import this `bench`, not another one
        )
        ready = json.loads(await self._line())
        self.referee_address = f"127.0.0.1:{ready['referee_port']}"
        self.raw_address = f"127.0.0.1:{ready['raw_port']}"
        self.pid = int(ready["pid"])

    async def _line(self) -> str:
        assert self.process is not None and self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), 60)
        if not line:
            raise RuntimeError("the benchmark's server process exited")
        return line.decode().strip()

    async def command(self, line: str) -> str:
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(f"{line}\n".encode())
        await self.process.stdin.drain()
        return await self._line()

    async def stop(self) -> None:
        if self.process is None:
            return
        if self.process.returncode is None and self.process.stdin is not None:
            self.process.stdin.write(b"quit\n")
            self.process.stdin.close()
            try:
                await asyncio.wait_for(self.process.wait(), 30)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()

    def cpu_seconds(self) -> float | None:
        """The server process's user + system CPU time, from /proc (None where there is no /proc)."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def compare_round_trips(server: ServerProcess, admin: Admin, settings: Settings) -> dict[str, Any]:
    """Raw ping-pong and referee round trips at one table, interleaved rounds after a warm-up of both."""
    warmup = Tally(request_bytes=[])
    await play_matches(server.referee_address, admin, range(settings.warmup_matches), warmup)
    assert warmup.request_bytes
    size = int(statistics.median(warmup.request_bytes))
    payload = secrets.token_bytes(size)
    raw_samples: list[int] = []
    referee_samples: list[int] = []
    round_trip_messages: list[int] = []
    sizes: list[int] = list(warmup.request_bytes)
    ratios: list[float] = []
    errors: list[str] = list(warmup.stream_errors)
    async with grpc.aio.insecure_channel(server.raw_address) as channel:
        await ping_pong(channel, payload, settings.raw_exchanges_per_round)  # warm-up
        await server.command("act-times-start")
        seed = 1000
        for index in range(settings.rounds):
            tally = Tally(request_bytes=[])
            seeds = range(seed, seed + settings.matches_per_round)
            seed += settings.matches_per_round
            if index % 2 == 0:
                raw = await ping_pong(channel, payload, settings.raw_exchanges_per_round)
                await play_matches(server.referee_address, admin, seeds, tally)
            else:
                await play_matches(server.referee_address, admin, seeds, tally)
                raw = await ping_pong(channel, payload, settings.raw_exchanges_per_round)
            raw_samples.extend(raw)
            referee_samples.extend(tally.rtt_ns)
            round_trip_messages.extend(tally.rtt_messages)
            assert tally.request_bytes is not None
            sizes.extend(tally.request_bytes)
            errors.extend(tally.stream_errors)
            ratios.append(statistics.median(tally.rtt_ns) / statistics.median(raw))
        act = json.loads(await server.command("act-times-stop"))
    raw_median = statistics.median(raw_samples)
    referee_median = statistics.median(referee_samples)
    return {
        "decision_request_bytes": int(statistics.median(sizes)),
        "raw_payload_bytes": size,
        "raw_rtt_median_us": raw_median / 1000,
        "raw_rtt_p99_us": percentile(raw_samples, 0.99) / 1000,
        "raw_samples": len(raw_samples),
        "referee_rtt_median_us": referee_median / 1000,
        "referee_rtt_p99_us": percentile(referee_samples, 0.99) / 1000,
        "referee_samples": len(referee_samples),
        "referee_messages_per_round_trip": statistics.mean(round_trip_messages),
        "ratio": referee_median / raw_median,
        "ratio_target": RATIO_TARGET,
        "ratio_per_round": [round(ratio, 3) for ratio in ratios],
        "referee_act_us_median": act["median_us"],
        "referee_act_us_p99": act["p99_us"],
        "referee_engine_us_median": act["engine_median_us"],
        "referee_rest_us": (
            referee_median / 1000 - raw_median / 1000 - act["median_us"] if act["median_us"] is not None else None
        ),
        "round_trip_stream_errors": len(errors),
    }


async def run_level(server: ServerProcess, tables: int, settings: Settings) -> dict[str, Any]:
    """`tables` slots playing matches back to back in client processes; decisions per second, decision latency
    and the referee's memory over a window after a warm-up."""
    processes = min(tables, CLIENT_PROCESSES)
    clients = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.referee_load",
            server.referee_address,
            str(tables * index // processes),
            str(tables * (index + 1) // processes - tables * index // processes),
            str(tables),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=PACKAGE_ROOT,
            env=dict(os.environ, MUS_ADMIN_TOKEN=server.admin_token),
        )
        for index in range(processes)
    ]
    for client in clients:
        assert client.stdout is not None
        if (await asyncio.wait_for(client.stdout.readline(), 60)).strip() != b"ready":
            raise RuntimeError("a client process of the benchmark did not start")
    window_start = clock() + int(settings.level_warmup_s * 1e9)
    window_end = window_start + int(settings.level_window_s * 1e9)
    for client in clients:
        assert client.stdin is not None
        client.stdin.write(f"{window_start} {window_end}\n".encode())
        await client.stdin.drain()
    cpu: dict[str, float | None] = {}
    rss: list[float] = []

    async def sample_server() -> None:
        await asyncio.sleep(max(window_start - clock(), 0) / 1e9)
        server_before, wall_before = server.cpu_seconds(), clock()
        while clock() < window_end:
            value = rss_mb(server.pid)
            if value is not None:
                rss.append(value)
            await asyncio.sleep(0.1)
        server_after, wall = server.cpu_seconds(), (clock() - wall_before) / 1e9
        if server_before is not None and server_after is not None:
            cpu["server"], cpu["server_pct"] = server_after - server_before, 100 * (server_after - server_before) / wall

    sampler = asyncio.create_task(sample_server())
    tally = Tally(window=(window_start, window_end))
    client_cpu = 0.0
    for client in clients:
        out, _ = await client.communicate()
        if client.returncode != 0:
            raise RuntimeError(f"a client process of the benchmark exited with {client.returncode}")
        result = json.loads(out.decode().strip().splitlines()[-1])
        tally.add(result["tally"])
        client_cpu += result["cpu_s"]
    await sampler
    decisions_per_s = tally.acts / settings.level_window_s
    server_cpu = cpu.get("server")
    return {
        "tables": tables,
        "client_processes": processes,
        "decisions_per_s": decisions_per_s,
        "timeouts": tally.timeouts,
        "incidents": tally.incidents,
        "matches": tally.matches,
        "faults": tally.faults,
        "rejections": tally.rejections,
        "stream_errors": len(tally.stream_errors),
        "stream_errors_by_status": dict(collections.Counter(tally.stream_errors).most_common()),
        "decision_latency_p50_ms": statistics.median(tally.rtt_ns) / 1e6 if tally.rtt_ns else None,
        "decision_latency_p99_ms": percentile(tally.rtt_ns, 0.99) / 1e6 if tally.rtt_ns else None,
        "decision_latency_max_ms": max(tally.rtt_ns) / 1e6 if tally.rtt_ns else None,
        "join_latency_p50_ms": statistics.median(tally.join_ns) / 1e6 if tally.join_ns else None,
        "join_latency_p99_ms": percentile(tally.join_ns, 0.99) / 1e6 if tally.join_ns else None,
        "join_latency_max_ms": max(tally.join_ns) / 1e6 if tally.join_ns else None,
        "server_cpu_us_per_decision": 1e6 * server_cpu / tally.acts if server_cpu is not None and tally.acts else None,
        "server_cpu_pct": cpu.get("server_pct"),
        "client_cpu_pct": 100 * client_cpu / settings.level_window_s,
        "referee_rss_mb": max(rss) if rss else None,
    }


async def _run(settings: Settings, profile: Path | None) -> dict[str, Any]:
    rules = Rules()
    result: dict[str, Any] = {
        "what_rtt_means": WHAT_RTT_MEANS,
        "rules": (
            f"defaults (senas_mode={rules.senas_mode.value}, decision_timeout_s={rules.decision_timeout_s:g}, "
            f"time_bank_s={rules.time_bank_s:g})"
        ),
    }
    load_before = os.getloadavg()[0]
    server = ServerProcess()
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.referee_address) as admin_channel:
            admin = Admin(admin_pb2_grpc.TableAdminServiceStub(admin_channel), server.admin_token)
            result.update(await compare_round_trips(server, admin, settings))
            engine_us = bench_decisions(settings.engine_matches, rules)["us_per_decision_median"]
            result["engine_us_per_decision_median"] = engine_us
            act_us = result["referee_act_us_median"]
            result["act_over_engine"] = act_us / engine_us if act_us is not None else None
            result["act_over_engine_target"] = ACT_OVER_ENGINE_TARGET
            engine_in_referee = result["referee_engine_us_median"]
            result["act_over_engine_in_referee"] = act_us / engine_in_referee if engine_in_referee else None
            if profile is not None:
                await server.command("profile-start")
            levels = [await run_level(server, tables, settings) for tables in settings.levels]
            if profile is not None:
                await server.command(f"profile-stop {profile.resolve()}")
                result["profile"] = str(profile.resolve())
                result["profiled"] = "yes: the levels ran under cProfile, their figures are slower than normal"
            result["concurrency"] = levels
    finally:
        await server.stop()
    result["timeouts_target"] = 0
    result["cpus"] = os.cpu_count()
    result["load_average_1m_before"], result["load_average_1m_after"] = load_before, os.getloadavg()[0]
    return result


def rss_mb(pid: int) -> float | None:
    """A process's resident memory in MB, from /proc (None where there is no /proc)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


async def honest_phase(server: ServerProcess, admin: Admin, tables: int, settings: Settings) -> dict[str, Any]:
    """`tables` slots of instant bots for a warm-up and a window: their decision latency, timeouts and the
    referee's memory over the window (sampled every 0.1 s)."""
    start = clock()
    window_start = start + int(settings.level_warmup_s * 1e9)
    window_end = window_start + int(settings.level_window_s * 1e9)
    tally = Tally(window=(window_start, window_end))
    samples: list[float] = []

    async def sample_rss() -> None:
        while clock() < window_end:
            value = rss_mb(server.pid)
            if value is not None and clock() >= window_start:
                samples.append(value)
            await asyncio.sleep(0.1)

    sampler = asyncio.create_task(sample_rss())
    await asyncio.gather(
        *(
            play_until(server.referee_address, admin, window_end, 7_000_000 * (slot + 1), tally)
            for slot in range(tables)
        )
    )
    await sampler
    return {
        "decisions_per_s": tally.acts / settings.level_window_s,
        "rtt_p50_ms": statistics.median(tally.rtt_ns) / 1e6 if tally.rtt_ns else None,
        "rtt_p99_ms": percentile(tally.rtt_ns, 0.99) / 1e6 if tally.rtt_ns else None,
        "rtt_max_ms": max(tally.rtt_ns) / 1e6 if tally.rtt_ns else None,
        "timeouts": tally.timeouts,
        "faults": tally.faults,
        "matches": tally.matches,
        "stream_errors": len(tally.stream_errors),
        "referee_rss_mb_mean": statistics.mean(samples) if samples else None,
        "referee_rss_mb_max": max(samples) if samples else None,
    }


async def _run_flood(settings: Settings, tables: int) -> dict[str, Any]:
    """Honest tables alone, then the same with one flooding table (`bench.referee_flood`) beside them."""
    result: dict[str, Any] = {"what": FLOOD_WHAT, "honest_tables": tables}
    server = ServerProcess()
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.referee_address) as admin_channel:
            admin = Admin(admin_pb2_grpc.TableAdminServiceStub(admin_channel), server.admin_token)
            await play_matches(server.referee_address, admin, range(settings.warmup_matches), Tally())
            result["referee_rss_mb_idle"] = rss_mb(server.pid)
            result["before"] = await honest_phase(server, admin, tables, settings)
            flood_s = FLOOD_LEAD_S + settings.level_warmup_s + settings.level_window_s + 0.5
            flooder = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bench.referee_flood",
                server.referee_address,
                str(flood_s),
                stdout=asyncio.subprocess.PIPE,
                cwd=PACKAGE_ROOT,
                env=dict(os.environ, MUS_ADMIN_TOKEN=server.admin_token),
            )
            await asyncio.sleep(FLOOD_LEAD_S)  # the flood is under way before the honest tables start
            result["during"] = await honest_phase(server, admin, tables, settings)
            out, _ = await flooder.communicate()
            result.update(json.loads(out.decode().strip().splitlines()[-1]))
            result["referee_rss_mb_after"] = rss_mb(server.pid)
    finally:
        await server.stop()
    result["cpus"] = os.cpu_count()
    return result


FLOOD_WHAT = (
    "honest_tables slots of instant bots play matches back to back, first alone (before), then beside one table "
    "whose four seats answer every decision with max_senas_per_window unknown señas and send pings, every "
    "message padded to just under 64 KiB, at just under the 200 messages/s rate limit per stream (during). "
    "rtt: an honest Act to the next DecisionRequest of its table; rss: the referee process, sampled every 0.1 s "
    "over the window."
)
FLOOD_LEAD_S = 1.0
FLOOD_TABLES = 16


def run(
    quick: bool = False, profile: Path | None = None, flood: bool = False, tables: int | None = None
) -> dict[str, Any]:
    """The referee benchmark; one JSON-ready object. `quick` is a short run (a smoke test), not a measurement.

    With `flood`, the flood scenario instead: `tables` honest tables before and during a flood (see FLOOD_WHAT).
    """
    settings = QUICK if quick else Settings()
    if flood:
        result = asyncio.run(_run_flood(settings, tables or (4 if quick else FLOOD_TABLES)))
    else:
        if tables is not None:
            settings = replace(settings, levels=(tables,))
        result = asyncio.run(_run(settings, profile))
    result["quick"] = quick
    return result


def flood_rows(result: dict[str, Any]) -> dict[str, Any]:
    """The flood result flattened to one value a row, for the table view."""
    rows = {key: value for key, value in result.items() if key not in ("before", "during")}
    for phase in ("before", "during"):
        for key, value in result[phase].items():
            rows[f"{phase}: {key}"] = value
    return rows


def table_rows(result: dict[str, Any]) -> dict[str, Any]:
    """The result flattened to one value a row, for the table view."""
    rows = {key: value for key, value in result.items() if key not in ("concurrency", "ratio_per_round")}
    rows["ratio_per_round"] = ", ".join(f"{ratio:.2f}" for ratio in result["ratio_per_round"])
    for level in result["concurrency"]:
        for key, value in level.items():
            if key == "stream_errors_by_status":
                value = ", ".join(f"{status} ({count})" for status, count in value.items()) or "none"
            if key != "tables":
                rows[f"{level['tables']} tables: {key}"] = value
    return rows
