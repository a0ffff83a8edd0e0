"""`context-engine doctor`: every dependency of a running engine, one line each, with the fix.

Checked in order, each only when what it stands on works: versions of this install, the
configuration, each OpenViking server, the embedder behind it (a real `find`: OpenViking's own
`/ready` says "ok" while its embedder is dead), then the engine's gRPC port and each service's
health. A failed check is one `FAIL` line naming the dependency, what is wrong and what to do.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import grpc
from grpc import aio
from grpc_health.v1 import health_pb2

from shared.config import Settings, load_settings, unknown_environment
from shared.errors import BackendError, ConfigurationError
from shared.openviking.client import OpenVikingClient
from shared.openviking.tenant import Tenant
from shared.runtime.context import build_openviking_client

OPENVIKING_VERSION = "0.5.2"
GENERATED_WITH = {"protobuf": "7.35.1", "grpcio": "1.85.1"}
"""The runtimes gen/python was generated against (its headers); older ones refuse to import it."""
SERVICES = (
    "contextengine.v1.CaptureService",
    "contextengine.v1.AssemblyService",
    "contextengine.v1.CompactionService",
)
PROBE_TENANT = Tenant("ce-doctor", "ce-doctor")
"""Who the embedder probe searches as: a user of its own, so no one's data is read."""
OPENVIKING_SECONDS = 3.0
EMBEDDER_SECONDS = 30.0
"""A new user's first call embeds its preset folders in OpenViking (2-23 s measured)."""
ENGINE_SECONDS = 3.0


@dataclass(frozen=True)
class Finding:
    dependency: str
    ok: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        if self.ok:
            return f"ok    {self.dependency:<11} {self.detail}"
        return f"FAIL  {self.dependency:<11} {self.detail} -> {self.fix}"


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


def check_versions() -> list[Finding]:
    found = []
    python = ".".join(map(str, sys.version_info[:3]))
    found.append(
        Finding("python", True, python)
        if sys.version_info[:2] == (3, 11)
        else Finding(
            "python", False, f"{python}, the engine is built for 3.11", "make install (PYTHON=python3.11)"
        )
    )
    for package, floor in GENERATED_WITH.items():
        have = metadata.version(package)
        if _version_tuple(have) >= _version_tuple(floor):
            found.append(Finding(package, True, have))
        else:
            found.append(
                Finding(
                    package,
                    False,
                    f"{have} < {floor} (the stubs' runtime)",
                    f"pip install '{package}>={floor}'",
                )
            )
    return found


def check_config(config: Path | None, environ: Mapping[str, str]) -> tuple[Settings | None, list[Finding]]:
    found = [
        Finding("config", False, warning, "unset it or fix its name (docs/config.md)")
        for warning in unknown_environment(environ)
    ]
    try:
        settings = load_settings(config, environ)
    except ConfigurationError as error:
        where = str(config or environ.get("CONTEXT_ENGINE_CONFIG") or "the CONTEXT_ENGINE_* environment")
        return None, found + [
            Finding("config", False, problem, f"fix it in {where} (docs/config.md)")
            for problem in error.problems
        ]
    source = config or environ.get("CONTEXT_ENGINE_CONFIG") or "defaults + environment"
    return settings, [*found, Finding("config", True, f"{source}")]


async def check_openviking(openviking: OpenVikingClient, settings: Settings) -> list[Finding]:
    found = []
    move = "CONTEXT_ENGINE_OPENVIKING_SHARDS" if settings.openviking_shards else "CONTEXT_ENGINE_BASE_URL"
    for shard in settings.openviking_shard_map.shards:
        label = shard.base_url + ("" if not settings.openviking_shards else f" (shard {shard.name})")
        try:
            health = await openviking.shard(shard.name).health(deadline=time.monotonic() + OPENVIKING_SECONDS)
        except BackendError as error:
            found.append(
                Finding(
                    "openviking",
                    False,
                    f"{label}: unreachable ({error.message})",
                    f"start it (make run, or python -m shared.localstack up) or set {move}",
                )
            )
            continue
        if health.version != OPENVIKING_VERSION:
            found.append(
                Finding(
                    "openviking",
                    False,
                    f"{label}: version {health.version}",
                    f"the engine speaks OpenViking {OPENVIKING_VERSION}",
                )
            )
        else:
            found.append(Finding("openviking", True, f"{label}: {health.version}, auth {health.auth_mode}"))
    return found


