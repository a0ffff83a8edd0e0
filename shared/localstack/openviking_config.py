"""Generate OpenViking's ``ov.conf`` for the local stack, and decide whether memory extraction is on."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from shared.localstack.errors import LocalStackError
from shared.localstack.layout import OpenVikingDataLayout
from shared.localstack.pins import EMBEDDING_DIMENSION, EMBEDDING_MODEL_NAME

LLM_BASE_URL_ENV = "CONTEXT_ENGINE_LLM_BASE_URL"
LLM_MODEL_ENV = "CONTEXT_ENGINE_LLM_MODEL"
LLM_API_KEY_ENV = "CONTEXT_ENGINE_LLM_API_KEY"
LLM_LITELLM_MODEL_ENV = "CONTEXT_ENGINE_LLM_LITELLM_MODEL"

AuthMode = Literal["dev", "api_key", "trusted"]


class ConfigError(LocalStackError):
    """The environment or arguments describe an unusable OpenViking configuration."""


@dataclass(frozen=True)
class LlmSettings:
    """The chat model OpenViking uses for working-memory summaries and memory extraction."""

    provider: Literal["openai", "litellm"]
    """``openai``: any OpenAI-compatible endpoint; ``litellm``: a LiteLLM model string."""
    model: str
    """Model name sent to the endpoint (for litellm, e.g. ``openai/gpt-4o-mini``)."""
    api_base: str | None = None
    """Base URL ending in ``/v1`` (required for ``openai``; optional for litellm)."""
    api_key: str | None = None
    """Key for the endpoint; OpenViking's openai provider needs a non-empty one."""

    def describe(self) -> str:
        where = f" at {self.api_base}" if self.api_base else ""
        return f"{self.provider} model {self.model!r}{where}"


@dataclass(frozen=True)
class AuthSettings:
    """How OpenViking authenticates callers."""

    mode: AuthMode = "dev"
    """``dev`` (no keys, loopback only), ``api_key`` (user keys) or ``trusted`` (root key + headers)."""
    root_api_key: str | None = None
    """Required for ``api_key`` and ``trusted``."""

    def __post_init__(self) -> None:
        if self.mode != "dev" and not self.root_api_key:
            raise ConfigError(f"auth mode {self.mode!r} needs a root_api_key")


def llm_settings_from_env(env: Mapping[str, str] | None = None) -> LlmSettings | None:
    """Read the optional LLM from ``CONTEXT_ENGINE_LLM_*``; None when none is configured."""
    values = os.environ if env is None else env
    base_url = values.get(LLM_BASE_URL_ENV, "").strip() or None
    model = values.get(LLM_MODEL_ENV, "").strip() or None
    api_key = values.get(LLM_API_KEY_ENV, "").strip() or None
    litellm_model = values.get(LLM_LITELLM_MODEL_ENV, "").strip() or None
    if litellm_model:
        return LlmSettings("litellm", litellm_model, api_base=base_url, api_key=api_key)
    if base_url is None and model is None:
        return None
    if base_url is None or model is None:
        raise ConfigError(f"set both {LLM_BASE_URL_ENV} and {LLM_MODEL_ENV} (or {LLM_LITELLM_MODEL_ENV})")
    return LlmSettings("openai", model, api_base=base_url, api_key=api_key or "unused")


def extraction_enabled(llm: LlmSettings | None) -> bool:
    """Memory extraction runs on commit only when an LLM is configured."""
    return llm is not None


def describe_extraction(llm: LlmSettings | None) -> str:
    """One plain sentence for start-up logs and health details."""
    if llm is None:
        return (
            "memory extraction: OFF (no LLM configured; set "
            f"{LLM_BASE_URL_ENV} + {LLM_MODEL_ENV}, or {LLM_LITELLM_MODEL_ENV})"
        )
    return f"memory extraction: ON ({llm.describe()})"


def build_openviking_config(
    *,
    port: int,
    workspace: Path,
    log_file: Path,
    embeddings_api_base: str,
    llm: LlmSettings | None,
    auth: AuthSettings,
    usage_audit: bool = False,
) -> dict[str, object]:
    """The ov.conf document as a dict (see the 0.5.2 API reference, section 11.1).

    `usage_audit` (OpenViking's default: on) records every request into a SQLite store of
    per-account usage and audit rows, which the engine never reads; off, a read costs OpenViking
    a quarter less CPU, a write 13-24 % less and a listing half (`python -m
    tests.bench.openviking_costs` measures both)."""
    server: dict[str, object] = {"host": "127.0.0.1", "port": port, "auth_mode": auth.mode}
    if not usage_audit:
        server["observability"] = {"usage_audit": {"enabled": False}}
    if auth.root_api_key:
        server["root_api_key"] = auth.root_api_key
    config: dict[str, object] = {
        "server": server,
        "storage": {"workspace": str(workspace)},
        "log": {"level": "INFO", "output": str(log_file)},
        "embedding": {
            "dense": {
                "provider": "openai",
                "model": EMBEDDING_MODEL_NAME,
                "api_base": embeddings_api_base,
                "api_key": "local",
                "dimension": EMBEDDING_DIMENSION,
                "input": "text",
            }
        },
    }
    if llm is None:
        config["memory"] = {"extraction_enabled": False}
        config["retrieval"] = {"enable_intent": False}
    else:
        vlm: dict[str, object] = {
            "provider": llm.provider,
            "model": llm.model,
            "max_retries": 0,
            "timeout": 30,
        }
        if llm.api_base:
            vlm["api_base"] = llm.api_base
        if llm.api_key:
            vlm["api_key"] = llm.api_key
        config["vlm"] = vlm
    return config


def write_openviking_config(
    data: OpenVikingDataLayout,
    *,
    port: int,
    embeddings_api_base: str,
    llm: LlmSettings | None,
    auth: AuthSettings,
    usage_audit: bool = False,
) -> Path:
    """Write ``ov.conf`` into the instance's data dir (creating it); return its path."""
    data.workspace.mkdir(parents=True, exist_ok=True)
    data.home.mkdir(parents=True, exist_ok=True)
    config = build_openviking_config(
        port=port,
        workspace=data.workspace,
        log_file=data.server_log,
        embeddings_api_base=embeddings_api_base,
        llm=llm,
        auth=auth,
        usage_audit=usage_audit,
    )
    data.config_file.write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return data.config_file
