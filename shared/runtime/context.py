"""What every service is built from: settings and the shared clients, passed in explicitly."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from grpc import aio

from shared.config import Settings
from shared.domain.identity import RequestIdentity
from shared.domain.memory_changes import MemoryChanges
from shared.openviking.auth import ApiKeyAuth, AuthStrategy, DevAuth, TrustedAuth
from shared.openviking.client import OpenVikingClient
from shared.openviking.http import Middleware
from shared.openviking.keys import ProvisioningUserKeys
from shared.openviking.settings import CallTimeouts
from shared.openviking.transport import HeaderProvider


@dataclass
class InProcess:
    """What a service of this process offers the others directly: no gRPC hop, and it still
    works while the server drains (capture's shutdown hand-off in an all-in-one process)."""

    own_hand_offs: Callable[[RequestIdentity], Awaitable[object]] | None = None
    """CompactionService's worker: own the compactions handed off on a stream."""
    memory_changes: MemoryChanges = field(default_factory=MemoryChanges)
    """Capture and compaction announce changed memories; assembly drops cached profiles."""


@dataclass(frozen=True)
class ServiceContext:
    settings: Settings
    openviking: OpenVikingClient
    compaction_target: Callable[[], str]
    """gRPC target of CompactionService (resolved lazily: all-in-one knows its port late)."""
    client_interceptors: Sequence[aio.ClientInterceptor] = field(default_factory=tuple)
    """Interceptors for service-to-service channels (trace propagation)."""
    in_process: InProcess = field(default_factory=InProcess)


def openviking_auth(settings: Settings) -> AuthStrategy:
    key = settings.api_key.get_secret_value() if settings.api_key else ""
    if settings.openviking_auth_mode == "trusted":
        return TrustedAuth(root_api_key=key)
    if settings.openviking_auth_mode == "api_key":
        return ApiKeyAuth(keys=ProvisioningUserKeys(root_api_key=key, seed=key))
    return DevAuth()


def build_openviking_client(
    settings: Settings,
    header_providers: Sequence[HeaderProvider] = (),
    middlewares: Sequence[Middleware] = (),
) -> OpenVikingClient:
    """The client over every configured OpenViking shard (the one `baseUrl` when unsharded)."""
    return OpenVikingClient(
        settings.openviking_shard_map,
        openviking_auth(settings),
        timeouts=CallTimeouts(
            read=settings.openviking_timeout_seconds,
            append=settings.openviking_timeout_seconds,
            search=settings.openviking_timeout_seconds,
        ),
        header_providers=header_providers,
        middlewares=middlewares,
    )
