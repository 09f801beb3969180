"""`mus match play`: one match between two bot programs over real gRPC on loopback."""

from __future__ import annotations

import json
import shlex
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer

from referee.engine.errors import MusError
from referee.engine.outcome import GameTermination
from referee.engine.rules import Rules
from referee.engine.seats import team_of
from referee.engine.transcript import render_transcript
from referee.wire import NO_ACTION
from workers.checks import output_tail
from workers.cli.check_cmd import refuse_exposed_folder
from workers.cli.errors import fail, logs_folder, run_to_the_end
from workers.cli.noun import noun_app
from workers.cli.rules_cmd import OptionList, parse_options
from workers.launcher import INSTALL_HINT, LaunchError, Limits, resolve_program, sandbox_available, stdio_program
from workers.matches import PlayedMatch, fault_records, incident_records, play_programs
from workers.play import shown_to_every_seat

app = noun_app("Single matches between bot programs.")

EXIT_FORFEIT = 3
"""The exit status of `mus match play` when the match ended by forfeit (0: it ended normally; 1: bad input or a
match that could not be played)."""


@app.command(
    "play",
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def play_command(
    ctx: typer.Context,
    bot_a: Annotated[
        str, typer.Argument(metavar="BOT_A", help="Team 0: an example bot (random, rules), a .py file or a command.")
    ],
    bot_b: Annotated[
        str | None, typer.Argument(metavar="BOT_B", help="Team 1, the same way; or give its command after `--`.")
    ] = None,
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
    logs: Annotated[
        Path | None,
        typer.Option(
            "--logs",
            help="Keep every seat's output (stdout and stderr) in this folder, one file per seat. Default: a "
            "temporary folder, shown when a fault or an incident happened.",
        ),
    ] = None,
) -> None:
    """Play BOT_A (seats 0 and 2) against BOT_B (seats 1 and 3), each seat its own process.

    Options go before the `--`: everything after it is BOT_B's command line. With `--stdio`, BOT_B is a program
    that speaks JSON lines on stdin and stdout (docs/stdio.md), run behind the stdio bridge:
    `mus match play random --stdio -- sh mybot.sh`.

    Bots are named by the `bot_name` of their Join (else the example bot's or the program's name). Exit status:
    0 when the match ended normally, 3 when it ended by forfeit, 1 on bad input.
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
    for program in programs:
        refuse_exposed_folder(program)
    limits = None
    if sandbox and sandbox_available():
        limits = Limits()
    elif sandbox:
        typer.echo(f"note: the bots run unconfined ({INSTALL_HINT})", err=True)
    if limits is not None and (shown := shown_to_every_seat(existing=True)):
        fail(shown)
    logs = logs_folder(logs)
    try:
        played = run_to_the_end(play_programs(programs, rules, seed, sandbox=limits, log_dir=logs))
    except LaunchError as error:
        fail(str(error))
    result = match_result(played, team_names(played, (programs[0].name, programs[1].name)), seed)
    code = EXIT_FORFEIT if result["termination"] == "forfeit" else 0
    if json_output:
        typer.echo(json.dumps({**result, "exit_status": code}))
        raise typer.Exit(code)
    if not quiet:
        first, second = (result["teams"][str(team)].removesuffix(f" (team {team})") for team in (0, 1))
        typer.echo(f"Team 0 (seats 0, 2): {first}; team 1 (seats 1, 3): {second}")
        typer.echo(render_transcript(played.match.events), nl=False)
    typer.echo(describe_result(result))
    if logs is not None or result["faults"] or result["incidents"]:
        typer.echo(f"bot output: {played.logs[0].parent}")
    for line in explained_by_output(result, played.logs):
        typer.echo(line)
    if code:
        typer.echo(f"exit status {code}: the match ended by forfeit")
    raise typer.Exit(code)


def explained_by_output(result: dict[str, Any], logs: dict[int, Path]) -> list[str]:
    """The last lines of each seat's output whose crash, protocol error, empty Act (an SDK sends one when its bot
    raised) or timeout (the stdio bridge says when a program's answers do not come) its output may explain: a
    newcomer's `-- python nosuch.py` lost by forfeit with no word of why."""
    seats = {entry["seat"] for entry in result["incidents"] if entry["cause"] in ("crash", "protocol_error")}
    seats |= {
        entry["seat"]
        for entry in result["faults"]
        if entry["cause"] == "timeout" or NO_ACTION in (entry.get("detail") or "")
    }
    return [f"seat {seat}: {line}" for seat in sorted(seats) for line in output_tail(logs.get(seat))]


def team_names(played: PlayedMatch, programs: tuple[str, str]) -> tuple[str, str]:
    """Each team's name: the `Join.bot_name` its seats gave (the first seat's that joined), else the program's;
    two alike are told apart by their team ("bot (team 0)"): every `bot.js` joins as "bot", and "bot wins" named
    neither (newcomer walkthrough, stop 34)."""
    joined = played.joined_as
    first, second = (next((name for name in joined[team::2] if name), programs[team]) for team in (0, 1))
    if first == second:
        return f"{first} (team 0)", f"{second} (team 1)"
    return first, second


def match_result(played: PlayedMatch, names: tuple[str, str], seed: int) -> dict[str, Any]:
    """The result as JSON: winner, termination, per game and per vaca, faults and incidents with their causes."""
    outcome = played.match.outcome
    assert outcome is not None
    faults = [{**fault, "bot": names[team_of(fault["seat"])]} for fault in fault_records(played.match)]
    incidents = [
        {**incident, "bot": names[team_of(incident["seat"])]} for incident in incident_records(played.incidents)
    ]
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
        "logs": [str(path) for path in played.logs.values()],
        "decision_seconds_median": [
            sorted(seconds)[len(seconds) // 2] if seconds else None for seconds in played.decision_seconds
        ],
    }


def _game_winner(result: dict[str, Any], game: dict[str, Any]) -> str:
    team = game["winner_team"]
    return "unfinished" if team is None else f"{result['teams'][str(team)]}"


def _game_text(result: dict[str, Any], game: dict[str, Any]) -> str:
    """A game's winner and score, the winner's points first. An órdago ends a game at the score it stood at, often
    the loser's lead or 0-0: that game reads "by órdago (at 16-20)", not as a score the winner made (newcomer
    walkthroughs, stops 33, 34); "random 14-54", the team order, read as random's 14 (helper-62)."""
    first, second = game["score"]
    score = f"{second}-{first}" if game["winner_team"] == 1 else f"{first}-{second}"
    if game["termination"] == GameTermination.ORDAGO.value:
        return f"{_game_winner(result, game)} by órdago (at {score})"
    return f"{_game_winner(result, game)} {score} ({game['termination']})"


def describe_result(result: dict[str, Any]) -> str:
    """The result line, a summary of faults and incidents per team and cause, then each of them in order."""
    games = ", ".join(_game_text(result, game) for game in result["games"])
    lines = [f"Result: {result['winner']} wins ({result['termination']}); games: {games}"]
    for kind in ("faults", "incidents"):
        teams = []
        for team in (0, 1):
            causes = Counter(entry["cause"] for entry in result[kind] if team_of(entry["seat"]) == team)
            counted = ", ".join(f"{cause} {count}" for cause, count in sorted(causes.items()))
            name = result["teams"][str(team)]
            label = name if name.endswith(f"(team {team})") else f"{name} (team {team})"
            teams.append(f"{label} {sum(causes.values())}" + (f": {counted}" if counted else ""))
        lines.append(f"{kind.capitalize()}: " + "; ".join(teams))
    for fault in result["faults"]:
        detail = f": {fault['detail']}" if fault.get("detail") else ""
        lines.append(f"  fault: seat {fault['seat']} ({fault['bot']}) {fault['cause']}{detail}")
    for incident in result["incidents"]:
        detail = f": {incident['detail']}" if incident["detail"] else ""
        lines.append(f"  incident: seat {incident['seat']} ({incident['bot']}) {incident['cause']}{detail}")
    return "\n".join(lines)
