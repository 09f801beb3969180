"""The `mus` command line: a root app with one sub-app per noun (Typer).

Each noun's module is imported only when that noun is invoked, or when the root's help lists them all: `mus
referee serve` then starts a referee without the database, Celery and league stacks, and `mus rules` starts in a
fraction of the time that importing every command took.
"""

from __future__ import annotations

import importlib
from difflib import get_close_matches
from typing import TYPE_CHECKING, Annotated

import typer
from typer._click.exceptions import UsageError
from typer.core import TyperGroup

from workers.cli.noun import HELP_MARKUP

if TYPE_CHECKING:  # Typer builds its commands on its own copy of click
    from typer._click import Command, Context

NOUNS: dict[str, tuple[str, str]] = {
    "worker": ("workers.cli.worker_cmd", "worker_command"),
    "demo": ("workers.cli.demo_cmd", "demo_command"),
    "rules": ("workers.cli.rules_cmd", "app"),
    "referee": ("workers.cli.referee_cmd", "app"),
    "match": ("workers.cli.match_cmd", "app"),
    "bot": ("workers.cli.bot_cmd", "app"),
    "league": ("workers.cli.league_cmd", "app"),
    "replay": ("workers.cli.replay_cmd", "app"),
    "bench": ("workers.cli.bench_cmd", "app"),
}
"""Each noun of `mus`, in the order of its help: the module that defines it and its Typer app or command."""


class LazyNouns(TyperGroup):
    """The root group: it names the nouns without importing them, and builds a noun's command on first use."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._loaded: dict[str, Command] = {}

    def list_commands(self, ctx: Context) -> list[str]:
        return list(NOUNS)

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if cmd_name not in NOUNS:
            return None
        if cmd_name not in self._loaded:
            module, attribute = NOUNS[cmd_name]
            target = getattr(importlib.import_module(module), attribute)
            if isinstance(target, typer.Typer):
                command: Command = typer.main.get_group(target)
            else:  # a command of its own: a one-command app is that command
                single = typer.Typer(add_completion=False, rich_markup_mode=HELP_MARKUP)
                single.command(cmd_name)(target)
                command = typer.main.get_command(single)
            command.name = cmd_name
            self._loaded[cmd_name] = command
        return self._loaded[cmd_name]

    def resolve_command(self, ctx: Context, args: list[str]) -> tuple[str | None, Command | None, list[str]]:
        """Typer's own, which suggests the commands near a misspelt one from those it holds: the nouns, unloaded."""
        try:
            return super().resolve_command(ctx, args)
        except UsageError as error:
            if args and (near := get_close_matches(args[0], NOUNS)) and "Did you mean" not in error.message:
                error.message = f"{error.message.rstrip('.')}. Did you mean {', '.join(map(repr, near))}?"
            raise


app = typer.Typer(
    name="mus", cls=LazyNouns, no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=HELP_MARKUP
)


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import version

        typer.echo(f"mus-arena {version('mus-arena')}")
        raise typer.Exit()


@app.callback()
def mus(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Mus Arena: a bot league for Mus. Rules engine, referee, leagues."""


if __name__ == "__main__":
    app()
