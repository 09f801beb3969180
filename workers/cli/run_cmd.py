"""`mus league run NAME`: play a league's unfinished matches on Celery workers, with a live progress bar."""

from __future__ import annotations

import os
import signal
import time
from typing import Annotated

import kombu.exceptions
import typer
from kombu.utils.url import maybe_sanitize_url
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from sqlalchemy.engine import Engine

from workers.app import broker_dir, is_embedded
from workers.cli.db import domain_errors, one_line
from workers.cli.errors import EXIT_TERMINATED, fail, sigterm_as_ctrl_c
from workers.cli.worker_cmd import check_log_limit
from workers.db import repo
from workers.db.session import ensure_schema, make_engine, session_scope, sqlite_file
from workers.league_run import RunReport, default_worker_count, run_league
from workers.play import shown_to_every_seat


def run_command(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The league to run (or resume).")],
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help=(
                "Embedded worker processes (default: 1, one a core for a --no-sandbox league: one machine plays one"
                " match's bots at a time, docs/pool.md). Ignored with MUS_BROKER_URL."
            ),
        ),
    ] = None,
) -> None:
    """Play every unfinished match of a league; Ctrl-C stops cleanly and running it again resumes (a paused league
    too)."""
    check_log_limit()
    if (path := sqlite_file()) is not None and not path.exists():
        fail(
            f"no league named {name!r}: there is no database at {path} (MUS_DATABASE_URL, default ./mus.db). Run mus"
            " from the folder where you created the league, or set MUS_DATABASE_URL"
        )
    with domain_errors():
        engine = make_engine()
        ensure_schema(engine)
    if (shown := shown_to_every_seat()) and _sandboxed(engine, name):
        fail(f"league {name!r} is sandboxed, and {shown}")
    embedded = is_embedded()
    if workers is not None and not embedded:  # a review's --workers 3 did nothing, and nothing said so
        typer.echo("note: --workers is for the embedded broker; with MUS_BROKER_URL, start `mus worker`s", err=True)
    count = workers
    if embedded and count is None:
        with domain_errors(), session_scope(engine) as session:
            count = default_worker_count(sandboxed=repo.get_league(session, name).sandbox)
    where = f"{count} embedded worker process(es)" if embedded else "the mus workers listening on MUS_BROKER_URL"
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[detail]}"),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    started = time.monotonic()
    first: list[int] = []  # the finished count when the run began
    hinted: list[bool] = []
    progress = Progress(*columns, transient=False)  # shown once the run starts: not for a league with nothing to play
    task = progress.add_task(name, total=None, detail="")

    def start() -> None:
        typer.echo(f"league {name}: playing on {where}")
        progress.start()

    def show(counts: dict[str, int]) -> None:
        detail = f"running {counts.get('running', 0)} · queued {counts.get('queued', 0)}"
        if counts.get("failed"):
            detail += f" · failed {counts['failed']}"
        first[:] = first or [counts["finished"]]
        idle = not counts.get("running") and counts["finished"] == first[0]
        if not embedded and idle and not hinted and time.monotonic() - started > NO_WORKER_HINT_S:
            hinted.append(True)
            progress.console.print(
                f"no worker has taken a match in {NO_WORKER_HINT_S:g} s: is a `mus worker` running on this"
                " MUS_BROKER_URL (and MUS_QUEUE)?"
            )
        progress.update(task, total=counts["total"], completed=counts["finished"], detail=detail)

    interrupted: list[int] = []
    try:
        with domain_errors(), sigterm_as_ctrl_c() as interrupted:
            report = run_league(engine, name, workers=count if embedded else None, on_progress=show, on_start=start)
    except KeyboardInterrupt:  # as the run's workers start, or once its last result is in: nothing to clean up
        terminated = signal.SIGTERM in interrupted
        stopped = "terminated (SIGTERM)" if terminated else "interrupted"
        typer.echo(f"{stopped}: run `mus league run {name}` again to resume or finish it", err=True)
        raise typer.Exit(EXIT_TERMINATED if terminated else 130) from None
    except kombu.exceptions.OperationalError as error:
        shown = maybe_sanitize_url(os.environ.get("MUS_BROKER_URL", ""))
        fail(one_line(f"cannot reach the broker {shown} (MUS_BROKER_URL): {error}"))
    finally:
        if progress.live.is_started:  # stopping one never started prints a blank line
            progress.stop()
    summarize(name, report, embedded=embedded, terminated=signal.SIGTERM in interrupted)


