"""Ports the local stack binds: taken ones fail in one line naming the setting that moves them."""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Mapping

from shared.localstack.errors import LocalStackError

OPENVIKING_PORT_ENV = "CONTEXT_ENGINE_PORT"
"""OpenViking's port in local mode: the `port` setting (`shared.config`)."""
EMBEDDINGS_PORT_ENV = "CONTEXT_ENGINE_EMBEDDINGS_PORT"
"""The embedding server's port; the services never read it, so it is not a setting."""
GRPC_PORT_ENV = "CONTEXT_ENGINE_GRPC_PORT"
"""The engine's gRPC port: the `grpcPort` setting."""


class PortInUse(LocalStackError):
    """A port the stack is told to bind is taken by another process."""


def ensure_free(port: int, what: str, setting: str, host: str = "127.0.0.1") -> None:
    """Raise `PortInUse` when `host:port` cannot be bound now; port 0 (any free port) always can.

    Checked before a server is spawned, so a clash is one line here instead of a server's
    traceback in its log file after a startup timeout.
    """
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As the servers bind: a port a stopped server left in TIME_WAIT is free to them (a
        # restart on the same port), only one another socket holds is taken.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as error:
            if error.errno != errno.EADDRINUSE:
                raise PortInUse(f"port {port} ({what}) cannot be bound: {error.strerror}") from error
            raise PortInUse(
                f"port {port} ({what}) is already in use: stop what holds it (`ss -ltnp | grep :{port}`) "
                f"or set {setting} to another port (0 = any free port)"
            ) from error


def port_from_env(name: str, default: int, environ: Mapping[str, str] | None = None) -> int:
    """`environ[name]` (default: the process environment) as a port number, `default` when unset;
    a one-line error when it is not a port."""
    value = (os.environ if environ is None else environ).get(name, "").strip()
    if not value:
        return default
    if not value.isdigit() or int(value) > 65535:
        raise LocalStackError(f"{name}: expected a port number 0-65535 (got {value!r})")
    return int(value)
