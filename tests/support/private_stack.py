"""A throwaway local stack (embeddings + OpenViking on free ports, data in a temp dir) for the
standalone benches."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from shared.localstack.stack import LocalStack, StackSettings


@contextmanager
def private_stack(embeddings_url: str | None = None) -> Iterator[LocalStack]:
    """A started stack; `embeddings_url` reuses a running embedding server (.../v1)."""
    with tempfile.TemporaryDirectory() as workdir:
        stack = LocalStack(
            StackSettings(
                openviking_data_dir=Path(workdir) / "openviking",
                openviking_port=0,
                embeddings_port=0,
                embeddings_url=embeddings_url,
            )
        )
        with stack:
            yield stack
