"""The `mus` command line: a root app with one sub-app per noun (Typer)."""

from __future__ import annotations

import typer

from workers.cli import (
    bench_cmd,
    bot_cmd,
    check_cmd,
    demo_cmd,
    league_cmd,
    match_cmd,
    referee_cmd,
    replay_cmd,
    rules_cmd,
    run_cmd,
    worker_cmd,
)

app = typer.Typer(
    name="mus",
    help="Mus Arena: a bot league for Mus. Rules engine, referee, leagues.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(rules_cmd.app, name="rules")
app.add_typer(referee_cmd.app, name="referee")
app.add_typer(match_cmd.app, name="match")
bot_cmd.app.command("check", cls=check_cmd.DashDashCommand)(check_cmd.check_command)
app.add_typer(bot_cmd.app, name="bot")
league_cmd.app.command("run")(run_cmd.run_command)
app.add_typer(league_cmd.app, name="league")
app.add_typer(replay_cmd.app, name="replay")
app.command("worker")(worker_cmd.worker_command)
app.command("demo")(demo_cmd.demo_command)
app.add_typer(bench_cmd.app, name="bench")


if __name__ == "__main__":
    app()
