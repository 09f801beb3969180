"""`mus rules ...`: evaluate rule vectors and play seeded self-play matches."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from referee.engine.errors import MusError
from referee.engine.replay import match_record
from referee.engine.rules import Rules, parse_option_assignment
from referee.engine.selfplay import play_random_match
from referee.engine.transcript import render_transcript
from referee.engine.vectors import evaluate_file
from workers.cli.errors import fail
from workers.cli.noun import noun_app

app = noun_app("The rules engine: vectors and self-play.")

OptionList = Annotated[
    list[str] | None,
    typer.Option("--option", "-o", help="A rules option key=value (rules §14); repeatable."),
]


def parse_options(assignments: list[str] | None) -> dict[str, Any]:
    """Read `key=value` options and validate them as a whole; a bad one is a one-line error."""
    options: dict[str, Any] = {}
    try:
        for text in assignments or []:
            key, value = parse_option_assignment(text)
            options[key] = value
        Rules.from_options(options)
    except MusError as error:
        fail(str(error))
    except RecursionError:
        fail("an --option value nests its JSON too deeply to be a rules option")
    return options


@app.command("eval")
def eval_command(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A vectors file: hand_vectors or scoring_scenarios.")],
    option: OptionList = None,
) -> None:
    """Print the engine's own answer to every case of a vectors file, one JSON object per line."""
    base = parse_options(option)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except OSError as error:
        fail(f"cannot read {file}: {error.strerror}")
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        fail(f"{file} is not valid JSON: {error}")
    except RecursionError:
        fail(f"{file} nests its JSON too deeply to be a vectors file")
    if not isinstance(data, dict):
        fail(f"{file} must hold a JSON object with hand_vectors or scoring_scenarios")
    try:
        answers = evaluate_file(data, base)
    except MusError as error:
        fail(f"{file}: {error}")
    for answer in answers:
        typer.echo(json.dumps(answer, ensure_ascii=False))


@app.command("play")
def play_command(
    seed: Annotated[int, typer.Option(help="The match seed: same seed, same match.")] = 1,
    option: OptionList = None,
    seat: Annotated[int | None, typer.Option(help="Print only what this seat saw (0..3).")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the replay record as JSON.")] = False,
) -> None:
    """Play a seeded self-play match of random legal bots and print its transcript hand by hand."""
    rules = Rules.from_options(parse_options(option))
    if seat is not None and not 0 <= seat <= 3:
        fail(f"there is no seat {seat}: seats are 0..3")
    match = play_random_match(rules, seed)
    if json_output:
        typer.echo(json.dumps(match_record(match), ensure_ascii=False))
        return
    typer.echo(f"Seed {seed}; rules: {rules.changed_options() or 'defaults'}")
    typer.echo(render_transcript(match.events if seat is None else match.events_for(seat)), nl=False)
