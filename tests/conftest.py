"""Session-wide fixtures for the real local stack, started lazily and once per test run.

* ``embeddings``: one embedding server shared by every OpenViking below;
* ``openviking``: OpenViking without an LLM (memory extraction off);
* ``openviking_llm``: a second OpenViking wired to the stand-in LLM (extraction on);
* ``standin_llm``: that stand-in (flip ``.fail`` for failure tests, but set it back);
* ``openviking_shards``: two more OpenViking servers, shards ``ov-0`` and ``ov-1``, per module
  (a test may stop one).

Runtimes are provisioned into ``<repo>/.stack/venvs`` (or ``$CONTEXT_ENGINE_STACK_DIR/venvs``)
before the first test runs, and only when a selected test needs the stack. Set
``CONTEXT_ENGINE_TEST_EMBEDDINGS_URL`` to reuse an already running embedding server.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest
from hypothesis import settings

from shared.localstack.components import embeddings_base_url, embeddings_process
from shared.localstack.embedders import embedder_from_env
from shared.localstack.layout import StackLayout
from shared.localstack.openviking_config import AuthMode, AuthSettings, LlmSettings
from shared.localstack.pins import EMBEDDING_DIMENSION, EMBEDDING_MODEL_NAME
from shared.localstack.processes import ManagedProcess, free_port
from shared.localstack.runtimes import OPENVIKING_RUNTIME, provision
from shared.localstack.stack import LocalStack, StackSettings
from tests.support.shards import OpenVikingShards, running_shards
from tests.support.stack import EmbeddingsEndpoint, OpenVikingEndpoint, OpenVikingWithLlm, RemoteOpenViking
from tests.support.standin_llm import MODEL_ID, StandinLlm

# Property tests assert behaviour, never speed: no per-example deadline (CI machines are busy).
settings.register_profile("engine", deadline=None)
settings.load_profile("engine")

EXTERNAL_EMBEDDINGS_ENV = "CONTEXT_ENGINE_TEST_EMBEDDINGS_URL"
STACK_FIXTURES = frozenset(
    {
        "embeddings",
        "openviking",
        "openviking_llm",
        "openviking_api_key",
        "openviking_trusted",
        "openviking_shards",
    }
)
STARTUP_TIMEOUT_SECONDS = 300.0


def pytest_collection_finish(session: pytest.Session) -> None:
    """Install missing runtimes up front, outside any test's timeout, if a selected test needs them."""
    needed = {name for item in session.items for name in getattr(item, "fixturenames", ())}
    if session.config.option.collectonly or not needed & STACK_FIXTURES:
        return
    layout = StackLayout.from_env()
    if needed & (STACK_FIXTURES - {"embeddings"}):
        provision(layout, OPENVIKING_RUNTIME)
    if not os.environ.get(EXTERNAL_EMBEDDINGS_ENV):
        provision(layout, embedder_from_env().runtime)


@pytest.fixture(scope="session")
def stack_layout() -> StackLayout:
    return StackLayout.from_env()


@pytest.fixture(scope="session")
def embeddings(
    stack_layout: StackLayout, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmbeddingsEndpoint]:
    external = os.environ.get(EXTERNAL_EMBEDDINGS_ENV, "").strip().rstrip("/")
    if external:
        yield EmbeddingsEndpoint(external, EMBEDDING_MODEL_NAME, EMBEDDING_DIMENSION, pid=None)
        return
    venv = provision(stack_layout, embedder_from_env().runtime)
    port = free_port()
    process = ManagedProcess.spawn(
        embeddings_process(embedder_from_env(), venv, port, tmp_path_factory.mktemp("embeddings"))
    )
    try:
        process.wait_ready(STARTUP_TIMEOUT_SECONDS)
        yield EmbeddingsEndpoint(
            embeddings_base_url(port), EMBEDDING_MODEL_NAME, EMBEDDING_DIMENSION, process.pid
        )
    finally:
        process.stop()


