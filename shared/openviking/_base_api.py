"""Shared base of the endpoint groups: everything goes through `_request`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from shared.openviking.envelope import Envelope
from shared.openviking.settings import CallKind
from shared.openviking.tenant import Tenant
from shared.openviking.transport import Decoder, QueryValue, Transport


def segment(value: str) -> str:
    """`value` escaped as one URL path segment."""
    return quote(value, safe="")


class ApiBase:
    """Routes each call to a transport; endpoint groups are mixins over it."""

    def _transport_for(self, tenant: Tenant | None, call: str) -> Transport:
        """The transport of the shard `tenant` lives on (`call` names the call in errors)."""
        raise NotImplementedError

    async def _request(
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
        return await self._transport_for(tenant, f"{method} {path}").request(
            method,
            path,
            tenant=tenant,
            kind=kind,
            idempotent=idempotent,
            deadline=deadline,
            params=params,
            json=json,
            enveloped=enveloped,
            api_key=api_key,
            ok_statuses=ok_statuses,
            call_timeout=call_timeout,
            decode=decode,
        )
