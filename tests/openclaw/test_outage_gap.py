"""Issue 30, the outage gap, fast: the plugin's engine (built, in Node) and the real engine, with
the calls OpenClaw 2026.9.6 made in the real-host run (`test_openclaw_e2e`), ids included.

OpenClaw keys a turn's user message `"<runId>:user"`, in the transcript and on the commit's
admission; the commit's `advancementKey` (`logicalTurnId`) is another id. Engine down for D2
(its commitTurn fails) and D3 (run on the host's built-in engine: no call reaches the plugin);
back for D4, whose drain retries D2 first, then assemble sees D3 in the transcript. Every turn
must be stored once, in order - the old plugin acknowledged turns by `advancementKey`, found
none of them in the transcript, and stored 3 of the 4.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from shared.config import load_settings
from shared.localstack.processes import free_port
from shared.runtime.main import ServiceHost, start_host
from tests.openclaw.plugin_driver import HostTurns, call, drive
from tests.openclaw.scenarios import OUTAGE_MARKERS, assert_outage_stored, stored_turns
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack

SESSION_KEY = "agent:main:outage-gap"
FIRST = "Which database did we decide on for the billing service?"


async def test_a_turn_the_host_ran_without_the_engine_is_stored_after_the_outage(
    engine_in_process: ServiceHost, openviking: OpenVikingEndpoint
) -> None:
    session_id = f"outage-gap-{free_port()}"
    up = {"agentId": "main", "engine": {"target": engine_in_process.address}}
    down = {"agentId": "main", "engine": {"target": f"127.0.0.1:{free_port()}", "commitTurnDeadlineMs": 300}}
    host = HostTurns(session_id, SESSION_KEY)

    b1 = [host.assemble()]
    host.run("b1", FIRST)
    b1.append(host.commit("b1"))
    d2 = [host.assemble()]
    host.run("d2", f"{OUTAGE_MARKERS[0]}: the on-call rotation starts Monday.")
    d2.append(host.commit("d2"))
    d3 = [host.commit("d2")]  # the drain before D3 retries D2, fails: D3 runs on "legacy"
    host.run("d3", f"{OUTAGE_MARKERS[1]}: the pager number is 4711.")
    d4 = [host.commit("d2"), host.assemble()]  # the drain before D4 retries D2, then D4 runs
    host.run("d4", f"{OUTAGE_MARKERS[2]}: thanks, that is all.")
    d4.append(host.commit("d4"))

    results = await drive(up, [b1, (down, d2), (down, d3), d4])
    committed = {"value": {"status": "committed"}}
    assert [results[i] == committed for i in (1, 5, 7)] == [True] * 3, results
    assert "error" in results[3] and "error" in results[4], "D2's commit fails while the engine is down"

    assert_outage_stored(await stored_turns(openviking, session_id), session_id, "Which database")


async def test_the_first_commit_after_the_engine_is_back_reaches_it(
    openviking: OpenVikingEndpoint, tmp_path: Path
) -> None:
    """The host retries a failed commit right after the engine is back (1.8 s after, in a real
    run). The plugin's channel was then still backing off from its last failed connect, failed
    the call at once, and the host ran that turn on its built-in engine too."""
    port = free_port()
    host = HostTurns(f"reconnect-{port}", "agent:main:reconnect")
    host.run("r1", "A turn committed while the engine is down, then retried when it is back.")
    engine_up = tmp_path / "engine-up"
    config = {"agentId": "main", "engine": {"target": f"127.0.0.1:{port}", "commitTurnDeadlineMs": 8000}}
    turns = [[host.commit("r1")], [call("waitForFile", path=str(engine_up)), host.commit("r1")]]
    driving = asyncio.create_task(drive(config, turns))
    await asyncio.sleep(6)  # failed connects: the channel's backoff reaches its 2 s cap
    settings = load_settings(
        environ={}, overrides={"baseUrl": openviking.base_url, "shutdownGraceSeconds": 1}
    )
    engine = await start_host(settings, "all", port=port)
    try:
        engine_up.touch()
        results = await driving
    finally:
        await engine.stop()
    assert "error" in results[0], results
    assert results[2] == {"value": {"status": "committed"}}, results
