"""`bootstrap` on the real host (openclaw@2026.9.6): a session that already has history from
before the engine ran it (two embedded turns on the host's built-in engine, before the Gateway
starts) is imported once when the plugin's engine first runs it through the Gateway, before
that turn's commit; later turns import nothing more."""

from __future__ import annotations

import asyncio

import pytest
from contextengine.v1 import common_pb2

from tests.openclaw.engine_process import EngineProcess
from tests.openclaw.host import E2E_TIMEOUT_SECONDS, OpenClawHost
from tests.openclaw.scenarios import host_session_id, ok, stored_turns
from tests.support.stack import OpenVikingEndpoint

pytestmark = pytest.mark.stack

SESSION = "agent:main:e2e-history"
BEFORE = [
    "Before the engine: the release train leaves on Thursdays.",
    "Before the engine: freeze on Fridays.",
]
AFTER = ["With the engine: when does the release train leave?", "With the engine: thanks."]


def BEFORE_GATEWAY(host: OpenClawHost) -> None:  # noqa: N802 - the conftest's module hook
    for text in BEFORE:
        ok(host.agent_without_engine(SESSION, text))


@pytest.mark.timeout(E2E_TIMEOUT_SECONDS)
def test_a_session_with_history_is_imported_once_when_the_engine_first_runs_it(
    openclaw: OpenClawHost, engine: EngineProcess, openviking: OpenVikingEndpoint
) -> None:
    session_id = host_session_id(ok(openclaw.agent(SESSION, AFTER[0])))
    ok(openclaw.agent(SESSION, AFTER[1]))

    rows = sorted(asyncio.run(stored_turns(openviking, session_id)), key=lambda row: row[1].sequence)
    users = [
        t.message.content[0].text.text for _, t in rows if t.message.role == common_pb2.MESSAGE_ROLE_USER
    ]
    assert users == [*BEFORE, *AFTER], users
    imported = [p for p, t in rows if t.message.role == common_pb2.MESSAGE_ROLE_USER][:2]
    assert all("advancementKey" not in p for p in imported), "the history came from bootstrap's import"
    answers = [t for _, t in rows if t.message.role == common_pb2.MESSAGE_ROLE_ASSISTANT]
    assert len(answers) == 4, [a.message for a in answers]
