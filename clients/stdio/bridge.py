"""The stdio bridge: a program that speaks JSON lines on stdin and stdout plays one seat over gRPC.

The bridge is an SDK `Bot` (`StdioBot`) run by `clients.sdk.runner.run_bot`, so the gRPC side is the SDK's own:
batched join, decision ids echoed, a rejected action asked again, a dropped stream joined again with `next_seq`.
Each `decide` writes one `request` line and reads one answer line (lockstep: the bridge never writes a request
before the answer to the previous one), `on_event` writes `event` lines, `on_outcome` the `outcome` line; then
the program's stdin closes. The program's stderr is the bridge's (the seat's log). When the program exits
before the outcome, the bridge exits at once with a non-zero status: the seat has crashed. See docs/stdio.md.

With MUS_SEATS=stdin (a persistent bot, docs/pool.md) the bridge plays seat after seat given on its own standard
input (`run_seats`): the bridge, its interpreter and gRPC live across matches, and the program is started for
each seat, since the line protocol is one match per program.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

from clients.sdk.bot import Bot
from clients.sdk.errors import NoAction, SdkError
from clients.sdk.runner import ENV_FRAMES, ENV_REFEREE, ENV_SEATS, ENV_TOKEN, SeatOffer, run_bot
from clients.sdk.view import BotView
from clients.stdio.lines import (
    MAX_LINE_BYTES,
    AnswerError,
    action_from_json,
    answer_number,
    dump,
    event_json,
    hello_json,
    outcome_json,
    rejected_json,
    request_json,
)
from referee.engine.actions import Action
from referee.engine.events import Event
from referee.engine.outcome import MatchOutcome

logger = logging.getLogger(__name__)

EXIT_WAIT_S = 5.0
"""How long the program may take to exit once its stdin is closed after the outcome, before it is killed."""

SILENT_WARN_S = 2.0
"""How long the bridge waits for an answer line before it says, once a seat, that none has come: a program that
does not flush its stdout (C's stdio buffers a pipe) answers into its buffer, and its seat only timed out, with no
word of why (a newcomer's C bot). Sooner where half the decision's time left (its own and the bank's) is less,
but never before SILENT_MIN_S."""

SILENT_MIN_S = 0.5
"""The soonest the bridge says no answer has come: a retry past the decision's own time was told 0 s left."""


def exit_status(returncode: int) -> int:
    """The bridge's exit status for a program that ended early: never 0 (it is a crash); a signal's death as a
    shell reports it (128 + the signal), so the worker still names a limit's signal (SIGXCPU: the CPU limit)."""
    if returncode < 0:
        return 128 - returncode
    return returncode or 1


class ProgramExited(Exception):
    """The program closed its stdout or stdin before the match ended."""


class StdioBot(Bot):
    """One seat played by a child program over the line protocol; `decide` blocks on the program's answer."""

    def __init__(self, process: subprocess.Popen[bytes], *, name: str, version: str = "0") -> None:
        self.name = name
        self.version = version
        self.process = process
        self.seat: int | None = None
        self.number = 0
        self.attempt = 0
        self.last_answer: str | None = None
        self.unreadable: str | None = None
        self.outcome_sent = threading.Event()
        self.warned_silent = False
        self._write_lock = threading.Lock()

    # ------------------------------------------------------------------ the Bot

    def decide(self, view: BotView) -> Action:
        self.seat = view.seat
        reason = view.rejection
        if reason is None:
            self.number += 1
            self.attempt = 1
        else:
            self.attempt += 1
            if self.unreadable is not None:
                reason = f"the bridge could not read your answer: {self.unreadable} (the referee: {reason})"
            self.write(rejected_json(reason, answer=self.last_answer, number=self.number))
        self.unreadable = None
        self.write(request_json(view, number=self.number, attempt=self.attempt, rejection=reason))
        left_s = view.decision_time_left_s + view.bank_time_left_s  # a retry past the decision's time: the bank's
        answer = self._read_answer_or_warn(max(SILENT_MIN_S, min(SILENT_WARN_S, left_s / 2)))
        while (echoed := answer_number(answer)) is not None and echoed != self.number:
            logger.warning("dropped an answer to request %d while request %d is open: %s", echoed, self.number, answer)
            answer = self.read_answer()
        self.last_answer = answer
        try:
            return action_from_json(answer)
        except AnswerError as error:
            # Sent as no action at all: the referee rejects it as illegal (a fault) and, under the retry policy,
            # asks again, when the program is told why in a `rejected` line.
            self.unreadable = str(error)
            logger.error(
                "request %d: cannot read your answer %s: %s. Only answers go to stdout, one JSON line each; log to"
                " stderr",
                self.number,
                json.dumps(answer[:200]),
                error,
            )
            raise NoAction(f"unreadable answer: {error}") from None

    def _read_answer_or_warn(self, after_s: float) -> str:
        """`read_answer`, saying in the seat's log if no line has come after `after_s` (once a seat)."""
        if self.warned_silent:
            return self.read_answer()
        number = self.number

        def warn() -> None:
            self.warned_silent = True
            logger.warning(
                "request %d: no answer line from your program after %.1f s. If it has answered, its stdout is not"
                " flushed: flush after each line (docs/stdio.md)",
                number,
                after_s,
            )

        timer = threading.Timer(after_s, warn)
        timer.daemon = True
        timer.start()
        try:
            return self.read_answer()
        finally:
            timer.cancel()

    def on_event(self, event: Event) -> None:
        self.write(event_json(event))

    def on_outcome(self, outcome: MatchOutcome) -> None:
        self.outcome_sent.set()  # first: a program may exit as soon as it has read the line
        self.write(outcome_json(outcome, self.seat))

    # ------------------------------------------------------------------ the pipes

    def write(self, line: dict[str, Any]) -> None:
        """One line to the program; a program that closed its stdin has ended (or will: it is a crash)."""
        stdin = self.process.stdin
        assert stdin is not None
        with self._write_lock:
            try:
                stdin.write(dump(line))
                stdin.flush()
            except (BrokenPipeError, ValueError):
                crash(self.process, "the program closed its standard input")

    def read_answer(self) -> str:
        """The next non-blank line of the program's stdout, as text; a line longer than MAX_LINE_BYTES is read
        to its end and answered as unreadable."""
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            line = stdout.readline(MAX_LINE_BYTES + 1)
            if not line:
                crash(self.process, "the program closed its standard output")
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                while (rest := stdout.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                    pass
                return f'{{"error":"an answer line longer than {MAX_LINE_BYTES} bytes"}}'
            text = line.decode("utf-8", errors="replace").strip()
            if text:
                return text


def crash(process: subprocess.Popen[bytes], why: str) -> NoReturn:
    """End the bridge because the program is gone: its exit status if it exited, else kill it first."""
    try:
        code = process.wait(timeout=EXIT_WAIT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        code = process.wait()
    logger.error(
        "%s before the match ended (exit status %d): the seat has crashed (the bridge exits with %d)",
        why,
        code,
        exit_status(code),
    )
    _exit(exit_status(code))


def _exit(status: int) -> NoReturn:
    """Leave now, from any thread: the gRPC stream and its threads end with the process."""
    logging.shutdown()
    sys.stderr.flush()
    os._exit(status)


def _watch(process: subprocess.Popen[bytes], bot: StdioBot) -> None:
    """A program that exits while the bridge waits for the referee has crashed: the bridge exits too."""
    code = process.wait()
    if not bot.outcome_sent.is_set():
        logger.error(
            "the program exited with status %d before the match ended: the seat has crashed (the bridge exits with %d,"
            " the status the referee reports)",
            code,
            exit_status(code),
        )
        _exit(exit_status(code))


def default_name(command: Sequence[str]) -> str:
    """The bot's name when none is given: the stem of the first file the command names (`sh bot.sh`: bot), else
    the program's own name."""
    for word in command[1:]:
        try:
            if Path(word).is_file():
                return Path(word).stem
        except OSError:  # a word that cannot be a path (a long script), not a file
            continue
    return Path(command[0]).stem


def start(command: Sequence[str]) -> subprocess.Popen[bytes]:
    """Start the program with pipes for stdin and stdout and the bridge's stderr. It gets the bridge's
    environment without the seat token and the referee's addresses: it speaks to the bridge only."""
    hidden = (ENV_TOKEN, ENV_REFEREE, ENV_FRAMES, ENV_SEATS)
    environment = {key: value for key, value in os.environ.items() if key not in hidden}
    try:
        return subprocess.Popen(list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment)
    except OSError as error:
        raise SdkError(f"cannot start {command[0]}: {error.strerror or error}") from None


def run(
    command: Sequence[str],
    *,
    name: str | None = None,
    version: str = "0",
    referee: str | None = None,
    token: str | None = None,
    frames: str | None = None,
) -> int:
    """Play the seat at `referee` with `token` (default: MUS_REFEREE and MUS_TOKEN) with the program `command`;
    the exit status. `frames`: a seat line's frames address, where the seat is played instead (docs/pool.md)."""
    try:
        process = start(command)
    except SdkError as error:
        logger.error("%s", error)
        return 1
    bot = StdioBot(process, name=name or default_name(command), version=version)
    bot.write(hello_json(bot.name))
    threading.Thread(target=_watch, args=(process, bot), name="mus-stdio-watch", daemon=True).start()
    try:
        outcome = run_bot(bot, referee, token, frames=frames)
    except SdkError as error:
        logger.error("%s", error)
        process.kill()
        return 1
    finish(process, bot.process.stdin)
    logger.info("match over: team %d won (%s)", outcome.winner, outcome.termination.value)
    return 0


def run_seats(
    command: Sequence[str], *, name: str | None = None, version: str = "0", lines: Iterable[str] | None = None
) -> int:
    """MUS_SEATS=stdin: play every seat given on `lines` (standard input by default), one JSON line each
    (`{"referee": ADDRESS, "seat_token": TOKEN}`, played over frames when it names them), one after another, each
    with a fresh run of `command`; 0 at the end of the input. A seat that cannot be played is logged and the next
    line is read; a program that crashes during its seat ends the bridge (as in `run`: the seat's process has
    crashed)."""
    played = 0
    for line in lines if lines is not None else sys.stdin:
        if not line.strip():
            continue
        try:
            offer = SeatOffer.from_line(line)
        except SdkError as error:
            logger.error("%s", error)
            continue
        address, token, frames = offer.referee, offer.seat_token, offer.frames
        if run(command, name=name, version=version, referee=address, token=token, frames=frames) == 0:
            played += 1
    logger.info("end of input after %d seat(s)", played)
    return 0


def finish(process: subprocess.Popen[bytes], stdin: IO[bytes] | None) -> None:
    """Close the program's stdin (the outcome was its last line) and give it EXIT_WAIT_S to exit."""
    if stdin is not None:
        with contextlib.suppress(BrokenPipeError):
            stdin.close()
    try:
        code = process.wait(timeout=EXIT_WAIT_S)
    except subprocess.TimeoutExpired:
        logger.warning("the program did not exit within %g s of the outcome: killed", EXIT_WAIT_S)
        process.kill()
        process.wait()
        return
    if code != 0:
        logger.warning("the program exited with status %d after the outcome", code)
