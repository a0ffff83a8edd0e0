"""Which embedding server the local stack runs: ONNX (default, no PyTorch) or PyTorch.

Both serve all-MiniLM-L6-v2 behind the same OpenAI-compatible ``/v1/embeddings``; the PyTorch
one (infinity-emb) stays for side-by-side measurement (``python -m tests.bench.embedders``) and
is chosen with ``CONTEXT_ENGINE_EMBEDDER=torch``. A remote embedder plugs in by URL instead
(``StackSettings.embeddings_url``).
"""

from __future__ import annotations

import os
from enum import StrEnum

from shared.localstack.errors import ProvisioningError
from shared.localstack.runtimes import ONNX_EMBEDDINGS_RUNTIME, TORCH_EMBEDDINGS_RUNTIME, RuntimeSpec

EMBEDDER_ENV = "CONTEXT_ENGINE_EMBEDDER"


class Embedder(StrEnum):
    ONNX = "onnx"
    TORCH = "torch"

    @property
    def runtime(self) -> RuntimeSpec:
        return ONNX_EMBEDDINGS_RUNTIME if self is Embedder.ONNX else TORCH_EMBEDDINGS_RUNTIME


DEFAULT_EMBEDDER = Embedder.ONNX


def embedder_from_env() -> Embedder:
    """``CONTEXT_ENGINE_EMBEDDER`` (``onnx`` or ``torch``), the default when unset."""
    value = os.environ.get(EMBEDDER_ENV, "").strip().lower()
    if not value:
        return DEFAULT_EMBEDDER
    try:
        return Embedder(value)
    except ValueError:
        choices = ", ".join(e.value for e in Embedder)
        raise ProvisioningError(f"{EMBEDDER_ENV}={value!r}: expected one of {choices}") from None
