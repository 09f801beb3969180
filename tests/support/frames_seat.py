"""A persistent bot given one seat line whose frames socket refuses its token: what the bot logs
(docs/pool.md, "Frames": the trailer frame's status must reach the bot as a gRPC status would)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from referee.service.frames import FrameServer
from referee.service.servicer import Referee


def refused_over_frames(command: Sequence[str], folder: Path) -> str:
    """Run `command` under MUS_SEATS=stdin with one seat line (a stale token, a frames socket in `folder`) and
    return its standard error; it must exit 0 at the end of its input."""

    async def scenario() -> str:
        server = await FrameServer(Referee(), folder / "play.sock").start()
        try:
            line = json.dumps({"referee": "unix:/nowhere", "seat_token": "stale", "frames": f"unix:{server.path}"})
            process = await asyncio.create_subprocess_exec(
                *command, env={**os.environ, "MUS_SEATS": "stdin"}, stdin=subprocess.PIPE, stderr=subprocess.PIPE
            )
            _, errors = await asyncio.wait_for(process.communicate(f"{line}\n".encode()), 30)
            assert process.returncode == 0, errors.decode()
            return errors.decode()
        finally:
            await server.stop()

    return asyncio.run(scenario())
