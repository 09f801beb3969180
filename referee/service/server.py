"""The referee's gRPC server: Play, Watch, TableAdmin, plus grpc.health.v1 and server reflection; and, when asked,
a second server for the TableAdmin API alone (`start_admin_server`)."""

from __future__ import annotations

import gc
from collections.abc import Sequence

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from mus.v1 import (
    admin_pb2,
    admin_pb2_grpc,
    lobby_pb2,
    lobby_pb2_grpc,
    play_pb2,
    watch_pb2,
    watch_pb2_grpc,
)
from referee.service.quota import StreamQuota
from referee.service.servicer import (
    TRANSPORT_LIMIT_BYTES,
    LobbyServicer,
    PlayServicer,
    Referee,
    TableAdminServicer,
    WatchServicer,
)


def settle_start_up_heap() -> None:
    """Collect once, then freeze what is left (`gc.freeze`): the modules, servers and caches made at start-up live
    as long as the process, and the collector's full passes, which stop the event loop and every table on it, no
    longer walk them. Under 500 tables of instant bots, those passes put the decision latency's p99 at 56-101 ms;
    frozen, 16-21 ms (`mus bench referee --tables 500`). Call it once, after start-up, in a long-lived process."""
    gc.collect()
    gc.freeze()


MAX_CONCURRENT_RPCS = 4096
"""Calls in progress on the whole server; one more is refused with RESOURCE_EXHAUSTED by grpc itself. A busy
referee holds 4 Play streams per table, a lobby stream per remote bot session and its spectators. Streams that
need no token (health Watch, reflection) have a far smaller budget of their own, and so do Play and Lobby streams
that have not sent their first message (both in `quota.StreamQuota`), so no client without a token can fill it."""

MAX_PENDING_RPCS = MAX_CONCURRENT_RPCS
"""New calls grpc's core may hold for the referee before it takes them (`grpc.server.max_pending_requests`; past it
core resets new streams at random, and all of them past twice as many). grpc.aio takes one new call per method at a
time, through the event loop: when hundreds of tables start or rejoin together, their seats' streams wait there for
a moment. At core's default of 1,000 a busy referee reset honest seats' streams at random (the bot saw CANCELLED,
or INTERNAL on its Join's write) and the seat was absent from its table. As many as the server takes at once:
those calls are all it would serve, and what they may hold is capped as above once they are taken."""

MAX_CONCURRENT_ADMIN_RPCS = 256
"""Calls in progress on the admin server (`start_admin_server`): the workers' unary calls, a few per table."""

SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", TRANSPORT_LIMIT_BYTES),
    # Uncompressed messages only (a compressed one is refused, UNIMPLEMENTED, before it is inflated): a review's
    # 1 KB of gzip inflated to a 1 MiB message, past every limit counted in bytes received (stop 44).
    ("grpc.compression_enabled_algorithms_bitset", 1),
    ("grpc.max_send_message_length", 16 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    # Connections: grpc-python has no cap on how many the server accepts (grpc/grpc#12472, still open), so
    # what a connection may hold is capped instead, and a connection that holds nothing is closed soon:
    # Per connection. grpc clients of one process share a connection per target, so one connection may carry
    # a remote bot's 64 matches (2 seats each) and its lobby, or a harness holding a hundred tables' seats.
    ("grpc.max_concurrent_streams", 1000),
    ("grpc.server.max_pending_requests", MAX_PENDING_RPCS),
    ("grpc.server.max_pending_requests_hard_limit", 2 * MAX_PENDING_RPCS),
    ("grpc.max_connection_idle_ms", 60_000),  # no call for a minute: GOAWAY, the connection closes
    ("grpc.server_handshake_timeout_ms", 10_000),  # a connection that never finishes its handshake
    # An old connection is asked to go away (GOAWAY: no new calls on it) after an hour, and closed after six
    # more: a seat whose stream is cut then rejoins with Join.next_seq within its reconnect grace.
    ("grpc.max_connection_age_ms", 3_600_000),
    ("grpc.max_connection_age_grace_ms", 6 * 3_600_000),
]
"""The channel options of the referee's server (the referee benchmark's raw ping-pong server uses them too)."""

ADMIN_SERVICE = admin_pb2.DESCRIPTOR.services_by_name["TableAdminService"].full_name
SERVICE_NAMES = (
    play_pb2.DESCRIPTOR.services_by_name["PlayService"].full_name,
    watch_pb2.DESCRIPTOR.services_by_name["WatchService"].full_name,
    ADMIN_SERVICE,
    lobby_pb2.DESCRIPTOR.services_by_name["LobbyService"].full_name,
)


async def start_server(
    referee: Referee,
    address: str = "127.0.0.1:0",
    public_address: str | None = None,
    also: Sequence[str] = (),
    *,
    admin: bool = True,
    max_connections: int | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Start serving on `address` (port 0 picks a free port); returns the server and its port.

    `public_address` is where remote bots reach this referee (sent in lobby assignments); by default the
    listening host and port. `also`: more addresses to listen on (a worker's pooled seats each get a unix socket
    in their own folder). `admin=False` leaves the TableAdmin API out (a worker's embedded referee: its worker
    calls it in process, `servicer.InProcessAdmin`, and its sockets are the bots'). `max_connections`: how many
    connections the server holds open at once (grpc closes one more as soon as it is accepted); None: no cap.
    """
    capped = [("grpc.max_allowed_incoming_connections", max_connections)] if max_connections is not None else []
    server = grpc.aio.server(
        options=[*SERVER_OPTIONS, *capped],
        maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS,
        interceptors=[StreamQuota()],
    )
    PlayServicer(referee).add_to_server(server)
    watch_pb2_grpc.add_WatchServiceServicer_to_server(WatchServicer(referee), server)
    if admin:
        admin_pb2_grpc.add_TableAdminServiceServicer_to_server(TableAdminServicer(referee), server)
    lobby_pb2_grpc.add_LobbyServiceServicer_to_server(LobbyServicer(referee), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    services = [name for name in SERVICE_NAMES if admin or name != ADMIN_SERVICE]
    reflection.enable_server_reflection((*services, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    for extra in also:
        if server.add_insecure_port(extra) == 0:
            raise OSError(f"cannot listen on {extra}")
    await server.start()
    referee.lobby.referee_address = public_address or f"{address.rsplit(':', 1)[0]}:{port}"
    for name in (*services, ""):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return server, port


async def start_admin_server(referee: Referee, address: str) -> tuple[grpc.aio.Server, int]:
    """Serve the TableAdmin API alone on `address`, with its own call slots; returns the server and its port.

    `mus referee serve --admin-address`: the workers' admin calls (create a table, poll it, fetch its replay) go
    here, where no bot and no unauthenticated client can open a stream, so nothing a seat does on the public
    port (Play, Lobby, Watch, health, reflection) can take the slots they need. Every call is unary and needs
    the admin token. Keep the address private (a loopback or an internal network).
    """
    server = grpc.aio.server(options=SERVER_OPTIONS, maximum_concurrent_rpcs=MAX_CONCURRENT_ADMIN_RPCS)
    admin_pb2_grpc.add_TableAdminServiceServicer_to_server(TableAdminServicer(referee), server)
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"cannot listen on {address}")
    await server.start()
    return server, port
