"""A real referee on 127.0.0.1:0 for each test, started inside the test's own event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc

from referee.service.server import start_server
from referee.service.servicer import Referee

T = TypeVar("T")


@dataclass
class Running:
    referee: Referee
    server: grpc.aio.Server
    address: str


def with_referee(scenario: Callable[[Running], Awaitable[T]], timeout: float = 120.0, **options: Any) -> T:
    """Run `scenario` against a real referee server in a fresh event loop, then stop the server."""

    async def main() -> T:
        referee = Referee(**options)
        server, port = await start_server(referee)
        try:
            return await asyncio.wait_for(scenario(Running(referee, server, f"127.0.0.1:{port}")), timeout)
        finally:
            await server.stop(None)

    return asyncio.run(main())
