"""Which embedding server the local stack starts, and how its runtime is recorded."""

from __future__ import annotations

import json

import pytest

from shared.localstack.embedders import DEFAULT_EMBEDDER, EMBEDDER_ENV, Embedder, embedder_from_env
from shared.localstack.errors import ProvisioningError
from shared.localstack.runtimes import ONNX_EMBEDDINGS_RUNTIME, TORCH_EMBEDDINGS_RUNTIME


def test_the_default_embedder_needs_no_pytorch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EMBEDDER_ENV, raising=False)
    assert embedder_from_env() is DEFAULT_EMBEDDER is Embedder.ONNX
    steps = " ".join(" ".join(step) for step in Embedder.ONNX.runtime.install_steps)
    assert "torch" not in steps and "infinity" not in steps


@pytest.mark.parametrize(("value", "expected"), [("torch", Embedder.TORCH), (" ONNX ", Embedder.ONNX)])
def test_the_variable_picks_the_server(
    monkeypatch: pytest.MonkeyPatch, value: str, expected: Embedder
) -> None:
    monkeypatch.setenv(EMBEDDER_ENV, value)
    assert embedder_from_env() is expected


def test_an_unknown_embedder_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EMBEDDER_ENV, "tensorflow")
    with pytest.raises(ProvisioningError, match=f"{EMBEDDER_ENV}='tensorflow'"):
        embedder_from_env()


def test_a_runtime_with_a_build_script_is_rebuilt_when_the_script_changes() -> None:
    marker = json.loads(ONNX_EMBEDDINGS_RUNTIME.marker_text())
    name, digest = marker["build"]
    assert name == "onnx_build.py" and len(digest) == 64
    assert "build" not in json.loads(TORCH_EMBEDDINGS_RUNTIME.marker_text())
