"""How to launch each stack component: the embedding server and OpenViking."""

from __future__ import annotations

from pathlib import Path

from shared.localstack.embedders import Embedder
from shared.localstack.layout import OpenVikingDataLayout
from shared.localstack.pins import EMBEDDING_MODEL_NAME
from shared.localstack.processes import ProcessSpec
from shared.localstack.runtimes import BUILD_DIR, embedding_model_dir

EMBEDDINGS_ENV = {"HF_HUB_OFFLINE": "1", "DO_NOT_TRACK": "1", "INFINITY_ANONYMOUS_USAGE_STATS": "0"}


def embeddings_base_url(port: int) -> str:
    """OpenAI-compatible base URL (``POST {base}/embeddings``)."""
    return f"http://127.0.0.1:{port}/v1"


def openviking_base_url(port: int) -> str:
    return f"http://127.0.0.1:{port}"


def embeddings_process(embedder: Embedder, venv: Path, port: int, log_dir: Path) -> ProcessSpec:
    """The chosen embedding server on ``venv`` (``embedder.runtime``), offline, on CPU."""
    argv = _onnx_argv(venv, port) if embedder is Embedder.ONNX else _torch_argv(venv, port)
    return ProcessSpec(
        name="embeddings",
        argv=argv,
        ready_url=f"{embeddings_base_url(port)}/models",
        log_file=log_dir / "embeddings.log",
        env=EMBEDDINGS_ENV,
        pid_file=log_dir / "embeddings.pid",
    )


def _listen(port: int) -> tuple[str, ...]:
    return ("--host", "127.0.0.1", "--port", str(port), "--url-prefix", "/v1")


def _onnx_argv(venv: Path, port: int) -> tuple[str, ...]:
    """``onnx_embeddings.py`` on the model ``onnx_build.py`` wrote at install time."""
    return (
        str(venv / "bin" / "python"),
        "-P",
        str(Path(__file__).with_name("onnx_embeddings.py")),
        "--model-dir",
        str(venv / BUILD_DIR),
        "--served-model-name",
        EMBEDDING_MODEL_NAME,
        *_listen(port),
    )


def _torch_argv(venv: Path, port: int) -> tuple[str, ...]:
    """infinity_emb serving the bundled all-MiniLM-L6-v2."""
    return (
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
        *_listen(port),
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