def _sandboxed(engine: Engine, name: str) -> bool:
    """Whether league `name` runs its hosted bots in sandboxes (the others run unconfined, seeing everything)."""
    with domain_errors(), session_scope(engine) as session:
        return repo.get_league(session, name).sandbox


def where_logs(embedded: bool) -> str:
    """Where the logs of the workers that played the league are: this folder's, or their own machines'."""
    if embedded:
        return f"The worker logs are in {broker_dir()}."
    return (
        "The mus workers' output, and their matches' logs (MUS_LOG_DIR, default .mus-logs in the folder each was"
        " started from), are on their machines."
    )


def playing(counts: dict[str, int]) -> str:
    """What a paused league's workers are still playing: they finish the matches in hand (an operator read a
    pause's '1/6 finished' while its second match was still being played)."""
    running = counts.get("running", 0)
    return f", {running} still being played (they finish)" if running else ""


MAX_CAUSES_SHOWN = 3
"""How many distinct failure causes `mus league run` prints when matches failed (the rest: `mus league status`)."""

NO_WORKER_HINT_S = 15.0
"""With MUS_BROKER_URL, how long the progress may show no match taken before it asks whether a worker is running."""


def summarize(name: str, report: RunReport, *, embedded: bool = True, terminated: bool = False) -> None:
    """What the run ends with, and its exit code (`terminated`: it was stopped by SIGTERM, not Ctrl-C)."""
    counts = report.progress
    stopped, code = ("terminated (SIGTERM)", EXIT_TERMINATED) if terminated else ("interrupted", 130)
    if report.cancelled:
        typer.echo(
            f"cancelled: {counts.get('finished', 0)}/{counts.get('total', 0)} matches finished; the league plays no"
            f" more (`mus league standings {name}` counts those)"
        )
        raise typer.Exit(0)
    if report.paused:
        typer.echo(
            f"paused: {counts.get('finished', 0)}/{counts.get('total', 0)} matches finished{playing(counts)}; no"
            f" worker takes a match of {name} until `mus league run {name}` resumes it"
        )
        raise typer.Exit(0)
    if report.interrupted and not embedded:
        typer.echo(
            f"stopped following: {counts.get('finished', 0)}/{counts.get('total', 0)} matches finished; the mus"
            f" workers go on playing what is queued. `mus league run {name}` again follows them to the end and"
            " finishes the league (its secret is published then)"
        )
        raise typer.Exit(code)
    if report.interrupted:
        typer.echo(
            f"{stopped}: {counts.get('finished', 0)}/{counts.get('total', 0)} matches finished; "
            f"run `mus league run {name}` again to resume"
        )
        raise typer.Exit(code)
    if counts.get("failed"):
        shown = list(report.failures.items())[:MAX_CAUSES_SHOWN]
        causes = "".join(f"\n  {count} x {cause}" for cause, count in shown)
        if len(report.failures) > len(shown):
            causes += f"\n  and {len(report.failures) - len(shown)} other cause(s): `mus league status {name}`"
        typer.echo(
            f"{counts['failed']} match(es) failed for reasons outside the bots, charged to no bot:{causes}\n"
            f"Fix the cause, then `mus league run {name}` plays them again; or `mus league cancel {name}` ends the"
            f" league with the matches it has played. {where_logs(embedded)}",
            err=True,
        )
        raise typer.Exit(1)
    typer.echo(f"league {name}: all {counts['total']} matches finished")
