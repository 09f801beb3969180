"""How the CLI draws and prints its tables: one style for every command."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table


def cli_table(title: str | None = None, **options: Any) -> Table:
    """A table without rules between its columns (a rule and its padding cost three characters a column): a
    newcomer's 80-column terminal shows the standings and the league list whole, headers and all, instead of
    cutting every column to a few letters."""
    return Table(title=title, box=box.SIMPLE_HEAD, collapse_padding=True, **options)


MAX_PIPED_WIDTH = 1000
"""The widest a piped table is printed (a cell's text wraps past it)."""


def print_table(table: Table) -> None:
    """Print `table` whole: in a terminal at the terminal's width; piped (to a file, `grep`, `less`), as wide as
    the table needs. Rich assumes 80 columns when it writes to no terminal, which cut a newcomer's piped standings
    headers (`inciden…`) and wrapped the dates of `mus bot list`."""
    console = Console()
    if not console.is_terminal:
        needed = console.measure(table, options=console.options.update_width(MAX_PIPED_WIDTH)).maximum
        console = Console(width=max(80, needed))
    console.print(table)
