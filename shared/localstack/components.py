"""How to launch each stack component: the embedding server and OpenViking."""

from __future__ import annotations

from pathlib import Path

from shared.localstack.layout import OpenVikingDataLayout
from shared.localstack.pins import EMBEDDING_MODEL_NAME
from shared.localstack.processes import ProcessSpec
from shared.localstack.runtimes import embedding_model_dir

EMBEDDINGS_ENV = {"HF_HUB_OFFLINE": "1", "DO_NOT_TRACK": "1", "INFINITY_ANONYMOUS_USAGE_STATS": "0"}


def embeddings_base_url(port: int) -> str:
    """OpenAI-compatible base URL (``POST {base}/embeddings``)."""
    return f"http://127.0.0.1:{port}/v1"


def openviking_base_url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def embeddings_process(venv: Path, port: int, log_dir: Path) -> ProcessSpec:
    """infinity_emb serving the bundled all-MiniLM-L6-v2 on CPU, offline."""
    argv = (
        str(venv / "bin" / "infinity_emb"),
        "v2",
        "--model-id",
        str(embedding_model_dir(venv)),
        "--served-model-name",
        EMBEDDING_MODEL_NAME,
        "--engine",
        "torch",
        "--device",
        "cpu",
        "--no-compile",
        "--no-trust-remote-code",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--url-prefix",
        "/v1",
    )
    return ProcessSpec(
        name="embeddings",
        argv=argv,
        ready_url=f"{embeddings_base_url(port)}/models",
        log_file=log_dir / "embeddings.log",
        env=EMBEDDINGS_ENV,
        pid_file=log_dir / "embeddings.pid",
    )


def openviking_process(venv: Path, data: OpenVikingDataLayout, port: int) -> ProcessSpec:
    """openviking-server on the ov.conf already written into ``data``."""
    return ProcessSpec(
        name="openviking",
        argv=(str(venv / "bin" / "openviking-server"), "--config", str(data.config_file)),
        ready_url=f"{openviking_base_url(port)}/health",
        log_file=data.stdout_log,
        env={"HOME": str(data.home), "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        pid_file=data.root / "openviking.pid",
    )
