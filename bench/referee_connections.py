"""Idle connections held on the referee: how many file descriptors they cost it, and for how long.

Run as `python -m bench.referee_connections [--connections N] [--hold-s S]`. It starts the benchmark's server
process (`bench.referee_server`: the referee as deployed, by `start_server`), then opens N TCP connections to the
referee that each send the HTTP/2 client preface and an empty SETTINGS frame, as a gRPC client does, and then
nothing: no call. It prints one JSON line with the referee process's open file descriptors (from /proc) before,
just after the connections are made, and after S seconds of holding them, and how many of the connections the
referee had closed by then. The referee closes a connection that carries no call for `grpc.max_connection_idle_ms`
(referee/service/server.py), so holding longer than that shows whether idle connections are reclaimed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import time
from pathlib import Path
from typing import Any

from bench.referee import ServerProcess

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""The HTTP/2 client preface, then an empty SETTINGS frame: a connection as a gRPC client opens it."""
SETTINGS, PING, GOAWAY, ACK = 0x4, 0x6, 0x7, 0x1


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


class IdlePeer:
    """One idle HTTP/2 client connection that behaves: it acknowledges the server's SETTINGS and answers its
    keepalive PINGs (so keepalive never closes it), and never starts a call."""

    def __init__(self) -> None:
        self.goaway = False
        self.closed = False

    async def hold(self, host: str, port: int, until: float) -> None:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(PREFACE)
        try:
            while True:
                header = await asyncio.wait_for(reader.readexactly(9), max(until - time.monotonic(), 0.001))
                length = int.from_bytes(header[:3], "big")
                kind, flags = header[3], header[4]
                payload = await reader.readexactly(length)
                if kind == SETTINGS and not flags & ACK:
                    writer.write(bytes([0, 0, 0, SETTINGS, ACK, 0, 0, 0, 0]))
                elif kind == PING and not flags & ACK:
                    writer.write(bytes([0, 0, 8, PING, ACK, 0, 0, 0, 0]) + payload)
                elif kind == GOAWAY:
                    self.goaway = True
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed = True
        except TimeoutError:
            pass
        finally:
            writer.close()


async def measure(connections: int, hold_s: float) -> dict[str, Any]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, connections + 256)), hard))
    server = ServerProcess()
    await server.start()
    try:
        host, port = server.referee_address.rsplit(":", 1)
        before = open_fds(server.pid)
        until = time.monotonic() + hold_s
        peers = [IdlePeer() for _ in range(connections)]
        holding = [asyncio.create_task(peer.hold(host, int(port), until)) for peer in peers]
        await asyncio.sleep(2.0)
        held = open_fds(server.pid)
        samples = []
        while time.monotonic() < until - 1.0:
            await asyncio.sleep(5.0)
            samples.append(open_fds(server.pid))
        after = open_fds(server.pid)
        await asyncio.gather(*holding)
    finally:
        await server.stop()
    return {
        "connections": connections,
        "hold_s": hold_s,
        "referee_fds_before": before,
        "referee_fds_held_2s": held,
        "referee_fds_every_5s": samples,
        "referee_fds_at_end": after,
        "goaway_received": sum(peer.goaway for peer in peers),
        "closed_by_referee": sum(peer.closed for peer in peers),
        "code": str(Path(__file__).resolve().parent.parent),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--connections", type=int, default=3000)
    parser.add_argument("--hold-s", type=float, default=75.0)
    arguments = parser.parse_args()
    print(json.dumps(asyncio.run(measure(arguments.connections, arguments.hold_s))), flush=True)


if __name__ == "__main__":
    main()
