"""`mus referee serve`: the standalone referee service."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from typing import Annotated

import typer

from referee.service.server import start_server
from referee.service.servicer import Referee

app = typer.Typer(help="The gRPC referee service.", no_args_is_help=True)


@app.command("serve")
def serve_command(
    address: Annotated[str, typer.Option(help="host:port to listen on.")] = "127.0.0.1:50051",
    admin_token: Annotated[
        str | None,
        typer.Option(envvar="MUS_ADMIN_TOKEN", help="Token for the TableAdmin API; printed if generated."),
    ] = None,
    reconnect_grace_s: Annotated[float, typer.Option(help="How long a dropped seat may take to rejoin.")] = 5.0,
    public_address: Annotated[
        str | None,
        typer.Option(help="host:port remote bots are told to join (default: the listening address)."),
    ] = None,
) -> None:
    """Serve Play, Lobby, Watch and TableAdmin (plus health and reflection) until interrupted."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(_serve(address, admin_token, reconnect_grace_s, public_address))


async def _serve(address: str, admin_token: str | None, reconnect_grace_s: float, public_address: str | None) -> None:
    referee = Referee(admin_token, reconnect_grace_s=reconnect_grace_s)
    try:
        server, port = await start_server(referee, address, public_address)
    except (OSError, RuntimeError) as error:
        typer.echo(f"error: cannot listen on {address}: {error}", err=True)
        raise typer.Exit(1) from None
    host = address.rsplit(":", 1)[0]
    typer.echo(f"referee listening on {host}:{port}")
    if admin_token is None:
        typer.echo(f"admin token: {referee.admin_token}")
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    typer.echo("stopping: live tables are cancelled")
    for table in list(referee.tables.values()):
        table.cancel("the referee is shutting down")
    await server.stop(grace=2.0)
