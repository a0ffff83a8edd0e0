"""The stack's default embedding server (all-MiniLM-L6-v2 on onnxruntime), over real HTTP."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.localstack.components import embeddings_base_url, embeddings_process
from shared.localstack.embedders import Embedder
from shared.localstack.layout import StackLayout
from shared.localstack.pins import EMBEDDING_DIMENSION, EMBEDDING_MODEL_NAME
from shared.localstack.processes import ManagedProcess, free_port
from shared.localstack.runtimes import provision


@pytest.fixture(scope="module")
def onnx_server(
    stack_layout: StackLayout, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[httpx.Client]:
    venv = provision(stack_layout, Embedder.ONNX.runtime)
    port = free_port()
    log_dir: Path = tmp_path_factory.mktemp("onnx-embeddings")
    process = ManagedProcess.spawn(embeddings_process(Embedder.ONNX, venv, port, log_dir))
    try:
        process.wait_ready(120.0)
        with httpx.Client(base_url=embeddings_base_url(port), timeout=60) as client:
            yield client
    finally:
        process.stop()


def _vectors(client: httpx.Client, texts: list[str], **extra: object) -> np.ndarray:
    response = client.post("/embeddings", json={"model": EMBEDDING_MODEL_NAME, "input": texts, **extra})
    response.raise_for_status()
    data = response.json()["data"]
    assert [item["index"] for item in data] == list(range(len(texts)))
    rows = [
        np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4")
        if isinstance(item["embedding"], str)
        else np.asarray(item["embedding"], dtype=np.float32)
        for item in data
    ]
    return np.stack(rows)


def test_models_lists_the_served_name(onnx_server: httpx.Client) -> None:
    models = onnx_server.get("/models").json()["data"]
    assert [m["id"] for m in models] == [EMBEDDING_MODEL_NAME]


def test_vectors_are_unit_length_and_base64_matches_float(onnx_server: httpx.Client) -> None:
    texts = ["We moved the standup to 9:30.", "x"]
    floats = _vectors(onnx_server, texts)
    packed = _vectors(onnx_server, texts, encoding_format="base64")
    assert floats.shape == (2, EMBEDDING_DIMENSION)
    assert np.allclose(np.linalg.norm(floats, axis=1), 1.0, atol=1e-5)
    assert np.allclose(floats, packed, atol=1e-6)


def test_meaning_decides_nearness(onnx_server: httpx.Client) -> None:
    deploy, crash, cake = _vectors(
        onnx_server,
        [
            "The deployment failed because the container ran out of memory.",
            "Our release crashed: the pod was killed for exceeding its memory limit.",
            "I baked a chocolate cake for my sister's birthday party.",
        ],
    )
    assert deploy @ crash > deploy @ cake + 0.3


def test_inputs_past_256_tokens_are_cut(onnx_server: httpx.Client) -> None:
    words = [f"word{i}" for i in range(600)]
    shorter, longer = _vectors(onnx_server, [" ".join(words[:400]), " ".join(words)])
    assert shorter @ longer > 0.99999


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.text(
            alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=300
        ),
        min_size=2,
        max_size=6,
    )
)
def test_a_texts_vector_does_not_depend_on_its_request(onnx_server: httpx.Client, texts: list[str]) -> None:
    together = _vectors(onnx_server, texts)
    alone = np.concatenate([_vectors(onnx_server, [text]) for text in reversed(texts)])[::-1]
    assert np.allclose(together, alone, atol=1e-5)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "input"),
        ({"input": []}, "input"),
        ({"input": ["ok", 3]}, "input"),
        ({"input": "ok", "encoding_format": "int8"}, "encoding_format"),
        ({"input": "ok", "dimensions": 512}, "dimensions"),
    ],
)
def test_bad_requests_name_the_field(onnx_server: httpx.Client, body: dict[str, object], field: str) -> None:
    response = onnx_server.post("/embeddings", json=body)
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith(f"{field}:")


def test_a_body_that_is_not_json_is_refused(onnx_server: httpx.Client) -> None:
    response = onnx_server.post(
        "/embeddings", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert response.json()["error"]["message"].startswith("body:")


def test_unknown_routes_are_404(onnx_server: httpx.Client) -> None:
    assert onnx_server.post("/rerank", json={"input": "x"}).status_code == 404
    assert onnx_server.get("/health/deep").status_code == 404
