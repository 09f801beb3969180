"""One client process of a `mus bench referee` load level: its share of the table slots, in its own event loop.

Run as `python -m bench.referee_load ADDRESS FIRST_SLOT SLOTS TABLES`, with the admin token in `MUS_ADMIN_TOKEN`.
It prints `ready` once started, then reads one line, `WINDOW_START WINDOW_END`: `time.perf_counter_ns()` values,
which are CLOCK_MONOTONIC on Linux and so the same clock in every process of the run. Slots `FIRST_SLOT` ..
`FIRST_SLOT + SLOTS - 1` of a level of `TABLES` play matches back to back (`bench.referee_clients.play_until`)
until `WINDOW_END`, and it prints one JSON line: its tally (`Tally.to_json`) and its own CPU seconds over the
window.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

import grpc

from bench.referee_clients import Admin, Tally, clock, play_until
from mus.v1 import admin_pb2_grpc


def seed_of(tables: int, slot: int) -> int:
    """The first seed of a slot of a level: slots and levels never share a deal."""
    return 1_000_000 * (tables * 1000 + slot)


async def play_slots(
    address: str, token: str, first_slot: int, slots: int, tables: int, window: tuple[int, int]
) -> dict[str, Any]:
    tally = Tally(window=window)
    cpu: list[float] = []

    async def sample_cpu() -> None:
        for at in window:
            await asyncio.sleep(max(at - clock(), 0) / 1e9)
            cpu.append(time.process_time())

    sampler = asyncio.create_task(sample_cpu())
    async with grpc.aio.insecure_channel(address) as admin_channel:
        admin = Admin(admin_pb2_grpc.TableAdminServiceStub(admin_channel), token)
        await asyncio.gather(
            *(
                play_until(address, admin, window[1], seed_of(tables, slot), tally)
                for slot in range(first_slot, first_slot + slots)
            )
        )
    await sampler
    return {"tally": tally.to_json(), "cpu_s": cpu[1] - cpu[0]}


def main() -> None:
    address, first_slot, slots, tables = sys.argv[1:5]
    print("ready", flush=True)
    window_start, window_end = sys.stdin.readline().split()
    result = asyncio.run(
        play_slots(
            address,
            os.environ["MUS_ADMIN_TOKEN"],
            int(first_slot),
            int(slots),
            int(tables),
            (int(window_start), int(window_end)),
        )
    )
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
