"""The one entry point: `context-engine --service capture|assembly|compaction|all`.

One process per service for independent scaling, or all three in one process for the local
default. Configuration comes from `--config` / $CONTEXT_ENGINE_CONFIG plus the environment.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from shared.config import Settings, load_settings
from shared.errors import ConfigurationError
from shared.runtime.context import ServiceContext, build_openviking_client
from shared.runtime.readiness import BackendReadiness
from shared.runtime.server import ServiceHost, ServiceSpec, run_until_signalled
from shared.telemetry import (
    OpenVikingTracing,
    TracingServerInterceptor,
    client_interceptors,
    install_log_correlation,
    setup_telemetry,
    trace_headers,
)
from shared.tokens import ensure_offline_tiktoken

log = logging.getLogger("contextengine")

SERVICE_NAMES = ("capture", "assembly", "compaction")


def _builders() -> dict[str, Callable[[ServiceContext], ServiceSpec]]:
    from services.assembly import build_assembly_service  # noqa: PLC0415 - keeps --help fast
    from services.capture import build_capture_service  # noqa: PLC0415
    from services.compaction import build_compaction_service  # noqa: PLC0415

    return {
        "capture": build_capture_service,
        "assembly": build_assembly_service,
        "compaction": build_compaction_service,
    }


def selected_services(service: str) -> Sequence[str]:
    return SERVICE_NAMES if service == "all" else (service,)


def telemetry_service_name(service: str) -> str:
    """`service.name` default: `contextengine-<service>`, `contextengine` for all three."""
    return "contextengine" if service == "all" else f"contextengine-{service}"


async def start_host(settings: Settings, service: str, port: int | None = None) -> ServiceHost:
    """Build and start the host for `service` ("all" for the three); returns it running."""
    ensure_offline_tiktoken()
    telemetry = setup_telemetry(telemetry_service_name(service))
    openviking = build_openviking_client(
        settings, header_providers=[trace_headers], middlewares=[OpenVikingTracing()]
    )
    host_ref: list[ServiceHost] = []

    def compaction_target() -> str:
        if settings.compaction_target:
            return settings.compaction_target
        if service == "all" and host_ref:
            return host_ref[0].address
        raise ConfigurationError(["compactionTarget: required when capture runs without compaction"])

    context = ServiceContext(
        settings=settings,
        openviking=openviking,
        compaction_target=compaction_target,
        client_interceptors=client_interceptors(),
    )
    builders = _builders()
    specs = [builders[name](context) for name in selected_services(service)]
    host = ServiceHost(
        settings,
        specs,
        closers=[openviking.aclose, telemetry.ashutdown],
        extra_interceptors=[TracingServerInterceptor()],
        readiness=BackendReadiness.of(openviking),
    )
    host_ref.append(host)
    await host.start(port)
    return host


async def serve(settings: Settings, service: str, port: int | None) -> None:
    host = await start_host(settings, service, port)
    print(f"context-engine {service} listening on {host.address}", flush=True)
    await run_until_signalled(host)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="context-engine", description=__doc__)
    parser.add_argument("--service", choices=[*SERVICE_NAMES, "all"], default="all")
    parser.add_argument("--config", type=Path, default=None, help="JSON config file (plugin keys)")
    parser.add_argument("--port", type=int, default=None, help="gRPC port (default: grpcPort)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    install_log_correlation()
    try:
        settings = load_settings(args.config)
    except ConfigurationError as exc:
        print(exc.message, file=sys.stderr)
        raise SystemExit(2) from exc
    asyncio.run(serve(settings, args.service, args.port))


if __name__ == "__main__":
    main()
