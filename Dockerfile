# syntax=docker/dockerfile:1
# Image of the three context-engine services (one image; the service is chosen by argument):
#   docker build -t viking-context-engine:0.1.0 .
#   docker run viking-context-engine:0.1.0 --service capture|assembly|compaction|all
#
# Base image: pinned to an exact patch tag in every FROM. The digest could not be resolved offline
# when this file was written; before a release resolve it and append it to each FROM, e.g.
#   docker buildx imagetools inspect python:3.11.14-slim-bookworm   # -> python:3.11.14-slim-bookworm@sha256:...

# ---- build: turn the repository into a wheel and install it into a venv -------------------------
FROM python:3.11.14-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Only what the wheel is built from (pyproject's [tool.hatch.build.targets.wheel] packages);
# scripts/check-docker-context.py verifies this list against the entry point's imports.
COPY pyproject.toml ./
COPY shared/ ./shared/
COPY services/ ./services/
COPY gen/python/ ./gen/python/
COPY clients/python/src/ ./clients/python/src/
# The build backend (hatchling) is pinned in pyproject's [build-system]; runtime deps are pinned
# in [project.dependencies].
RUN python -m pip wheel --no-deps --wheel-dir /dist . \
 && python -m venv /opt/venv \
 && /opt/venv/bin/pip install --no-compile /dist/*.whl \
 && /opt/venv/bin/python -m compileall -q /opt/venv/lib
# tiktoken must work offline on a read-only root filesystem: seed its cache at build time, from
# the installed wheel (WORKDIR / so the source tree is not on sys.path). DL3064 is a false
# positive: TIKTOKEN_CACHE_DIR is a directory path, not a credential.
# hadolint ignore=DL3064
ENV TIKTOKEN_CACHE_DIR=/opt/tiktoken-cache
WORKDIR /
RUN /opt/venv/bin/python -m shared.tokens --seed-cache /opt/tiktoken-cache

# ---- runtime ----------------------------------------------------------------------------------
FROM python:3.11.14-slim-bookworm AS runtime
LABEL org.opencontainers.image.title="viking-context-engine" \
      org.opencontainers.image.description="Context engine gRPC services (capture, assembly, compaction) over OpenViking" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN groupadd --system --gid 10001 engine \
 && useradd --system --uid 10001 --gid engine --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin engine
COPY --from=build /opt/venv /opt/venv
COPY --from=build /opt/tiktoken-cache /opt/tiktoken-cache
# DL3064 is a false positive: TIKTOKEN_CACHE_DIR is a directory path, not a credential.
# hadolint ignore=DL3064
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    TIKTOKEN_CACHE_DIR=/opt/tiktoken-cache \
    CONTEXT_ENGINE_GRPC_PORT=50051
USER 10001:10001
EXPOSE 50051
# Kubernetes ignores HEALTHCHECK and uses native gRPC probes (k8s/base/*.yaml); this one is for
# plain `docker run`/compose: the overall ("") grpc.health.v1 status on the configured port.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import os, grpc; from grpc_health.v1 import health_pb2 as h, health_pb2_grpc as g; ch = grpc.insecure_channel('127.0.0.1:' + os.environ.get('CONTEXT_ENGINE_GRPC_PORT', '50051')); r = g.HealthStub(ch).Check(h.HealthCheckRequest(service=''), timeout=2); raise SystemExit(r.status != h.HealthCheckResponse.SERVING)"]
ENTRYPOINT ["context-engine"]
CMD ["--service", "all"]
