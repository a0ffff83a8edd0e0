"""The three services as separate processes (`python -m shared.runtime.main --service X`) and
their peak memory."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shared.localstack.processes import free_port
from tests.bench.common import rounded

REPO = Path(__file__).resolve().parents[2]


GRPC_OPTIONS = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]


SERVICES = ("compaction", "capture", "assembly")


def vm_hwm_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = defaultdict(list)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children[ppid].append(int(entry.name))
    out: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            out.append(child)
            stack.append(child)
    return out


def peak_rss_mb(pid: int) -> dict[str, Any]:
    """VmHWM of the process and, separately, the sum over its descendants (if any)."""
    own = vm_hwm_kb(pid)
    kids = [k for k in (vm_hwm_kb(c) for c in descendants(pid)) if k]
    return {
        "pid": pid,
        "peak_rss_mb": rounded(own / 1024, 1) if own else None,
        "children_peak_rss_mb": rounded(sum(kids) / 1024, 1) if kids else 0.0,
    }


@dataclass
class EngineProcess:
    name: str
    port: int
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


def start_engine(
    openviking_url: str, log_dir: Path, extra_env: dict[str, str], services: Sequence[str] = SERVICES
) -> dict[str, EngineProcess]:
    ports = {name: free_port() for name in services}
    env = dict(os.environ)
    env.update(
        {
            "CONTEXT_ENGINE_BASE_URL": openviking_url,
            "CONTEXT_ENGINE_COMPACTION_TARGET": f"127.0.0.1:{ports.get('compaction', 0)}",
            "PYTHONUNBUFFERED": "1",
        }
    )
    for key in [k for k in env if k.startswith("OTEL_")]:
        env.pop(key)
    env.update(extra_env)
    procs: dict[str, EngineProcess] = {}
    for name in services:
        log_path = log_dir / f"engine-{name}-{ports[name]}.log"
        handle = log_path.open("wb")
        process = subprocess.Popen(
            [sys.executable, "-m", "shared.runtime.main", "--service", name, "--port", str(ports[name])],
            cwd=REPO,
            env=env,
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
        procs[name] = EngineProcess(name, ports[name], process, log_path)
    deadline = time.monotonic() + 90
    pending = set(procs)
    while pending:
        for name in list(pending):
            proc = procs[name]
            if proc.process.poll() is not None:
                stop_engine(procs)
                tail = proc.log_path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"engine {name} exited with {proc.process.returncode}:\n{tail}")
            if "listening on" in proc.log_path.read_text(errors="replace"):
                pending.discard(name)
        if time.monotonic() > deadline:
            stop_engine(procs)
            raise RuntimeError(f"engine services not ready after 90 s: {sorted(pending)}")
        time.sleep(0.2)
    return procs


def stop_engine(procs: dict[str, EngineProcess]) -> None:
    for proc in procs.values():
        if proc.process.poll() is None:
            proc.process.terminate()
    for proc in procs.values():
        try:
            proc.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.process.kill()
