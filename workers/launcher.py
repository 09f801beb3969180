"""Starting hosted bot programs: the one place a bot process is launched (the sandbox will wrap it)."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

EXAMPLE_BOTS = {
    "random": [sys.executable, "-m", "clients.bots.random"],
    "rules": [sys.executable, "-m", "clients.bots.rules"],
    "passive": [sys.executable, "-m", "clients.bots.passive"],
}
"""The example bots by name, each run as its own program like any other bot."""


class LaunchError(Exception):
    """A bot program cannot be started: the message says which and why."""


@dataclass(frozen=True, slots=True)
class BotProgram:
    """A bot as a program: the command to run and the folder to run it in."""

    name: str
    command: tuple[str, ...]
    cwd: Path | None = None


def resolve_program(spec: str) -> BotProgram:
    """An example bot's name, a Python file, or a command line (split like a shell would)."""
    if spec in EXAMPLE_BOTS:
        return BotProgram(spec, tuple(EXAMPLE_BOTS[spec]))
    words = shlex.split(spec)
    if not words:
        raise LaunchError("an empty bot command")
    first = words[0]
    if first.endswith(".py") and Path(first).is_file():
        return BotProgram(Path(first).stem, (sys.executable, *words))
    if shutil.which(first) is None and not Path(first).is_file():
        known = ", ".join(EXAMPLE_BOTS)
        raise LaunchError(f"unknown bot {spec!r}: not an example bot ({known}), a .py file or a program on PATH")
    return BotProgram(Path(first).name, tuple(words))


async def launch_bot(
    program: BotProgram, referee_address: str, seat_token: str, *, log_path: Path | None = None
) -> asyncio.subprocess.Process:
    """Start one seat's bot process, pointed at the referee by `MUS_REFEREE` and `MUS_TOKEN`.

    The bot inherits no standard input; its output goes to `log_path` (or is discarded).
    """
    env = dict(os.environ)
    # Bots run in this environment by default: `python` is the interpreter that has the SDK installed.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["MUS_REFEREE"] = referee_address
    env["MUS_TOKEN"] = seat_token
    env.setdefault("PYTHONUNBUFFERED", "1")
    output = log_path.open("ab") if log_path is not None else None
    try:
        return await asyncio.create_subprocess_exec(
            *program.command,
            cwd=program.cwd,
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=output if output is not None else asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.STDOUT if output is not None else asyncio.subprocess.DEVNULL,
        )
    except OSError as error:
        raise LaunchError(f"cannot start {program.name}: {error.strerror}") from error
    finally:
        if output is not None:
            output.close()
