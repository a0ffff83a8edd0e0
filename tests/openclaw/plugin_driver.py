"""The built plugin's context engine driven from a test (`plugin_driver.mjs`), with the real
engine behind it: turns with OpenClaw's own call shapes, without the 650 MB host."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

from tests.openclaw.toolchain import build_plugin

DRIVER = Path(__file__).with_name("plugin_driver.mjs")
DRIVER_SECONDS = 120.0

Call = dict[str, Any]
Turn = list[Call] | tuple[dict[str, Any], list[Call]]
"""A turn's calls, or (the plugin config for this turn, its calls)."""


def call(method: str, **params: Any) -> Call:
    return {"method": method, "params": params}


async def drive(config: dict[str, Any], turns: list[Turn]) -> list[Any]:
    """Run `turns` (each its calls, or (config override, calls)) through the plugin, one engine
    per turn; each call's result (`{"value": ...}` or `{"error": message}`), in order."""
    build_plugin()
    node = shutil.which("node")
    assert node, "node is needed to run the plugin"
    script = {
        "config": config,
        "turns": [{"config": t[0], "calls": t[1]} if isinstance(t, tuple) else {"calls": t} for t in turns],
    }
    process = await asyncio.create_subprocess_exec(
        node,
        str(DRIVER),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(json.dumps(script).encode()), DRIVER_SECONDS)
    assert process.returncode == 0, err.decode(errors="replace")[-3000:]
    results = json.loads(out)
    assert isinstance(results, list)
    return results


class HostTurns:
    """One OpenClaw session's turns, shaped as the host passes them (runs, anchors, messages)."""

    def __init__(self, session_id: str, session_key: str) -> None:
        self.session_id = session_id
        self.session_key = session_key
        self.transcript: list[dict[str, Any]] = []
        self.commits: dict[str, dict[str, Any]] = {}
        self.clock = 1_796_518_202_036

    def run(self, name: str, text: str, answer: str = "") -> str:
        """The turn `name` ran (user message and answer now in the transcript); its commit params."""
        self.clock += 1000
        where = {"agentId": "main", "sessionId": self.session_id, "sessionKey": self.session_key}
        position = len(self.transcript)
        messages = [
            {"role": "user", "content": text, "timestamp": self.clock, "idempotencyKey": f"run-{name}:user"},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": answer or f"Stand-in answer to {name}."}],
                "api": "openai-completions",
                "provider": "local",
                "model": "m",
                "stopReason": "stop",
                "timestamp": self.clock + 500,
            },
        ]
        self.transcript.extend(messages)
        self.commits[name] = {
            "advancementKey": f"lt-{name}",
            "admission": {
                **where,
                "entryId": f"entry-{name}-user",
                "activeMessagePosition": position,
                "idempotencyKey": f"run-{name}:user",
                "logicalTurnId": f"lt-{name}",
                "role": "user",
            },
            "terminal": {**where, "entryId": f"entry-{name}-answer", "activeMessagePosition": position + 1},
            "messages": messages,
            "sessionId": self.session_id,
            "sessionKey": self.session_key,
        }
        return name

    def assemble(self, prompt: str = "-") -> Call:
        return call(
            "assemble",
            sessionId=self.session_id,
            sessionKey=self.session_key,
            messages=list(self.transcript),
            prompt=prompt,
        )

    def commit(self, name: str) -> Call:
        return call("commitTurn", **self.commits[name])
