"""A real engine (the three services in-process on the session's OpenViking) for the client
packages, and a scratch environment per package that has nothing of this repo but the package."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from shared.config import load_settings
from shared.runtime.main import start_host
from tests.support.stack import OpenVikingEndpoint

REPO = Path(__file__).resolve().parents[2]
README_TARGET = "127.0.0.1:50051"
"""The address the READMEs' snippets connect to (`make run`'s); tests point it at their engine."""


@pytest.fixture(scope="module")
async def engine_address(openviking: OpenVikingEndpoint) -> AsyncIterator[str]:
    settings = load_settings(
        environ={}, overrides={"baseUrl": openviking.base_url, "shutdownGraceSeconds": 1, "timeoutMs": 60_000}
    )
    host = await start_host(settings, "all", port=0)
    try:
        yield host.address
    finally:
        await host.stop()


def readme_snippet(readme: Path, language: str) -> str:
    """The README's one fenced `language` block that connects to the engine."""
    blocks = re.findall(rf"```{language}\n(.*?)```", readme.read_text(encoding="utf-8"), re.S)
    connecting = [block for block in blocks if README_TARGET in block]
    assert len(connecting) == 1, f"{readme}: expected one {language} block connecting to {README_TARGET}"
    return connecting[0]
