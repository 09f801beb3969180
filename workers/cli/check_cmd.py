"""`mus bot check NAME | -- COMMAND`: the conformance run of workers/checks.py, with a line per check."""

from __future__ import annotations

import json
import shlex
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand

from referee.engine.errors import MusError
from workers.checks import VARIANT_NAMES, CheckConfig, CheckReport, CheckResult, Status, run_check
from workers.cli.db import open_session
from workers.cli.errors import fail, logs_folder, run_to_the_end
from workers.cli.rules_cmd import OptionList, parse_options
from workers.commands import add_command_line, misplaced_options
from workers.db import repo
from workers.launcher import (
    INSTALL_HINT,
    BotProgram,
    LaunchError,
    Limits,
    resolve_program,
    sandbox_available,
    stdio_program,
)
from workers.play import exposed_by, shown_to_every_seat

COMMAND_KEY = "mus.command"
"""Where `DashDashCommand` leaves the words after `--` (`ctx.meta`)."""


class DashDashCommand(TyperCommand):
    """Everything after `--` is the bot's command, word for word: none of it is read as an option of `mus`."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # Typer's own (vendored) click Context
        if "--" in args:
            split = args.index("--")
            ctx.meta[COMMAND_KEY] = args[split + 1 :]
            args = args[:split]
        return super().parse_args(ctx, args)


_MARKS = {Status.PASS: "[green]✓[/green]", Status.FAIL: "[red]✗[/red]", Status.SKIP: "[yellow]-[/yellow]"}


def print_result(console: Console, result: CheckResult) -> None:
    """One line per check (its reason when it failed), then its details, indented."""
    console.print(f"{_MARKS[result.status]} {escape(result.title)}: {escape(result.summary)}", soft_wrap=True)
    for line in result.details:
        console.print(f"    {escape(line)}", soft_wrap=True, highlight=False)


def print_summary(console: Console, report: CheckReport, name: str | None = None) -> None:
    """The last line: passed, or how many checks did not and where the bots' output is. The bot is named by its
    registered name, else its program's; the name it gives itself (Join.bot_name) only beside that: a review's bot
    called itself `random`, and `mus bot check -- python evil.py` said "Passed: random" (stop 44)."""
    failed = [result for result in report.results if result.status is not Status.PASS]
    total = len(report.results)
    calls = report.bot_name if report.bot_name and report.bot_name != (name or report.bot) else ""
    bot = escape(name or report.bot) + (f" (calling itself {escape(calls)})" if calls else "")
    if not failed:
        console.print(f"[green]Passed[/green]: {bot} passed all {total} checks.")
        return
    console.print(
        f"[red]Failed[/red]: {bot} did not pass {len(failed)} of {total} checks. Its seats' output: {report.log_dir}",
        soft_wrap=True,
    )


@contextmanager
def _status(console: Console, enabled: bool) -> Iterator[Any]:
    """A live progress line on a terminal (what is being played now); nothing elsewhere."""
    if enabled and console.is_terminal:
        with console.status("starting") as status:
            yield status
    else:
        yield None


def command_program(command: list[str]) -> BotProgram:
    """A command line as `mus match play` runs it (`resolve_program`): in the folder of the script it names, else
    in the current folder, never one that shows the bot the leagues' files (`refuse_exposed_folder`); one word may
    also name an example bot or a .py file."""
    try:
        program = resolve_program(shlex.join(command))
    except LaunchError as error:
        fail(str(error))
    refuse_exposed_folder(program)
    return program


def refuse_exposed_folder(program: BotProgram) -> None:
    """Refuse a program whose folder, which its sandbox binds, holds this deployment's database, broker folder or
    logs (`exposed_by`), as `mus bot add` and a worker do: a review's bot run from the project's folder read the
    league's seat logs and the broker's messages (stop 44)."""
    if program.cwd is None or (private := exposed_by(Path(program.cwd), existing=True)) is None:
        return
    fail(
        f"the bot would run in {Path(program.cwd).resolve()}, which holds {private}: its sandbox binds that folder,"
        " so the bot could read it. Keep the bot's files in a folder of their own (bots/NAME/) and name its script"
        " (`-- python bots/NAME/bot.py`), or run this from that folder"
    )


def check_registered(name: str, *, json_output: bool | None) -> CheckReport:
    """`mus bot check NAME` with its default settings (what `mus bot add --check` runs)."""
    return check_program(registered_program(name), check_config(), json_output=json_output, name=name)


def check_program(
    program: BotProgram,
    config: CheckConfig,
    *,
    json_output: bool | None,
    name: str | None = None,
    console: Console | None = None,
) -> CheckReport:
    """Run the check and print it as it goes (a line per check) or, with `json_output`, once as JSON; None
    prints nothing (the caller prints the report). `name` is a registered bot's, for the last line."""
    if config.sandbox is not None and (shown := shown_to_every_seat(existing=True)):
        fail(shown)
    console = console or Console(highlight=False)
    quiet = json_output is None
    with _status(console, json_output is False) as status:

        def progress(text: str) -> None:
            if status is not None:
                status.update(escape(text))

        def result(found: CheckResult) -> None:
            if json_output is False:
                print_result(console, found)

        try:
            report = run_to_the_end(run_check(program, config, on_progress=progress, on_result=result))
        except LaunchError as error:
            fail(str(error))
    if json_output:
        typer.echo(json.dumps(report.to_json(), ensure_ascii=False))
        return report
    if not quiet:
        print_summary(console, report, name)
    if report.passed and config.log_dir is None:
        shutil.rmtree(report.log_dir, ignore_errors=True)  # a temp folder nobody will look at: one per check piled up
    return report


