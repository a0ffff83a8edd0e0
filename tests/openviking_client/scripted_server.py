"""A real local HTTP server (stdlib, its own thread) that answers from a script.

Used to test the client's error mapping, retries and deadlines over real sockets.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: Any = None
    """A dict/list is sent as JSON; bytes/str verbatim."""
    content_type: str = "application/json"
    delay: float = 0.0
    """Seconds to wait before answering (for timeouts)."""

    def encoded(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body).encode()


def ok(result: Any, **extra: Any) -> Reply:
    return Reply(200, {"status": "ok", "result": result, **extra})


def error(status: int, code: str, message: str) -> Reply:
    return Reply(status, {"status": "error", "result": None, "error": {"code": code, "message": message}})


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any


@dataclass
class ScriptedServer:
    base_url: str = ""
    requests: list[Recorded] = field(default_factory=list)
    _script: dict[tuple[str, str], list[Reply]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def script(self, method: str, path: str, *replies: Reply) -> None:
        """Answer `method path` with `replies` in order; the last one repeats."""
        with self._lock:
            self._script[(method, path)] = list(replies)

    def reset(self) -> None:
        with self._lock:
            self._script.clear()
            self.requests.clear()

    def calls(self, method: str, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and r.path == path]

    def _next(self, method: str, path: str) -> Reply:
        with self._lock:
            replies = self._script.get((method, path))
            if not replies:
                return error(404, "NOT_FOUND", "Not Found")
            return replies.pop(0) if len(replies) > 1 else replies[0]


def _handler(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            server.requests.append(
                Recorded(self.command, parts.path, parts.query, dict(self.headers.items()), body)
            )
            reply = server._next(self.command, parts.path)
            if reply.delay:
                time.sleep(reply.delay)
            payload = reply.encoded()
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout tests)

        do_GET = do_POST = do_DELETE = do_PATCH = do_PUT = _serve  # noqa: N815 - stdlib names

        def log_message(self, format: str, *args: Any) -> None:
            return None

    return Handler


@contextmanager
def running_scripted_server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(scripted))
    httpd.daemon_threads = True
    scripted.base_url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, name="scripted-openviking", daemon=True)
    thread.start()
    try:
        yield scripted
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
