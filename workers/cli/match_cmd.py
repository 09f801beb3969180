"""`mus match play`: one match between two bot programs over real gRPC on loopback."""

from __future__ import annotations

import asyncio
import json
import shlex
from typing import Annotated, Any

import typer

from referee.engine.errors import MusError
from referee.engine.rules import Rules
from referee.engine.transcript import render_transcript
from workers.cli.errors import fail
from workers.cli.rules_cmd import OptionList, parse_options
from workers.launcher import INSTALL_HINT, LaunchError, Limits, resolve_program, sandbox_available, stdio_program
from workers.matches import PlayedMatch, fault_records, incident_records, play_programs

app = typer.Typer(help="Single matches between bot programs.", no_args_is_help=True)


@app.command(
    "play",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def play_command(
    ctx: typer.Context,
    bot_a: Annotated[str, typer.Argument(help="Team 0: an example bot (random, rules), a .py file or a command.")],
    bot_b: Annotated[str | None, typer.Argument(help="Team 1, the same way; or give its command after `--`.")] = None,
    seed: Annotated[int, typer.Option(help="The match seed.")] = 1,
    option: OptionList = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print only the result, as JSON.")] = False,
    quiet: Annotated[bool, typer.Option(help="Print the result without the transcript.")] = False,
    sandbox: Annotated[
        bool, typer.Option(help="Run each seat in its own sandbox (bubblewrap) where this machine has one.")
    ] = True,
    stdio: Annotated[
        bool,
        typer.Option(
            "--stdio",
            help="BOT_B (the command after `--`) speaks JSON lines on stdin and stdout (docs/stdio.md): it plays "
            "behind the stdio bridge.",
        ),
    ] = False,
) -> None:
    """Play BOT_A (seats 0 and 2) against BOT_B (seats 1 and 3), each seat its own process.

    With `--stdio`, BOT_B is a program that speaks JSON lines on stdin and stdout (docs/stdio.md), run behind the
    stdio bridge: `mus match play random --stdio -- sh mybot.sh`.
    """
    if ctx.args:  # everything after `--` is the second bot's command line
        bot_b = shlex.join([*([bot_b] if bot_b else []), *ctx.args])
    if bot_b is None:
        fail("give two bots: mus match play BOT_A BOT_B (or BOT_A -- COMMAND ...)")
    options = parse_options(option)
    try:
        rules = Rules.from_options(options)
        programs = (resolve_program(bot_a), resolve_program(bot_b))
        if stdio:
            programs = (programs[0], stdio_program(programs[1]))
    except (MusError, LaunchError) as error:
        fail(str(error))
    limits = None
    if sandbox and sandbox_available():
        limits = Limits()
    elif sandbox:
        typer.echo(f"note: the bots run unconfined ({INSTALL_HINT})", err=True)
    try:
        played = asyncio.run(play_programs(programs, rules, seed, sandbox=limits))
    except LaunchError as error:
        fail(str(error))
    result = match_result(played, (programs[0].name, programs[1].name), seed)
    if json_output:
        typer.echo(json.dumps(result))
        return
    if not quiet:
        typer.echo(render_transcript(played.match.events), nl=False)
    typer.echo(describe_result(result))
    if result["faults"] or result["incidents"]:
        typer.echo(f"bot output: {played.logs[0].parent}")


def match_result(played: PlayedMatch, names: tuple[str, str], seed: int) -> dict[str, Any]:
    """The result as JSON: winner, termination, per game and per vaca, faults and incidents with their causes."""
    outcome = played.match.outcome
    assert outcome is not None
    table = played.table
    faults = [{**fault, "bot": names[fault["seat"] % 2]} for fault in fault_records(played.match)]
    incidents = [{**incident, "bot": names[incident["seat"] % 2]} for incident in incident_records(table.incidents)]
    return {
        "seed": seed,
        "teams": {"0": names[0], "1": names[1]},
        "winner": names[outcome.winner],
        "winner_team": outcome.winner,
        "termination": outcome.termination.value,
        "vacas": list(outcome.vacas),
        "games": [
            {
                "vaca": game.vaca,
                "game": game.game,
                "winner_team": game.winner,
                "score": list(game.score),
                "termination": game.termination.value,
                "hand": game.hand_number,
            }
            for game in outcome.games
        ],
        "faults": faults,
        "incidents": incidents,
        "decision_seconds_median": [
            sorted(state.decision_seconds)[len(state.decision_seconds) // 2] if state.decision_seconds else None
            for state in table.seats
        ],
    }


def describe_result(result: dict[str, Any]) -> str:
    games = ", ".join(f"{g['score'][0]}-{g['score'][1]} ({g['termination']})" for g in result["games"])
    lines = [f"Result: {result['winner']} wins ({result['termination']}); games: {games}"]
    for fault in result["faults"]:
        lines.append(f"  fault: seat {fault['seat']} ({fault['bot']}) {fault['cause']}")
    for incident in result["incidents"]:
        lines.append(f"  incident: seat {incident['seat']} ({incident['bot']}) {incident['cause']}")
    return "\n".join(lines)
