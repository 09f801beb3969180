"""The server process of `mus bench referee`: the real referee and a trivial ping-pong servicer, side by side.

Run as `python -m bench.referee_server --admin-token TOKEN`. It starts, in one asyncio event loop:

- the referee exactly as deployed, `referee.service.server.start_server(Referee(admin_token=TOKEN))`;
- a raw `grpc.aio` server with the same channel options (`SERVER_OPTIONS`), serving one bidirectional method,
  `/mus.bench.PingPong/Exchange`, that echoes every message back as is (bytes in, the same bytes out: no
  protobuf on either side).

It prints one JSON line, `{"referee_port": ..., "raw_port": ..., "pid": ...}`, then reads commands on stdin,
one a line, and answers each with one line on stdout:

- `profile-start`: start cProfile on the event loop's thread;
- `profile-stop PATH`: stop it and write the pstats file to PATH;
- `act-times-start`: from now on, time every `Table.act` (a bot's Act, from validation to the next decision
  and the messages it queues: everything the referee computes for one decision, without gRPC) and the engine's
  part of it (`ActTimes.ENGINE_CALLS`: the step, the next decision's seats, kind and legal actions);
- `act-times-stop`: stop timing and answer `{"count": ..., "median_us": ..., "p99_us": ...,
  "engine_median_us": ...}`;
- `quit` (or the end of stdin): stop both servers and exit.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from mus.v1 import play_pb2
from mus.v1 import types_pb2 as pb
from referee.engine.match import Match
from referee.service.loop import run
from referee.service.server import SERVER_OPTIONS, settle_start_up_heap, start_server
from referee.service.servicer import Referee
from referee.service.table import Table

PING_PONG_SERVICE = "mus.bench.PingPong"
PING_PONG_METHOD = f"/{PING_PONG_SERVICE}/Exchange"


async def _exchange(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
    """The trivial servicer: every message comes straight back."""
    async for request in requests:
        yield request


async def start_ping_pong_server(address: str = "127.0.0.1:0") -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server(options=SERVER_OPTIONS)
    handler: grpc.RpcMethodHandler[bytes, bytes] = grpc.stream_stream_rpc_method_handler(_exchange)  # bytes as is
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(PING_PONG_SERVICE, {"Exchange": handler}),))
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    await server.start()
    return server, port


class ActTimes:
    """Times every `Table.act` while installed (it wraps the class's method in this process only), and the engine's
    part of it: every call the Act makes into the match (`ENGINE_CALLS`: the step, and the next decision's seats,
    kind and legal actions), as `bench.engine.bench_decisions` times the engine's part of a decision (the awaited
    seat, its legal actions and the step). Both run in the same conditions, between the gRPC work of the server's
    event loop, which leaves the processor's caches colder than a loop of engine steps alone finds them."""

    ENGINE_CALLS = ("apply", "apply_timeout", "awaited", "decision_kind", "legal")
    """The `Match` methods the referee calls while it handles an Act. A call made from inside another (the step
    asks `awaited` itself) is counted once, in the outer one."""

    def __init__(self) -> None:
        self.samples_ns: list[int] = []
        self.engine_ns: list[int] = []
        self.original: Callable[[Table, int, int, pb.Action], play_pb2.ActionRejected | None] | None = None
        self.originals: dict[str, Callable[..., Any]] = {}

    def start(self) -> None:
        if self.original is not None:
            return
        original = self.original = Table.act
        samples, engine = self.samples_ns, self.engine_ns = [], []
        spent = [0, 0]  # ns in the engine during the current Act; how deep in engine calls we are

        def timed_call(method: Callable[..., Any]) -> Callable[..., Any]:
            def call(match: Match, *args: Any, **kwargs: Any) -> Any:
                if spent[1]:
                    return method(match, *args, **kwargs)
                spent[1] = 1
                begin = time.perf_counter_ns()
                try:
                    return method(match, *args, **kwargs)
                finally:
                    spent[0] += time.perf_counter_ns() - begin
                    spent[1] = 0

            return call

        for name in self.ENGINE_CALLS:
            method = self.originals[name] = getattr(Match, name)
            setattr(Match, name, timed_call(method))  # timing in the bench server only

        def timed(table: Table, seat: int, decision_id: int, message: pb.Action) -> play_pb2.ActionRejected | None:
            spent[0] = 0
            begin = time.perf_counter_ns()
            try:
                return original(table, seat, decision_id, message)
            finally:
                samples.append(time.perf_counter_ns() - begin)
                engine.append(spent[0])

        Table.act = timed  # type: ignore[method-assign, assignment]  # timing in the bench server only

    def stop(self) -> dict[str, Any]:
        if self.original is not None:
            Table.act = self.original  # type: ignore[method-assign, assignment]  # timing in the bench server only
            for name, method in self.originals.items():
                setattr(Match, name, method)
            self.original = None
            self.originals.clear()
        samples = sorted(self.samples_ns)
        if not samples:
            return {"count": 0, "median_us": None, "p99_us": None, "engine_median_us": None}
        p99 = samples[min(len(samples) - 1, int(0.99 * len(samples)))]
        return {
            "count": len(samples),
            "median_us": statistics.median(samples) / 1000,
            "p99_us": p99 / 1000,
            "engine_median_us": statistics.median(self.engine_ns) / 1000,
        }


async def serve(admin_token: str) -> None:
    referee_server, referee_port = await start_server(Referee(admin_token=admin_token))
    raw_server, raw_port = await start_ping_pong_server()
    settle_start_up_heap()  # as `mus referee serve` does
    print(json.dumps({"referee_port": referee_port, "raw_port": raw_port, "pid": os.getpid()}), flush=True)
    profiler: cProfile.Profile | None = None
    act_times = ActTimes()
    try:
        while line := await asyncio.to_thread(sys.stdin.readline):
            command, _, argument = line.strip().partition(" ")
            if command == "profile-start":
                profiler = cProfile.Profile()
                profiler.enable()
                reply = "profiling"
            elif command == "profile-stop" and profiler is not None:
                profiler.disable()
                profiler.dump_stats(argument)
                profiler = None
                reply = f"profile written to {argument}"
            elif command == "act-times-start":
                act_times.start()
                reply = "timing"
            elif command == "act-times-stop":
                reply = json.dumps(act_times.stop())
            elif command == "quit":
                break
            else:
                reply = f"unknown command {line.strip()!r}"
            print(reply, flush=True)
    finally:
        await referee_server.stop(None)
        await raw_server.stop(None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--admin-token", required=True)
    arguments = parser.parse_args()
    run(serve(arguments.admin_token))  # on the loop `mus referee serve` runs on


if __name__ == "__main__":
    main()
