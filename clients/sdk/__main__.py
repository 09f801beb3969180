"""`python -m clients.sdk BOT`: play one seat (MUS_REFEREE, MUS_TOKEN) with any `Bot` subclass.

BOT is `package.module:Class` or `path/to/file.py:Class`; the class is built with no arguments. With
`--remote`, the bot holds a lobby stream instead (MUS_TOKEN is then its bot token) and plays every match it is
offered, up to `--max-matches` at a time.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from clients.sdk.bot import Bot
from clients.sdk.errors import SdkError
from clients.sdk.runner import run_main, run_remote_bot


def load_bot_class(spec: str) -> type[Bot]:
    """The class named by `module:Class` or `file.py:Class`; a clear `SdkError` when it cannot be found."""
    location, _, name = spec.rpartition(":")
    if not location or not name:
        raise SdkError(f"name the bot as module:Class or file.py:Class, not {spec!r}")
    if location.endswith(".py"):
        path = Path(location).resolve()
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        if module_spec is None or module_spec.loader is None or not path.is_file():
            raise SdkError(f"no Python file at {path}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[path.stem] = module
        module_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(location)
    found = getattr(module, name, None)
    if not (isinstance(found, type) and issubclass(found, Bot)):
        raise SdkError(f"{spec} is not a Bot subclass")
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m clients.sdk", description=__doc__.splitlines()[0])
    parser.add_argument("bot", help="module:Class or file.py:Class")
    parser.add_argument("--remote", action="store_true", help="wait for matches on the lobby")
    parser.add_argument("--max-matches", type=int, default=1, help="matches at a time with --remote")
    args = parser.parse_args(argv)
    try:
        factory = load_bot_class(args.bot)
    except SdkError as error:
        print(error, file=sys.stderr)
        return 1
    if not args.remote:
        return run_main(factory())
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        run_remote_bot(factory, max_concurrent_matches=args.max_matches)
    except SdkError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
