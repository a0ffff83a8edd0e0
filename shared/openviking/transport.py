"""The one place that sends HTTP to OpenViking: deadlines, retries, auth headers, envelope."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from shared.errors import BackendError, BackendTimeout, BackendUnauthenticated, BackendUnavailable
from shared.openviking.auth import AdminApi, AuthStrategy
from shared.openviking.envelope import Envelope, unwrap
from shared.openviking.http import HttpResponse, HttpSession, HttpUnreachable, Middleware, encode_json
from shared.openviking.settings import CallKind, CallTimeouts, PoolLimits, RetryPolicy
from shared.openviking.tenant import Tenant

HeaderProvider = Callable[[], Mapping[str, str]]
"""Called once per HTTP attempt; its headers are added (e.g. `traceparent`, `X-Request-ID`)."""

QueryValue = str | int | float | bool | Sequence[str] | None
Decoder = Callable[[HttpResponse], Envelope]
"""Turns an answer into the call's `Envelope` (or raises the mapped `BackendError`)."""


def time_left(deadline: float | None) -> float | None:
    """Seconds until `deadline` (an absolute `time.monotonic()` value), or None without one."""
    return None if deadline is None else deadline - time.monotonic()


def _query(params: Mapping[str, QueryValue] | None) -> list[tuple[str, str]]:
    """Query pairs without None values; bools as `true`/`false`, sequences repeated."""
    pairs: list[tuple[str, str]] = []
    for key, value in (params or {}).items():
        if value is None:
            continue
        if isinstance(value, bool):
            pairs.append((key, "true" if value else "false"))
        elif isinstance(value, str | int | float):
            pairs.append((key, str(value)))
        else:
            pairs.extend((key, item) for item in value)
    return pairs


class Transport:
    """One server's `HttpSession` plus the call policy (timeouts, retries, auth, extra headers)."""

    def __init__(
        self,
        base_url: str,
        auth: AuthStrategy,
        admin: AdminApi,
        *,
        timeouts: CallTimeouts,
        retry: RetryPolicy,
        pool: PoolLimits,
        header_providers: Sequence[HeaderProvider] = (),
        middlewares: Sequence[Middleware] = (),
        rng: random.Random | None = None,
        label: str = "OpenViking",
    ) -> None:
        """`label` names the server in errors (`OpenViking shard ov-1` when sharded)."""
        self._label = label
        self._auth = auth
        self._admin = admin
        self._timeouts = timeouts
        self._retry = retry
        self._header_providers = tuple(header_providers)
        self._rng = rng or random.Random()
        self._http = HttpSession(base_url, pool, middlewares)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def request(
        self,
        method: str,
        path: str,
        *,
        tenant: Tenant | None,
        kind: CallKind,
        idempotent: bool,
        deadline: float | None = None,
        params: Mapping[str, QueryValue] | None = None,
        json: Any = None,
        enveloped: bool = True,
        api_key: str | None = None,
        ok_statuses: frozenset[int] = frozenset(),
        call_timeout: float | None = None,
        decode: Decoder | None = None,
    ) -> Envelope:
        """Send one logical call; retried only when `idempotent` and the failure is retriable.

        `api_key` replaces the auth strategy (admin calls with the root key). Statuses in
        `ok_statuses` are returned as results instead of raised (e.g. 503 from `/ready`).
        `call_timeout` replaces the call kind's default timeout (still capped by `deadline`).
        `decode` replaces `unwrap` for the answer of a status not in `ok_statuses` (e.g. a typed
        result decoded in one pass, `shared.openviking.envelope.unwrap_as`).
        """
        self._check_deadline(method, path, deadline)
        if api_key is not None:
            auth_headers: Mapping[str, str] = {"X-API-Key": api_key}
        else:
            auth_headers = await self._auth.headers_for(tenant, self._admin, deadline)
        query = _query(params)
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._send_once(
                    method=method,
                    path=path,
                    kind=kind,
                    deadline=deadline,
                    query=query,
                    json=json,
                    auth_headers=auth_headers,
                    enveloped=enveloped,
                    ok_statuses=ok_statuses,
                    call_timeout=call_timeout,
                    decode=decode,
                )
            except BackendUnauthenticated:
                if tenant is not None and api_key is None:
                    self._auth.on_unauthenticated(tenant)
                raise
            except BackendUnavailable as exc:
                delay = self._retry_delay(exc, idempotent, attempt, deadline)
                if delay is None:
                    raise
                await asyncio.sleep(delay)

    def _retry_delay(
        self, exc: BackendUnavailable, idempotent: bool, attempt: int, deadline: float | None
    ) -> float | None:
        """Seconds to sleep before the next attempt, or None when the failure is final."""
        if not idempotent or attempt >= self._retry.max_attempts:
            return None
        if exc.http_status != 0 and exc.http_status not in self._retry.retry_on_http_status:
            return None
        delay = self._retry.backoff(attempt, self._rng)
        left = time_left(deadline)
        if left is not None and delay >= left:
            return None
        return delay

    def _check_deadline(self, method: str, path: str, deadline: float | None) -> float | None:
        left = time_left(deadline)
        if left is not None and left <= 0:
            raise BackendTimeout(
                f"{method} {path}: deadline expired before the call", code="DEADLINE_EXCEEDED"
            )
        return left

    async def _send_once(
        self,
        *,
        method: str,
        path: str,
        kind: CallKind,
        deadline: float | None,
        query: list[tuple[str, str]],
        json: Any,
        auth_headers: Mapping[str, str],
        enveloped: bool,
        ok_statuses: frozenset[int],
        call_timeout: float | None,
        decode: Decoder | None,
    ) -> Envelope:
        left = self._check_deadline(method, path, deadline)
        timeout = self._timeouts.for_kind(kind) if call_timeout is None else call_timeout
        if left is not None:
            timeout = min(timeout, left)
        headers: dict[str, str] = {}
        for provider in self._header_providers:
            headers.update(provider())
        headers.update(auth_headers)
        request = self._http.request(
            method,
            path,
            query=query,
            headers=headers,
            body=None if json is None else encode_json(json),
        )
        try:
            async with asyncio.timeout(timeout):
                response = await self._http.send(request)
        except TimeoutError as exc:
            raise BackendTimeout(
                f"{method} {path}: no answer from {self._label} within {timeout:.3f}s",
                code="DEADLINE_EXCEEDED",
            ) from exc
        except HttpUnreachable as exc:
            raise BackendUnavailable(
                f"{method} {path}: {self._label} unreachable ({exc})",
                code="UNAVAILABLE",
            ) from exc
        if response.status in ok_statuses:
            return _lenient(response, enveloped=enveloped)
        if decode is not None:
            return decode(response)
        return unwrap(response, enveloped=enveloped)


def _lenient(response: HttpResponse, *, enveloped: bool) -> Envelope:
    """A JSON body of an accepted non-2xx status, taken as the result."""
    try:
        body = response.json()
    except ValueError as exc:
        raise BackendError(
            f"OpenViking answered HTTP {response.status} with a non-JSON body",
            http_status=response.status,
            code="INVALID_RESPONSE",
        ) from exc
    if enveloped and isinstance(body, dict):
        return Envelope(result=body.get("result"))
    return Envelope(result=body)
