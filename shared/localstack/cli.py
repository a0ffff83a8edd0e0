"""``python -m shared.localstack install|up|status|down``."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from types import FrameType

import httpx

from shared.localstack.embedders import embedder_from_env
from shared.localstack.errors import LocalStackError
from shared.localstack.layout import OpenVikingDataLayout, StackLayout
from shared.localstack.processes import group_alive
from shared.localstack.runtimes import OPENVIKING_RUNTIME, is_provisioned, provision
from shared.localstack.stack import (
    DEFAULT_EMBEDDINGS_PORT,
    DEFAULT_OPENVIKING_PORT,
    LocalStack,
    StackSettings,
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m shared.localstack", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("install", help="provision the private venvs (idempotent)")
    up = commands.add_parser("up", help="start embeddings + OpenViking and wait; Ctrl-C stops both")
    up.add_argument("--openviking-port", type=int, default=DEFAULT_OPENVIKING_PORT, help="0 = any free port")
    up.add_argument("--embeddings-port", type=int, default=DEFAULT_EMBEDDINGS_PORT, help="0 = any free port")
    commands.add_parser("status", help="runtimes installed? processes running? OpenViking healthy?")
    commands.add_parser("down", help="stop processes left running by an earlier 'up'")
    args = parser.parse_args(argv)
    layout = StackLayout.from_env()
    try:
        if args.command == "install":
            for spec in (embedder_from_env().runtime, OPENVIKING_RUNTIME):
                provision(layout, spec)
            return 0
        if args.command == "up":
            return _up(layout, args.openviking_port, args.embeddings_port)
        if args.command == "status":
            return _status(layout)
        return _down(layout)
    except LocalStackError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def _up(layout: StackLayout, openviking_port: int, embeddings_port: int) -> int:
    settings = replace(
        StackSettings.from_env(),
        layout=layout,
        openviking_port=openviking_port,
        embeddings_port=embeddings_port,
    )
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    stopped = threading.Event()
    try:
        with LocalStack(settings) as stack:
            print(f"OpenViking  {stack.openviking_url}", flush=True)
            print(f"Embeddings  {stack.embeddings_url}", flush=True)
            print(stack.extraction_description, flush=True)
            print("Ctrl-C stops everything.", flush=True)
            stopped.wait()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    return 0


def _raise_keyboard_interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _status(layout: StackLayout) -> int:
    for spec in (embedder_from_env().runtime, OPENVIKING_RUNTIME):
        state = "installed" if is_provisioned(layout, spec) else "NOT installed"
        print(f"runtime {spec.name:<15} {state} ({layout.venvs_dir / spec.name})")
    for name, pid_file in _pid_files(layout).items():
        pid = _read_pid(pid_file)
        running = pid is not None and group_alive(pid)
        print(f"process {name:<11} {'running, pid ' + str(pid) if running else 'not running'}")
    config = OpenVikingDataLayout(layout.data_dir / "openviking").config_file
    if config.is_file():
        ov_conf = json.loads(config.read_text(encoding="utf-8"))
        port = ov_conf["server"]["port"]
        extraction = ov_conf.get("memory", {}).get("extraction_enabled", True)
        llm = ov_conf.get("vlm", {}).get("model", "")
        print(
            f"memory extraction {'ON with LLM ' + llm if extraction and llm else 'OFF (no LLM configured)'}"
        )
        url = f"http://127.0.0.1:{port}/health"
        try:
            health = httpx.get(url, timeout=2.0).json()
            print(f"openviking  {url}: {health}")
        except httpx.HTTPError as error:
            print(f"openviking  {url}: unreachable ({type(error).__name__})")
    return 0


def _down(layout: StackLayout) -> int:
    for name, pid_file in _pid_files(layout).items():
        pid = _read_pid(pid_file)
        if pid is not None and group_alive(pid):
            print(f"stopping {name} (process group {pid})")
            os.killpg(pid, signal.SIGTERM)
        pid_file.unlink(missing_ok=True)
    return 0


def _pid_files(layout: StackLayout) -> dict[str, Path]:
    return {
        "embeddings": layout.data_dir / "embeddings" / "embeddings.pid",
        "openviking": layout.data_dir / "openviking" / "openviking.pid",
    }


def _read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
