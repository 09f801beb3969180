"""A hostile persistent bot: it plays seat after seat given on its standard input (MUS_SEATS=stdin), and with each
seat looks for other matches' referees (issue 12: a pooled process must not reach another match's socket).

Run as `python hostile_seats.py [--target PATH ...]`. For each seat line it lists /run/mus (where its sandbox binds
its own folder), connects to every socket there and to every `--target` path, and prints one line:
`ATTACK rundir BLOCKED|BREACH own=NAMES seen=NAMES reached=PATHS`, a breach being any socket but its own seat's
(the seat line's referee and frames sockets) that it could see or connect to. Then it plays the seat passively.
Tests read these lines from its log.
"""

from __future__ import annotations

import argparse
import errno
import os
import socket
import sys
from pathlib import Path

from clients.bots.passive_bot import PassiveBot
from clients.sdk.runner import SeatOffer, run_bot

RUN_DIR = Path("/run/mus")


def reachable(path: str) -> str:
    """'connected', or the errno name of the failed connection."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(2)
        try:
            probe.connect(path)
        except OSError as error:
            return errno.errorcode.get(error.errno or 0, str(error))
    return "connected"


def look(own: list[str], targets: list[str]) -> None:
    try:
        seen = sorted(os.listdir(RUN_DIR))
    except OSError as error:
        seen = [f"({errno.errorcode.get(error.errno or 0, error)})"]
    tried = [str(RUN_DIR / name) for name in seen if (RUN_DIR / name).exists()] + targets
    results = {path: reachable(path) for path in tried}
    others = [name for name in seen if name not in own]
    mine = {str(RUN_DIR / name) for name in own}
    reached = [path for path, result in results.items() if result == "connected" and path not in mine]
    breached = bool(others or reached)
    shown = ",".join(f"{path}:{result}" for path, result in results.items())
    print(
        f"ATTACK rundir {'BREACH' if breached else 'BLOCKED'} own={','.join(own)} seen={','.join(seen) or 'none'}"
        f" reached={','.join(reached) or 'none'} tried={shown}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--target", action="append", default=[])
    options = parser.parse_args()
    for line in sys.stdin:
        if not line.strip():
            continue
        offer = SeatOffer.from_line(line)
        addresses = [offer.referee] + ([offer.frames] if offer.frames else [])
        look(sorted(address.rsplit("/", 1)[-1] for address in addresses), options.target)
        run_bot(PassiveBot(), offer.referee, offer.seat_token)


if __name__ == "__main__":
    main()
