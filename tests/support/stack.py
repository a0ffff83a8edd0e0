"""Typed values of the stack fixtures in tests/conftest.py (import these for annotations)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.support.standin_llm import StandinLlm


@dataclass(frozen=True)
class EmbeddingsEndpoint:
    """The shared local embedding server (OpenAI-compatible)."""

    base_url: str
    """e.g. ``http://127.0.0.1:41234/v1``; POST ``{base_url}/embeddings``."""
    model: str
    dimension: int
    pid: int | None
    """Process group id, or None when an external server was reused."""


@dataclass(frozen=True)
class OpenVikingEndpoint:
    """One running OpenViking server on a throwaway workspace (auth mode dev)."""

    base_url: str
    """e.g. ``http://127.0.0.1:41235`` (API under ``/api/v1``)."""
    data_dir: Path
    """Holds ov.conf, the workspace, logs."""
    log_file: Path
    """OpenViking's own log."""
    extraction_enabled: bool
    pid: int


@dataclass(frozen=True)
class OpenVikingWithLlm(OpenVikingEndpoint):
    """OpenViking wired to the stand-in LLM: extraction on, working memory usable."""

    llm: StandinLlm


@dataclass(frozen=True)
class RemoteOpenViking(OpenVikingEndpoint):
    """OpenViking as a remote deployment runs it: `api_key` or `trusted` auth with a root key."""

    auth_mode: str
    root_api_key: str
