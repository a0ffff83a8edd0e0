"""The user's tool-experience document as capture replicas write it (real OpenViking): a replica
that wrote it last writes the next lesson without reading it first, and a lesson another replica
wrote in between is never lost."""

from __future__ import annotations

import uuid

import pytest
from contextengine.v1 import common_pb2

from shared.domain.documents import DocumentStore, DocumentUpdates
from shared.domain.tool_experience import read_tool_records, record_tool_outcomes
from shared.openviking.client import OpenVikingClient
from shared.openviking.tenant import Tenant
from tests.capture.messages import tool_call, tool_result, user
from tests.support.call_log import CallLog

pytestmark = pytest.mark.stack


def calls_of(tool: str, n: int, *, failed: bool) -> list[common_pb2.ConversationMessage]:
    return [
        user(f"run {tool} #{n}"),
        tool_call(f"{tool}-{n}", tool, f'{{"n": {n}}}'),
        tool_result(f"{tool}-{n}", tool, "boom" if failed else "ok", is_error=failed),
    ]


async def test_the_replica_that_wrote_last_writes_without_reading(
    logged: tuple[CallLog, OpenVikingClient],
) -> None:
    log, client = logged
    tenant = Tenant("acme", f"tools-{uuid.uuid4().hex[:8]}")
    one, other = DocumentUpdates(DocumentStore(client)), DocumentUpdates(DocumentStore(client))

    await record_tool_outcomes(one, tenant, calls_of("sql", 1, failed=True))
    mark = log.mark()
    await record_tool_outcomes(one, tenant, calls_of("sql", 2, failed=False))
    assert [c.route for c in log.calls[mark:]] == ["/api/v1/content/batch-write"]

    # Another replica's lesson in between: `one`'s memo is stale, its swap refused, nothing lost.
    await record_tool_outcomes(other, tenant, calls_of("shell", 3, failed=True))
    mark = log.mark()
    await record_tool_outcomes(one, tenant, calls_of("sql", 4, failed=True))
    routes = [c.route for c in log.calls[mark:]]
    assert routes.count("/api/v1/content/read") == 1 and routes.count("/api/v1/content/batch-write") == 2
    records = await read_tool_records(DocumentStore(client), tenant)
    assert (records["sql"].failures, records["sql"].successes, records["sql"].awaiting_fix) == (2, 1, True)
    assert records["shell"].failures == 1


async def test_a_turn_whose_calls_worked_as_before_writes_nothing(
    logged: tuple[CallLog, OpenVikingClient],
) -> None:
    log, client = logged
    tenant = Tenant("acme", f"tools-{uuid.uuid4().hex[:8]}")
    one = DocumentUpdates(DocumentStore(client))
    await record_tool_outcomes(one, tenant, calls_of("sql", 1, failed=True))
    await record_tool_outcomes(one, tenant, calls_of("sql", 2, failed=False))  # the fix
    for n in (3, 4):  # worked again: nothing to learn, decided on a fresh read, nothing written
        mark = log.mark()
        await record_tool_outcomes(
            one, tenant, [*calls_of("sql", n, failed=False), *calls_of("ls", n, failed=False)]
        )
        assert [c.route for c in log.calls[mark:]] == ["/api/v1/content/read"]
    records = await read_tool_records(DocumentStore(client), tenant)
    assert set(records) == {"sql"}  # a tool that never failed has nothing to tell
    assert (records["sql"].failures, records["sql"].successes, records["sql"].awaiting_fix) == (1, 1, False)


async def test_a_fix_is_kept_when_another_replica_saw_the_failure(
    logged: tuple[CallLog, OpenVikingClient],
) -> None:
    """`one` remembers sql as fixed; `other` records a new failure: `one`'s next success of sql
    is that failure's fix, though its memo says there is nothing to learn."""
    _, client = logged
    tenant = Tenant("acme", f"tools-{uuid.uuid4().hex[:8]}")
    one, other = DocumentUpdates(DocumentStore(client)), DocumentUpdates(DocumentStore(client))
    await record_tool_outcomes(one, tenant, calls_of("sql", 1, failed=True))
    await record_tool_outcomes(one, tenant, calls_of("sql", 2, failed=False))
    await record_tool_outcomes(other, tenant, calls_of("sql", 3, failed=True))
    await record_tool_outcomes(one, tenant, calls_of("sql", 4, failed=False))
    records = await read_tool_records(DocumentStore(client), tenant)
    assert (records["sql"].failures, records["sql"].successes, records["sql"].awaiting_fix) == (2, 2, False)
