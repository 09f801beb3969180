"""The event loop the referee runs on: uvloop's where it is installed (every platform but Windows), else asyncio's.

Between two decisions a referee wakes tasks, hands messages from one stream to another and polls its sockets:
the event loop's own work, which uvloop does in C (libuv) where asyncio's loop does it in Python. Side by side on 2
cores, six runs each (docs/pool.md, "What a pooled match costs"): the referee's CPU a decision under load less in
five runs of six (the runs' ratios' median 6% less), a pooled league's referee CPU a match less in six of seven.
The round trip's latency moved within this machine's noise. Everything the referee does runs on either loop: a
table reads the time from `time.monotonic` (`table.LoopClock`), not from uvloop's clock, which is read once a turn
of the loop, to the millisecond; and a seat's process is started by `subprocess.Popen`, not through the loop
(`launcher._Child`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

_Result = TypeVar("_Result")


def new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # Windows: uvloop is not installed there
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run(main: Coroutine[Any, Any, _Result]) -> _Result:
    """`asyncio.run(main)` on `new_event_loop()`."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)
