"""How the CLI reports a domain error: one line on stderr and exit code 1, never a traceback."""

from __future__ import annotations

from typing import NoReturn

import typer


def fail(message: str) -> NoReturn:
    """Print `error: message` on stderr and exit with code 1."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code=1)
