"""`mus referee serve`: the standalone referee service."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from pathlib import Path
from typing import Annotated

import typer

from referee.service.lobby import StateError
from referee.service.loop import run
from referee.service.server import settle_start_up_heap, start_admin_server, start_server
from referee.service.servicer import Referee
from workers.cli.errors import fail
from workers.cli.noun import noun_app

app = noun_app("The gRPC referee service.")


ADMIN_TOKEN_VARIABLE = "MUS_ADMIN_TOKEN"
STATE_VARIABLE = "MUS_REFEREE_STATE"


def read_admin_token(path: Path | None) -> str | None:
    """The admin token from `path` (its first line, trimmed) or MUS_ADMIN_TOKEN, never from the command line,
    which `ps` shows to every user of the machine; None when neither is given (one is generated)."""
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            fail(f"cannot read the admin token file {path}: {error.__class__.__name__}")
        lines = text.strip().splitlines()
        token = lines[0].strip() if lines else ""
        if len(token) < 16:
            fail(f"the admin token file {path} must hold a token of at least 16 characters on its first line")
        return token
    return os.environ.get(ADMIN_TOKEN_VARIABLE) or None


@app.command("serve")
def serve_command(
    address: Annotated[str, typer.Option(help="host:port to listen on.")] = "127.0.0.1:50051",
    admin_token_file: Annotated[
        Path | None,
        typer.Option(
            help="A file whose first line is the token for the TableAdmin API and the omniscient Watch. "
            f"Default: ${ADMIN_TOKEN_VARIABLE}, else one is generated and printed.",
        ),
    ] = None,
    reconnect_grace_s: Annotated[float, typer.Option(help="How long a dropped seat may take to rejoin.")] = 5.0,
    public_address: Annotated[
        str | None,
        typer.Option(help="host:port remote bots are told to join (default: the listening address)."),
    ] = None,
    state: Annotated[
        Path | None,
        typer.Option(
            envvar=STATE_VARIABLE,
            help="A JSON file that keeps the remote bots' registrations (names and token SHA-256s, never tokens) "
            "across restarts: written (mode 0600, atomically) on every registration and revocation, read at start. "
            "Default: none, registrations live until the referee stops.",
        ),
    ] = None,
    admin_address: Annotated[
        str | None,
        typer.Option(
            help="host:port of a second server for the TableAdmin API alone, with its own call slots, which no "
            "bot can fill; keep it private and point the workers' MUS_REFEREE_ADMIN_ADDRESS at it.",
        ),
    ] = None,
) -> None:
    """Serve Play, Lobby, Watch and TableAdmin (plus health and reflection) until interrupted."""
    admin_token = read_admin_token(admin_token_file)
    try:
        referee = Referee(admin_token, reconnect_grace_s=reconnect_grace_s, state_path=state)
    except StateError as error:
        fail(str(error))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    run(_serve(referee, address, admin_token is None, public_address, admin_address))


async def _serve(
    referee: Referee, address: str, show_token: bool, public_address: str | None, admin_address: str | None
) -> None:
    servers = []
    try:
        server, port = await start_server(referee, address, public_address)
        servers.append(server)
        if admin_address is not None:
            admin_server, admin_port = await start_admin_server(referee, admin_address)
            servers.append(admin_server)
    except (OSError, RuntimeError) as error:
        for started in servers:
            await started.stop(grace=None)
        where = address if len(servers) == 0 else admin_address
        typer.echo(f"error: cannot listen on {where}: {error}", err=True)
        raise typer.Exit(1) from None
    settle_start_up_heap()
    host = address.rsplit(":", 1)[0]
    typer.echo(f"referee listening on {host}:{port}")
    if admin_address is not None:
        typer.echo(f"admin API listening on {admin_address.rsplit(':', 1)[0]}:{admin_port}")
    if show_token:
        typer.echo(f"admin token: {referee.admin_token}")
    state = referee.lobby.state_path
    if state is not None:
        bots = len(referee.lobby.registered())
        typer.echo(f"remote bots: {bots} registered, kept in {state}")
    else:
        typer.echo(f"remote bots: registrations are not kept across restarts (--state FILE or ${STATE_VARIABLE})")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    typer.echo("stopping: live tables are cancelled")
    for table in list(referee.tables.values()):
        table.cancel("the referee is shutting down")
    for started in servers:
        await started.stop(grace=2.0)
