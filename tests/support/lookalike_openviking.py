"""A real local HTTP server answering like OpenViking (empty results, or its errors), for
tests of what the engine does around a call: deadlines, outages, instrumentation."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class LookalikeOpenViking:
    """A real local HTTP server answering like OpenViking: every call after `delay` seconds, with
    an empty result (reads: 404) or, when `status` is 503, OpenViking's unavailable error."""

    def __init__(self, *, delay: float = 0.0, status: int = 200) -> None:
        self.delay = delay
        self.status = status
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> LookalikeOpenViking:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                time.sleep(server.delay)
                if server.status != 200:
                    self._error(server.status, "UNAVAILABLE", "service unavailable")
                else:
                    self._error(404, "NOT_FOUND", f"not found: {self.path}")

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                time.sleep(server.delay)
                if server.status != 200:
                    self._error(server.status, "UNAVAILABLE", "service unavailable")
                    return
                empty = {"memories": [], "resources": [], "skills": [], "total": 0}
                self._reply(200, {"status": "ok", "result": empty})

            def _error(self, status: int, code: str, message: str) -> None:
                self._reply(status, {"status": "error", "error": {"code": code, "message": message}})

            def _reply(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its deadline passed) while we slept

            def log_message(self, format: str, *args: object) -> None:
                return

        return Handler
