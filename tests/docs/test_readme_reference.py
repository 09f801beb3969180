"""The README's command reference ("Every command and its options") names every option of `mus bot`, `mus league`
and `mus replay`: a newcomer found six missing (newcomer walkthrough, stop 33). A line may send the reader to a
page of docs/ instead, which must then name them."""

from __future__ import annotations

import re
from pathlib import Path

import typer
from typer._click import Context
from typer.core import TyperGroup, TyperOption

from workers.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
NOUNS = ("bot", "league", "replay")
OPTION = re.compile(r"--[a-z][a-z-]*")


def _reference() -> list[str]:
    """The reference block's lines, each command with its continuation lines joined to it."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("Every command and its options")
    block = readme[
        readme.index("```text\n", start) + len("```text\n") : readme.index("```", readme.index("```text\n", start) + 3)
    ]
    commands: list[str] = []
    for line in block.splitlines():
        if line.startswith("mus "):
            commands.append(line)
        elif commands:
            commands[-1] += " " + line
    return commands


def _options(noun: str, verb: str) -> list[set[str]]:
    """Each option of `mus NOUN VERB` as its long names (a flag's `--x` and `--no-x`: naming one is enough)."""
    group = typer.main.get_group(app)
    command = group.get_command(Context(group), noun)
    assert isinstance(command, TyperGroup)
    names = [
        {name for name in (*param.opts, *param.secondary_opts) if name.startswith("--")}
        for param in command.commands[verb].params
        if isinstance(param, TyperOption) and not param.hidden
    ]
    return [option for option in names if option and option != {"--help"}]


def test_the_readme_reference_names_every_command_and_option() -> None:
    lines = _reference()
    group = typer.main.get_group(app)
    for noun in NOUNS:
        command = group.get_command(Context(group), noun)
        assert isinstance(command, TyperGroup)
        for verb in command.commands:
            mentions = [line for line in lines if re.search(rf"\bmus {noun} {verb}\b", line)]
            assert mentions, f"`mus {noun} {verb}` is not in the README's reference"
            said = set(OPTION.findall(" ".join(mentions)))
            for page in set(re.findall(r"docs/[a-z-]+\.md", " ".join(mentions))):
                said |= set(OPTION.findall((ROOT / page).read_text()))
            missing = [sorted(option) for option in _options(noun, verb) if not option & said]
            assert not missing, f"`mus {noun} {verb}`: the README's reference leaves out {missing}"
