"""SIGUSR1 logs a service's pending asyncio tasks with the await each one waits on."""

from __future__ import annotations

import asyncio
import logging
import os

import pytest

from shared.runtime.task_dump import DUMP_SIGNAL, dump_tasks, install_task_dump, remove_task_dump


async def _waits_for_a_lease_that_never_comes(event: asyncio.Event) -> None:
    await event.wait()


async def test_a_stuck_task_is_logged_with_the_frame_it_waits_in(caplog: pytest.LogCaptureFixture) -> None:
    never = asyncio.Event()
    stuck = asyncio.create_task(_waits_for_a_lease_that_never_comes(never), name="compact-cp-stuck")
    await asyncio.sleep(0)
    try:
        with caplog.at_level(logging.WARNING, logger="shared.runtime.task_dump"):
            count = dump_tasks()
        assert count >= 2  # the stuck task and this test's own
        dumped = "\n".join(r.getMessage() for r in caplog.records)
        assert "task compact-cp-stuck:" in dumped
        assert "_waits_for_a_lease_that_never_comes" in dumped
    finally:
        stuck.cancel()


async def test_the_signal_triggers_the_dump(caplog: pytest.LogCaptureFixture) -> None:
    loop = asyncio.get_running_loop()
    install_task_dump(loop)
    try:
        with caplog.at_level(logging.WARNING, logger="shared.runtime.task_dump"):
            os.kill(os.getpid(), DUMP_SIGNAL)
            for _ in range(100):
                await asyncio.sleep(0.01)
                if any("asyncio tasks pending" in r.getMessage() for r in caplog.records):
                    break
        assert any("asyncio tasks pending" in r.getMessage() for r in caplog.records)
    finally:
        remove_task_dump(loop)