@pytest.fixture(scope="session")
def openviking(
    stack_layout: StackLayout, embeddings: EmbeddingsEndpoint, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OpenVikingEndpoint]:
    stack = _openviking_stack(stack_layout, embeddings, tmp_path_factory, llm=None)
    with stack:
        yield OpenVikingEndpoint(
            base_url=stack.openviking_url,
            data_dir=stack.openviking_data.root,
            log_file=stack.openviking_data.server_log,
            extraction_enabled=stack.extraction_enabled,
            pid=stack.processes[-1].pid,
        )


@pytest.fixture(scope="session")
def standin_llm() -> Iterator[StandinLlm]:
    with StandinLlm() as llm:
        yield llm


@pytest.fixture(scope="session")
def openviking_llm(
    stack_layout: StackLayout,
    embeddings: EmbeddingsEndpoint,
    standin_llm: StandinLlm,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OpenVikingWithLlm]:
    llm = LlmSettings("openai", MODEL_ID, api_base=standin_llm.base_url, api_key="local")
    stack = _openviking_stack(stack_layout, embeddings, tmp_path_factory, llm=llm)
    with stack:
        yield OpenVikingWithLlm(
            base_url=stack.openviking_url,
            data_dir=stack.openviking_data.root,
            log_file=stack.openviking_data.server_log,
            extraction_enabled=stack.extraction_enabled,
            pid=stack.processes[-1].pid,
            llm=standin_llm,
        )


@pytest.fixture(scope="module")
def openviking_shards(
    stack_layout: StackLayout, embeddings: EmbeddingsEndpoint, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OpenVikingShards]:
    with running_shards(
        ("ov-0", "ov-1"),
        layout=stack_layout,
        embeddings_url=embeddings.base_url,
        data_root=tmp_path_factory.mktemp("openviking-shards"),
    ) as shards:
        yield shards


def _remote_openviking(
    layout: StackLayout,
    embeddings: EmbeddingsEndpoint,
    tmp_path_factory: pytest.TempPathFactory,
    mode: AuthMode,
) -> Iterator[RemoteOpenViking]:
    root_key = f"root-{secrets.token_hex(16)}"
    stack = _openviking_stack(
        layout, embeddings, tmp_path_factory, llm=None, auth=AuthSettings(mode, root_key)
    )
    with stack:
        yield RemoteOpenViking(
            base_url=stack.openviking_url,
            data_dir=stack.openviking_data.root,
            log_file=stack.openviking_data.server_log,
            extraction_enabled=stack.extraction_enabled,
            pid=stack.processes[-1].pid,
            auth_mode=mode,
            root_api_key=root_key,
        )


@pytest.fixture(scope="session")
def openviking_api_key(
    stack_layout: StackLayout, embeddings: EmbeddingsEndpoint, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RemoteOpenViking]:
    """OpenViking in `api_key` mode (per-tenant user keys provisioned with the root key)."""
    yield from _remote_openviking(stack_layout, embeddings, tmp_path_factory, "api_key")


@pytest.fixture(scope="session")
def openviking_trusted(
    stack_layout: StackLayout, embeddings: EmbeddingsEndpoint, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RemoteOpenViking]:
    """OpenViking in `trusted` mode (root key plus asserted identity headers)."""
    yield from _remote_openviking(stack_layout, embeddings, tmp_path_factory, "trusted")


def _openviking_stack(
    layout: StackLayout,
    embeddings: EmbeddingsEndpoint,
    tmp_path_factory: pytest.TempPathFactory,
    llm: LlmSettings | None,
    auth: AuthSettings | None = None,
) -> LocalStack:
    settings = StackSettings(
        layout=layout,
        openviking_data_dir=tmp_path_factory.mktemp("openviking-llm" if llm else "openviking"),
        openviking_port=0,
        embeddings_url=embeddings.base_url,
        llm=llm,
        auth=auth or AuthSettings(),
        startup_timeout_seconds=STARTUP_TIMEOUT_SECONDS,
    )
    return LocalStack(settings)