def registered_program(name: str) -> BotProgram:
    """A registered bot's current version as a league runs it: its command, in its folder."""
    with open_session(reads=True) as session:
        info = repo.get_bot(session, name)
        version = info.current
        if info.bot.remote:
            fail(f"bot {name!r} is a remote bot: it runs elsewhere; check its program with `mus bot check -- COMMAND`")
        if version is None:
            fail(f"bot {name!r} has no version to check")
        command, folder, content_hash, number = version.command, version.folder, version.content_hash, version.number
        persistent, language = version.persistent, version.language
    try:
        now = repo.content_hash(command, folder)
    except Exception:  # an unreadable folder: the launch says what is wrong with it
        now = content_hash
    if now != content_hash:
        again = add_command_line(name, command, folder, persistent=persistent, language=language)
        typer.echo(
            f"note: {name}'s folder changed since version {number} was added: this checks what is there now"
            f" (`{again}` registers it)",
            err=True,
        )
    return BotProgram(name, tuple(command), Path(folder) if folder else None, persistent=persistent)


def check_config(
    *,
    matches: int = 2,
    seed: int = 1,
    variants: list[str] | None = None,
    decision_timeout: float = 10.0,
    join_timeout: float = 10.0,
    options: list[str] | None = None,
    sandbox: bool = True,
    logs: Path | None = None,
    jobs: int = 2,
) -> CheckConfig:
    """The check's settings from the command line; a bad one is a one-line error."""
    if matches < 1:
        fail("--matches must be at least 1")
    if not 1 <= jobs <= 16:
        fail("--jobs must be 1..16")
    unknown = [name for name in variants or [] if name not in VARIANT_NAMES]
    if unknown:
        fail(f"unknown variant {unknown[0]!r}: the variants are {', '.join(VARIANT_NAMES)}")
    if not 0 < join_timeout <= 600:
        fail("--join-timeout must be in (0, 600] seconds")
    parsed = parse_options(options)
    logs = logs_folder(logs)
    config = CheckConfig(
        matches=matches,
        seed=seed,
        decision_timeout_s=decision_timeout,
        join_timeout_s=join_timeout,
        variants=tuple(variants) if variants else VARIANT_NAMES,
        options=parsed,
        log_dir=logs,
        jobs=jobs,
    )
    try:
        config.rules({}, {})
    except MusError as error:
        fail(str(error))
    limits = None
    if sandbox and sandbox_available():
        limits = Limits()
    elif sandbox:
        typer.echo(f"note: the bot runs unconfined ({INSTALL_HINT})", err=True)
    return replace(config, sandbox=limits)


def check_command(
    ctx: typer.Context,
    name: Annotated[
        str | None,
        typer.Argument(
            metavar="NAME",
            help="A registered bot (its current version); or give none and the bot's command after `--`.",
        ),
    ] = None,
    stdio: Annotated[
        bool,
        typer.Option("--stdio", help="The command speaks the stdio line protocol: run it behind the stdio bridge."),
    ] = False,
    persistent: Annotated[
        bool,
        typer.Option(
            "--persistent",
            help="The command plays seat after seat from one process (MUS_SEATS=stdin, docs/pool.md): check that too.",
        ),
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print only the report, as JSON.")] = False,
    matches: Annotated[int, typer.Option(help="Matches per variant of the rules (the bot plays each side).")] = 2,
    seed: Annotated[int, typer.Option(help="The first match's seed; the others follow it.")] = 1,
    variant: Annotated[
        list[str] | None,
        typer.Option(help=f"Check only these variants (repeatable): {', '.join(VARIANT_NAMES)}. Default: all."),
    ] = None,
    decision_timeout: Annotated[
        float, typer.Option(help="decision_timeout_s: every answer must come within it (no time bank).")
    ] = 10.0,
    join_timeout: Annotated[float, typer.Option(help="Seconds each seat has to join after its launch.")] = 10.0,
    option: OptionList = None,
    sandbox: Annotated[
        bool, typer.Option(help="Run each seat in its own sandbox (bubblewrap) where this machine has one.")
    ] = True,
    logs: Annotated[
        Path | None,
        typer.Option("--logs", help="Keep the output of the bot's seats in this folder (default: a new temp one)."),
    ] = None,
    jobs: Annotated[int, typer.Option(help="Matches played at once, after the first.")] = 2,
) -> None:
    """Check a bot before it enters a league: handshake, legal play under every variant of the rules, the
    deadline, and its answers to ILLEGAL_ACTION, DECISION_CLOSED and a dropped stream (docs/bot-check.md).

    `mus bot check NAME` checks a registered bot as a league runs it; `mus bot check -- COMMAND ...` checks a
    program run in the current folder, like `mus match play`. Options go before the `--`. Exit code 1 when a
    check does not pass.
    """
    command: list[str] = list(ctx.meta.get(COMMAND_KEY, []))
    if name is not None and command:
        fail("give a registered bot's NAME or a command after `--`, not both")
    if name is None and not command:
        fail("give a registered bot's NAME, or its command after `--`: mus bot check -- python mybot.py")
    if note := misplaced_options(command):
        typer.echo(note, err=True)
    config = check_config(
        matches=matches,
        seed=seed,
        variants=variant,
        decision_timeout=decision_timeout,
        join_timeout=join_timeout,
        options=option,
        sandbox=sandbox,
        logs=logs,
        jobs=jobs,
    )
    if name is not None:
        if stdio or persistent:
            fail("a registered bot's command already says how it runs: --stdio and --persistent go with `-- COMMAND`")
        program = registered_program(name)
    else:
        program = command_program(command)
        if stdio:
            program = stdio_program(program)  # the bridge speaks gRPC for it, in the same sandbox
        if persistent:
            program = replace(program, persistent=True)
    report = check_program(program, config, json_output=json_output, name=name)
    if not report.passed:
        raise typer.Exit(code=1)
