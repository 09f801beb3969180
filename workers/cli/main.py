"""The `mus` command line: a root app with one sub-app per noun (Typer)."""

from __future__ import annotations

import typer

from workers.cli import bench_cmd, match_cmd, referee_cmd, rules_cmd

app = typer.Typer(
    name="mus",
    help="Mus Arena: a bot league for Mus. Rules engine, referee, leagues.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(rules_cmd.app, name="rules")
app.add_typer(referee_cmd.app, name="referee")
app.add_typer(match_cmd.app, name="match")
app.add_typer(bench_cmd.app, name="bench")


if __name__ == "__main__":
    app()
