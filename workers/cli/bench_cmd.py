"""`mus bench ...`: benchmarks, a table by default and one JSON object with --json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(help="Benchmarks (not timed tests): engine speed, referee round trip and load.", no_args_is_help=True)

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
    Console().print(table)


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
    json_output: JsonFlag = False,
) -> None:
    """The referee's decision round trip against a raw gRPC ping-pong, and decisions per second under load."""
    from bench import referee

    result = referee.run(quick=quick, profile=profile)
    print_result("mus bench referee", result if json_output else referee.table_rows(result), json_output)
