"""How the CLI reports a domain error (one line on stderr and exit code 1, never a traceback) and how it ends
when it is told to stop."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn, TypeVar

import typer

from referee.service.loop import run
from workers.logs import LogFolderError, own_log_folder

T = TypeVar("T")


def logs_folder(logs: Path | None) -> Path | None:
    """A command's `--logs` folder, made, or a one-line error (`own_log_folder`: never one through a link)."""
    try:
        return own_log_folder(logs) if logs is not None else None
    except LogFolderError as error:
        fail(str(error))


def fail(message: str) -> NoReturn:
    """Print `error: message` on stderr and exit with code 1."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=1)


EXIT_TERMINATED = 128 + signal.SIGTERM
"""The exit code of a command stopped by SIGTERM, as a shell reports a process killed by it."""


def run_to_the_end(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the referee's event loop (`referee.service.loop`), where SIGTERM (a `kill`, a
    container or CI job stopping) cancels `main` as Ctrl-C does, so its `finally` blocks run (the seats' processes
    stopped, the referee's folders removed) before the command exits with EXIT_TERMINATED. Python's default for
    SIGTERM is to exit at once and run none of them."""

    async def cancelled_by_sigterm() -> T:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        terminated = False

        def on_sigterm() -> None:
            nonlocal terminated
            terminated = True
            task.cancel()

        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
        try:
            return await main
        except asyncio.CancelledError:
            if not terminated:
                raise
            typer.echo("terminated (SIGTERM): stopped and cleaned up", err=True)
            raise typer.Exit(code=EXIT_TERMINATED) from None
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    if threading.current_thread() is not threading.main_thread():
        return run(main)  # signal handlers are the main thread's only
    return run(cancelled_by_sigterm())


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[list[int]]:
    """Within it, SIGTERM (a `kill`, a container or service stopping) interrupts the main thread as Ctrl-C does, so
    the clean-up written for Ctrl-C runs for it too; the list it yields holds the signal that interrupted, once one
    has. Python's default for SIGTERM exits at once: a chaos review's `kill` of `mus league run` left its match
    running and its league open to another run's workers until the next run (stop 39). Only the first signal
    interrupts: one pending beside it (both came during one call into C) would otherwise interrupt the clean-up
    before it could begin (a review)."""
    interrupted: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield interrupted  # signal handlers are the main thread's only
        return

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if interrupted:
            return  # the clean-up under way answers the next ones (`workers.league_run._not_interrupted`)
        interrupted.append(signum)
        raise KeyboardInterrupt

    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    for signum in previous:
        signal.signal(signum, on_signal)
    try:
        yield interrupted
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
