"""What every noun of `mus` shares: its Typer app, with help rendered as Markdown.

The commands' help comes from their docstrings, wrapped in the source at 120 columns. Typer's default ("rich")
keeps those line breaks and wraps the lines again to the terminal, so sentences broke in the middle; Markdown joins
a paragraph's lines, and shows `code` as code.
"""

from __future__ import annotations

from typing import Literal

import typer

HELP_MARKUP: Literal["markdown"] = "markdown"


def noun_app(help_text: str) -> typer.Typer:
    """A noun's app (`mus bot`, `mus league`...): `help_text` is its one line in `mus --help`."""
    return typer.Typer(help=help_text, no_args_is_help=True, rich_markup_mode=HELP_MARKUP)
