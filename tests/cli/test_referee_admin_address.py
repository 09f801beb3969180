"""`mus referee serve --admin-address`: the TableAdmin API on a server of its own, beside the public one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from mus.v1 import admin_pb2, admin_pb2_grpc

pytestmark = pytest.mark.slow  # `mus referee serve` as a process

TOKEN = "admin-address-token-0123456789"


def test_referee_serve_answers_admin_calls_on_its_admin_address_and_nothing_else_there() -> None:
    env = dict(os.environ, MUS_ADMIN_TOKEN=TOKEN)
    command = ["referee", "serve", "--address", "127.0.0.1:0", "--admin-address", "127.0.0.1:0"]
    process = subprocess.Popen(
        [sys.executable, "-m", "workers.cli.main", *command], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert process.stdout is not None
        public = process.stdout.readline()
        admin = process.stdout.readline()
        assert public.startswith("referee listening on 127.0.0.1:"), public
        assert admin.startswith("admin API listening on 127.0.0.1:"), admin
        with grpc.insecure_channel(admin.split()[-1]) as channel:
            stub = admin_pb2_grpc.TableAdminServiceStub(channel)
            request = admin_pb2.GetTableStatusRequest(table_id="no-such-table")
            try:
                stub.GetTableStatus(request, metadata=(("authorization", f"Bearer {TOKEN}"),), timeout=10)
                code = grpc.StatusCode.OK
            except grpc.RpcError as error:
                code = error.code()
            assert code is grpc.StatusCode.NOT_FOUND, "the admin API answered, authenticated"
            try:
                health = health_pb2_grpc.HealthStub(channel)
                health.Check(health_pb2.HealthCheckRequest(service=""), timeout=10)  # type: ignore[attr-defined]
                code = grpc.StatusCode.OK
            except grpc.RpcError as error:
                code = error.code()
            assert code is grpc.StatusCode.UNIMPLEMENTED, "no unauthenticated service on the admin port"
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
