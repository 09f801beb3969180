"""`python -m clients.stdio [--name NAME] -- COMMAND ...`: play one seat (MUS_REFEREE, MUS_TOKEN) with a program
that speaks the line protocol of docs/stdio.md on its stdin and stdout; with MUS_SEATS=stdin, every seat given
on standard input (docs/pool.md)."""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Sequence

from clients.sdk.runner import ENV_SEATS
from clients.stdio.bridge import run, run_seats


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clients.stdio", description=__doc__.splitlines()[0])
    parser.add_argument("--name", help="the bot's name for the referee (default: the program's file name)")
    parser.add_argument("--bot-version", default="0", help="the bot's version for the referee")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="after `--`: the program and its arguments")
    args = parser.parse_args(argv)
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        parser.error("give the program after `--`: python -m clients.stdio -- sh mybot.sh")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s stdio-bridge %(levelname)s %(message)s")
    if os.environ.get(ENV_SEATS) == "stdin":
        return run_seats(command, name=args.name, version=args.bot_version)
    return run(command, name=args.name, version=args.bot_version)


if __name__ == "__main__":
    raise SystemExit(main())