async def check_embedder(openviking: OpenVikingClient) -> Finding:
    started = time.monotonic()
    try:
        await openviking.find(PROBE_TENANT, "doctor probe", limit=1, deadline=started + EMBEDDER_SECONDS)
    except BackendError as error:
        return Finding(
            "embedder",
            False,
            f"OpenViking cannot embed a query: {error.message}",
            "start the embedding server its ov.conf names (make run starts one on "
            "CONTEXT_ENGINE_EMBEDDINGS_PORT, default 8011)",
        )
    return Finding("embedder", True, f"a query embedded and searched in {time.monotonic() - started:.1f} s")


def _port_answers(target: str) -> bool:
    host, _, port = target.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=1.0):
            return True
    except (OSError, ValueError):
        return False


HealthCheck = aio.UnaryUnaryMultiCallable[health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse]


def _health_check(channel: aio.Channel) -> HealthCheck:
    # The channel's own callable: the health package's typed stubs declare no methods on HealthStub.
    return channel.unary_unary(
        "/grpc.health.v1.Health/Check",
        request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
        response_deserializer=health_pb2.HealthCheckResponse.FromString,
    )


async def check_engine(target: str) -> list[Finding]:
    async with aio.insecure_channel(target) as channel:
        check = _health_check(channel)
        try:
            overall = await check(health_pb2.HealthCheckRequest(service=""), timeout=ENGINE_SECONDS)
        except aio.AioRpcError as error:
            if _port_answers(target):
                return [
                    Finding(
                        "engine",
                        False,
                        f"{target} answers, but not as the engine ({error.code().name})",
                        "another program holds the port: stop it, or run the engine on another "
                        "(CONTEXT_ENGINE_GRPC_PORT) and pass --target",
                    )
                ]
            return [
                Finding(
                    "engine",
                    False,
                    f"{target}: nothing listens",
                    "start it (make run, or context-engine --service all), or pass --target",
                )
            ]
        found = [
            Finding(
                "engine",
                True,
                f"{target}: {health_pb2.HealthCheckResponse.ServingStatus.Name(overall.status)}",
            )
        ]
        for service in SERVICES:
            short = service.rsplit(".", 1)[1]
            try:
                answer = await check(health_pb2.HealthCheckRequest(service=service), timeout=ENGINE_SECONDS)
            except aio.AioRpcError as error:
                if error.code() is grpc.StatusCode.NOT_FOUND:
                    continue  # not served by this process (one service per process)
                raise
            if answer.status == health_pb2.HealthCheckResponse.SERVING:
                found.append(Finding("engine", True, f"{short} SERVING"))
            else:
                found.append(
                    Finding(
                        "engine",
                        False,
                        f"{short} NOT_SERVING",
                        "its OpenViking is down or frozen: see the openviking line",
                    )
                )
        return found


async def diagnose(config: Path | None, environ: Mapping[str, str], target: str | None) -> list[Finding]:
    """Every finding, in order; a check is skipped when what it stands on failed."""
    found = check_versions()
    settings, config_findings = check_config(config, environ)
    found += config_findings
    if settings is None:
        return found
    openviking = build_openviking_client(settings)
    try:
        backend = await check_openviking(openviking, settings)
        found += backend
        if all(f.ok for f in backend):
            found.append(await check_embedder(openviking))
    finally:
        await openviking.aclose()
    found += await check_engine(target or f"{settings.grpc_host}:{settings.grpc_port}")
    return found


def run(config: Path | None, target: str | None, environ: Mapping[str, str]) -> int:
    findings = asyncio.run(diagnose(config, environ, target))
    for finding in findings:
        print(finding.line(), flush=True)
    return 0 if all(f.ok for f in findings) else 1
