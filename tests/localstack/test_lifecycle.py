"""LocalStack start/stop: nothing left behind, and a rerun reuses the data dir (workspace lock released)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from shared.localstack.layout import StackLayout
from shared.localstack.processes import group_alive
from shared.localstack.progress import silent
from shared.localstack.stack import LocalStack, StackSettings
from tests.support.stack import EmbeddingsEndpoint

pytestmark = pytest.mark.stack

MEMORY_URI = "viking://~/memories/notes/rerun.md"


async def test_stop_leaves_nothing_and_rerun_keeps_data(
    stack_layout: StackLayout, embeddings: EmbeddingsEndpoint, tmp_path: Path
) -> None:
    settings = StackSettings(
        layout=stack_layout,
        openviking_data_dir=tmp_path / "openviking",
        openviking_port=0,
        embeddings_url=embeddings.base_url,
        report=silent,
    )
    async with LocalStack(settings) as stack:
        pids = [process.pid for process in stack.processes]
        assert all(group_alive(pid) for pid in pids)
        async with httpx.AsyncClient(base_url=stack.openviking_url, timeout=120.0) as client:
            written = await client.post(
                "/api/v1/content/write",
                json={"uri": MEMORY_URI, "content": "The staging database lives in Frankfurt.", "wait": True},
            )
            assert written.status_code == httpx.codes.OK, written.text
    assert pids and not any(group_alive(pid) for pid in pids)
    assert not (tmp_path / "openviking" / "openviking.pid").exists()

    rerun_pids = await asyncio.to_thread(_rerun_and_read, settings)
    assert not any(group_alive(pid) for pid in rerun_pids)


def _rerun_and_read(settings: StackSettings) -> list[int]:
    """The sync API on the same data dir: the earlier write is still there."""
    with LocalStack(settings) as again:
        pids = [process.pid for process in again.processes]
        read = httpx.get(
            f"{again.openviking_url}/api/v1/content/read", params={"uri": MEMORY_URI}, timeout=60.0
        )
        assert read.status_code == httpx.codes.OK, read.text
        assert "Frankfurt" in read.json()["result"]
    return pids
