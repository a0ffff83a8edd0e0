"""ov.conf generation and the LLM / extraction decision."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shared.localstack.layout import OpenVikingDataLayout
from shared.localstack.openviking_config import (
    AuthSettings,
    ConfigError,
    LlmSettings,
    build_openviking_config,
    describe_extraction,
    extraction_enabled,
    llm_settings_from_env,
    write_openviking_config,
)


def test_no_llm_env_means_extraction_off() -> None:
    assert llm_settings_from_env({}) is None
    assert extraction_enabled(None) is False
    assert "OFF" in describe_extraction(None)


def test_openai_compatible_llm_from_env() -> None:
    llm = llm_settings_from_env(
        {"CONTEXT_ENGINE_LLM_BASE_URL": "http://h:1/v1", "CONTEXT_ENGINE_LLM_MODEL": "qwen"}
    )
    assert llm == LlmSettings("openai", "qwen", api_base="http://h:1/v1", api_key="unused")
    assert extraction_enabled(llm)
    assert "ON" in describe_extraction(llm)


def test_litellm_model_from_env() -> None:
    llm = llm_settings_from_env(
        {"CONTEXT_ENGINE_LLM_LITELLM_MODEL": "openai/gpt", "CONTEXT_ENGINE_LLM_API_KEY": "k"}
    )
    assert llm == LlmSettings("litellm", "openai/gpt", api_base=None, api_key="k")


def test_half_configured_llm_is_an_error() -> None:
    with pytest.raises(ConfigError, match="CONTEXT_ENGINE_LLM_MODEL"):
        llm_settings_from_env({"CONTEXT_ENGINE_LLM_BASE_URL": "http://h:1/v1"})


def test_keyed_auth_needs_root_key() -> None:
    with pytest.raises(ConfigError):
        AuthSettings("trusted")


def test_config_without_llm(tmp_path: Path) -> None:
    config = build_openviking_config(
        port=4321,
        workspace=tmp_path / "ws",
        log_file=tmp_path / "ov.log",
        embeddings_api_base="http://127.0.0.1:9/v1",
        llm=None,
        auth=AuthSettings(),
    )
    assert config["server"] == {
        "host": "127.0.0.1",
        "port": 4321,
        "auth_mode": "dev",
        "observability": {"usage_audit": {"enabled": False}},
    }
    assert config["memory"] == {"extraction_enabled": False}
    assert config["retrieval"] == {"enable_intent": False}
    assert "vlm" not in config
    dense = config["embedding"]["dense"]  # type: ignore[index]
    assert dense["dimension"] == 384
    assert dense["api_base"] == "http://127.0.0.1:9/v1"


def test_config_with_llm_and_api_key_auth(tmp_path: Path) -> None:
    data = OpenVikingDataLayout(tmp_path / "ov")
    path = write_openviking_config(
        data,
        port=1,
        embeddings_api_base="http://e/v1",
        llm=LlmSettings("openai", "m", api_base="http://l/v1", api_key="x"),
        auth=AuthSettings("api_key", root_api_key="root"),
        usage_audit=True,
    )
    config = json.loads(path.read_text())
    assert config["vlm"] == {
        "provider": "openai",
        "model": "m",
        "api_base": "http://l/v1",
        "api_key": "x",
        "max_retries": 0,
        "timeout": 30,
    }
    assert "memory" not in config
    assert config["server"]["root_api_key"] == "root"
    assert "observability" not in config["server"]  # usage_audit=True: OpenViking's own default
    assert config["storage"]["workspace"] == str(data.workspace)
    assert data.workspace.is_dir() and data.home.is_dir()
