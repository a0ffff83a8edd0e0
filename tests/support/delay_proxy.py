"""A small real TCP proxy in front of OpenViking that holds back chosen requests.

Every byte goes through real sockets to the real server; the proxy only waits before forwarding
the first chunk of a request that contains `pattern` (armed `count` times). When the client
gives up meanwhile, the held request is still delivered and the upstream connection is kept
open until OpenViking answered - the way a slow network or a busy server lands an append after
the caller's timeout. When OpenViking goes away in the middle of a request (killed, restarted),
the client's connection is closed too, as a direct connection would be; an idle keep-alive
connection OpenViking closes is opened again for the client's next request.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

UPSTREAM_LINGER_SECONDS = 30.0


@dataclass
class DelayRule:
    pattern: bytes
    delay: float
    count: int = 1
    delivered: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once a held request was forwarded to OpenViking and answered."""


class DelayProxy:
    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        self._upstream = (upstream_host, upstream_port)
        self._server: asyncio.Server | None = None
        self._rules: list[DelayRule] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def hold(self, pattern: str, delay: float, *, count: int = 1) -> DelayRule:
        """Delay the next `count` requests whose first chunk contains `pattern` by `delay` s."""
        rule = DelayRule(pattern.encode(), delay, count)
        self._rules.append(rule)
        return rule

    async def __aenter__(self) -> DelayProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _rule_for(self, chunk: bytes) -> DelayRule | None:
        for rule in self._rules:
            if rule.count > 0 and rule.pattern in chunk:
                rule.count -= 1
                return rule
        return None

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        held: list[DelayRule] = []
        upstream: asyncio.StreamWriter | None = None
        pump: asyncio.Task[None] | None = None
        unanswered = False
        """A request went upstream and no byte of an answer came back since."""

        async def to_client(reader: asyncio.StreamReader) -> None:
            nonlocal unanswered
            while chunk := await reader.read(65536):
                unanswered = False
                for rule in held:
                    rule.delivered.set()
                with contextlib.suppress(ConnectionError):
                    client_writer.write(chunk)
                    await client_writer.drain()
            if unanswered:  # OpenViking went away in the middle of a request: so does the connection
                client_writer.close()

        try:
            while chunk := await client_reader.read(65536):
                rule = self._rule_for(chunk)
                if rule is not None:
                    held.append(rule)
                    await asyncio.sleep(rule.delay)
                if upstream is None or pump is None or pump.done():
                    # (Re)connect: OpenViking closes idle keep-alive connections on its side.
                    up_reader, upstream = await asyncio.open_connection(*self._upstream)
                    pump = asyncio.create_task(to_client(up_reader))
                unanswered = True
                upstream.write(chunk)
                await upstream.drain()
            if held and pump is not None:  # the client gave up; let OpenViking finish the request
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(pump), UPSTREAM_LINGER_SECONDS)
        except (OSError, ConnectionError):
            pass
        finally:
            if pump is not None:
                pump.cancel()
                await asyncio.gather(pump, return_exceptions=True)
            for writer in (upstream, client_writer):
                if writer is not None:
                    writer.close()
            self._tasks.discard(task)
