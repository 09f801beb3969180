"""How the CLI draws its tables: one style for every command."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table


def cli_table(title: str | None = None, **options: Any) -> Table:
    """A table without rules between its columns (a rule and its padding cost three characters a column): a
    newcomer's 80-column terminal shows the standings and the league list whole, headers and all, instead of
    cutting every column to a few letters."""
    return Table(title=title, box=box.SIMPLE_HEAD, collapse_padding=True, **options)
