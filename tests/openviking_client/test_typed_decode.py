"""`unwrap_as` (find's answer decoded and validated in one pass over its bytes) gives exactly what
the general path gives (`unwrap`, then `parse_result` with nulls as missing), for any answer:
nulls anywhere, unknown keys, wrong types, error envelopes, HTTP errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.errors import BackendError
from shared.openviking.envelope import unwrap, unwrap_as
from shared.openviking.http import HttpResponse
from shared.openviking.models._base import parse_result
from shared.openviking.models.search import FindResult

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False), st.text(max_size=8)
)
tags = st.one_of(st.none(), st.lists(st.one_of(st.text(max_size=6), st.none()), max_size=3), scalars)
hits = st.fixed_dictionaries(
    {"uri": st.one_of(st.text(min_size=1, max_size=12), st.none())},
    optional={
        "context_type": st.one_of(st.sampled_from(["memory", "resource"]), st.none()),
        "level": st.one_of(st.integers(0, 2), scalars),
        "score": st.one_of(st.floats(-1, 2), scalars),
        "abstract": st.one_of(st.text(max_size=20), scalars),
        "tags": tags,
        "content": st.one_of(st.text(max_size=10), st.none()),
        "time_score": scalars,
    },
)
results = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {},
        optional={
            "memories": st.one_of(st.lists(hits, max_size=4), st.none()),
            "resources": st.one_of(st.lists(hits, max_size=2), st.none()),
            "total": st.one_of(st.integers(0, 9), st.none()),
        },
    ),
    scalars,
)
envelopes = st.fixed_dictionaries(
    {"result": results},
    optional={
        "status": st.sampled_from(["ok", "error"]),
        "error": st.one_of(
            st.none(), st.fixed_dictionaries({"code": st.just("NOT_FOUND"), "message": st.text()})
        ),
        "telemetry": st.none(),
    },
)


def _outcome(decode: Any) -> Any:
    try:
        return decode()
    except BackendError as exc:
        return (type(exc).__name__, exc.http_status, exc.code)


@settings(max_examples=500, deadline=None)
@given(envelope=envelopes, status=st.sampled_from([200, 200, 200, 404, 503]))
def test_one_pass_decode_equals_the_general_path(envelope: dict[str, Any], status: int) -> None:
    response = HttpResponse(status, "", json.dumps(envelope).encode())
    general = _outcome(lambda: parse_result(FindResult, unwrap(response, enveloped=True).result, "find"))
    assert _outcome(lambda: unwrap_as(response, FindResult, "find")) == general


def test_nulls_take_the_defaults() -> None:
    body = {
        "status": "ok",
        "result": {"memories": [{"uri": "u", "abstract": None, "tags": None}], "total": None},
    }
    found = unwrap_as(HttpResponse(200, "OK", json.dumps(body).encode()), FindResult, "find")
    assert found.memories[0].abstract == "" and found.memories[0].tags == [] and found.total == 0


def test_a_body_that_is_not_json_is_an_invalid_response() -> None:
    with pytest.raises(BackendError, match="non-JSON"):
        unwrap_as(HttpResponse(200, "OK", b"<html>"), FindResult, "find")
