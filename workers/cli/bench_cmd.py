"""`mus bench ...`: benchmarks, a table by default and one JSON object with --json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from workers.cli.noun import noun_app
from workers.cli.tables import print_table

app = noun_app("Benchmarks (not timed tests): engine speed, referee round trip and load.")

JsonFlag = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of a table.")]


def print_result(title: str, result: dict[str, Any], json_output: bool) -> None:
    """Print a benchmark result as a two-column table, or as JSON."""
    if json_output:
        typer.echo(json.dumps(result))
        return
    table = Table(title=title)
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key, value in result.items():
        table.add_row(key, f"{value:,.2f}" if isinstance(value, float) else str(value))
    print_table(table)


@app.command("engine")
def engine_command(
    matches: Annotated[int, typer.Option(min=1, help="Random matches to play.")] = 300,
    json_output: JsonFlag = False,
) -> None:
    """Decisions and matches per second of random legal play, and lance comparisons per second."""
    from bench import engine

    print_result("mus bench engine", engine.run(matches=matches), json_output)


@app.command("referee")
def referee_command(
    quick: Annotated[bool, typer.Option("--quick", help="A short run (a smoke test), not a measurement.")] = False,
    profile: Annotated[
        Path | None, typer.Option(help="Profile the referee's process with cProfile during the load levels.")
    ] = None,
    flood: Annotated[
        bool,
        typer.Option(
            "--flood",
            help="Instead: honest tables' decision latency and the referee's memory, before and during a flood "
            "by one table of the worst messages the limits allow.",
        ),
    ] = False,
    tables: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=1000,
            help="Concurrent tables of instant bots: the one load level to run (default 1, 4, 16 and 100), with "
            "the decision latency (p50, p99) and the referee's memory; with --flood, the honest tables (default 16; "
            "4 with --quick).",
        ),
    ] = None,
    json_output: JsonFlag = False,
) -> None:
    """The referee's decision round trip against a raw gRPC ping-pong, and decisions per second under load."""
    from bench import referee

    result = referee.run(quick=quick, profile=profile, flood=flood, tables=tables)
    rows = referee.flood_rows(result) if flood else referee.table_rows(result)
    print_result("mus bench referee", result if json_output else rows, json_output)


@app.command("league")
def league_command(
    quick: Annotated[bool, typer.Option("--quick", help="A short run (a smoke test), not a measurement.")] = False,
    broker: Annotated[
        list[str] | None,
        typer.Option("--broker", help="Only this broker: embedded or redis; repeatable (default: both)."),
    ] = None,
    repeats: Annotated[
        int | None, typer.Option(min=1, help="Rounds of every configuration (medians; default 3).")
    ] = None,
    matches_per_pairing: Annotated[
        int | None, typer.Option(min=2, help="Matches per pairing of the six entrants (even; default 4: 60 matches).")
    ] = None,
    option: Annotated[
        list[str] | None, typer.Option("--option", "-o", help="A rules option key=value; repeatable.")
    ] = None,
    redis: Annotated[
        str | None, typer.Option(help="Redis for the distributed runs (default redis://127.0.0.1:6379/<random db>).")
    ] = None,
    bot: Annotated[
        str,
        typer.Option(
            help="The entrants' program: instant (the benchmark), cpp (the C++ example bot) or random (the SDK bot)."
        ),
    ] = "instant",
    think_ms: Annotated[
        float | None, typer.Option(min=0, help="The instant bot waits this long before each answer (default 0).")
    ] = None,
    pin: Annotated[
        bool,
        typer.Option(help="Pin each worker, with its referee and its bots, to a core of its own (when enough cores)."),
    ] = True,
    pool: Annotated[
        bool,
        typer.Option(
            help="Add the entrants as persistent bots (`mus bot add --persistent`): each worker keeps their "
            "processes alive across matches (docs/pool.md)."
        ),
    ] = False,
    json_output: JsonFlag = False,
) -> None:
    """Matches per second of a six-bot duplicate round robin of instant bots: 1 and 2 workers, embedded and Redis."""
    from bench import league
    from workers.cli.errors import fail
    from workers.cli.rules_cmd import parse_options

    unknown = sorted(set(broker or ()) - set(league.BROKERS))
    if unknown:
        fail(f"unknown broker {', '.join(unknown)}: use {' or '.join(league.BROKERS)}")
    if bot not in league.BOTS:
        fail(f"unknown bot {bot}: use {' or '.join(league.BOTS)}")
    problem = league.prepare(bot)
    if problem:
        fail(problem)
    if matches_per_pairing is not None and matches_per_pairing % 2:
        fail("--matches-per-pairing must be even (duplicate pairs)")
    settings = league.with_overrides(
        quick,
        repeats=repeats,
        matches_per_pairing=matches_per_pairing,
        brokers=broker,
        options=parse_options(option),
        redis=redis,
        bot=bot,
        think_ms=think_ms,
        pin=pin,
        pool=pool,
    )
    result = league.run(settings, quick=quick)
    print_result("mus bench league", result if json_output else league.table_rows(result), json_output)
