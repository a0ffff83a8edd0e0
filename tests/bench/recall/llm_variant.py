"""The engine over an OpenViking wired to the project's stand-in LLM (working-memory summaries and
memory extraction on), replaying the same histories: the "with an LLM" rows of the benchmark.

The stand-in is deterministic and small (tests/support/standin_llm.py): it extracts memories from
lines saying "prefer", "decide" or "remember" and writes a fixed-section summary, so these rows
show what summaries and extracted memories add on top of the turn index, not what a real model
would extract.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from shared.localstack.openviking_config import LlmSettings
from shared.localstack.stack import LocalStack, StackSettings
from tests.bench.engine import start_engine, stop_engine
from tests.bench.recall.dataset import UserHistory
from tests.bench.recall.replay import Answer, ReplayStats, connect, run_user
from tests.support.standin_llm import MODEL_ID, StandinLlm

VARIANT = "engine + stand-in LLM"


@contextmanager
def llm_openviking(embeddings_url: str, data_dir: Path) -> Iterator[str]:
    """A second OpenViking (own workspace) with the stand-in as its chat model; yields its URL."""
    with StandinLlm() as llm:
        settings = StackSettings(
            openviking_data_dir=data_dir,
            openviking_port=0,
            embeddings_url=embeddings_url,
            llm=LlmSettings("openai", MODEL_ID, api_base=llm.base_url, api_key="local"),
        )
        with LocalStack(settings) as stack:
            yield stack.openviking_url


async def llm_answers(
    openviking_url: str,
    log_dir: Path,
    histories: Sequence[UserHistory],
    *,
    budgets: Sequence[int],
    concurrency: int,
    engine_env: dict[str, str],
) -> list[Answer]:
    procs = start_engine(openviking_url, log_dir, engine_env)
    try:
        stubs, channels = connect(procs)
        answers: list[Answer] = []
        for history in histories:
            renamed = dataclasses.replace(history, user_id=f"{history.user_id}-llm")
            answers += await run_user(
                stubs, renamed, askers={VARIANT: stubs.assembly}, budgets=budgets, stats=ReplayStats(),
                concurrency=concurrency, openviking_url=openviking_url,
            )  # fmt: skip
        for channel in channels:
            await channel.close()
        return answers
    finally:
        stop_engine(procs)
