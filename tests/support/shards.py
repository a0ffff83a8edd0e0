"""Several real local OpenViking servers (one per shard) over one embedding server."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path

from shared.localstack.layout import StackLayout
from shared.localstack.progress import Reporter, print_progress
from shared.localstack.stack import LocalStack, StackSettings
from shared.openviking.shards import Shard, ShardMap

STARTUP_TIMEOUT_SECONDS = 300.0


class OpenVikingShards:
    """Running shards by name; `stop(name)` takes one down (its process gone, port closed)."""

    def __init__(self, stacks: dict[str, LocalStack]) -> None:
        self.stacks = stacks
        self.shard_map = ShardMap(tuple(Shard(n, s.openviking_url) for n, s in stacks.items()))

    @property
    def env_value(self) -> str:
        """`CONTEXT_ENGINE_OPENVIKING_SHARDS`: `name=url,name=url`."""
        return ",".join(f"{s.name}={s.base_url}" for s in self.shard_map.shards)

    def stop(self, name: str) -> None:
        self.stacks[name].stop()

    def pids(self) -> dict[str, int]:
        return {name: stack.processes[-1].pid for name, stack in self.stacks.items() if stack.processes}


@contextmanager
def running_shards(
    names: Sequence[str],
    *,
    layout: StackLayout,
    embeddings_url: str,
    data_root: Path,
    report: Reporter = print_progress,
) -> Iterator[OpenVikingShards]:
    """Start one OpenViking per name (in parallel, each on a free port and its own data dir)."""
    stacks = {
        name: LocalStack(
            StackSettings(
                layout=layout,
                openviking_data_dir=data_root / name,
                openviking_port=0,
                embeddings_url=embeddings_url,
                startup_timeout_seconds=STARTUP_TIMEOUT_SECONDS,
                report=report,
            )
        )
        for name in names
    }
    with ExitStack() as stack:
        for running in stacks.values():
            stack.callback(running.stop)
        with ThreadPoolExecutor(len(stacks)) as pool:
            for started in [pool.submit(s.start) for s in stacks.values()]:
                started.result()
        yield OpenVikingShards(stacks)
