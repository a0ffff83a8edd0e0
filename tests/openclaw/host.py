"""A real OpenClaw host in a scratch folder: config, plugin install, Gateway, `openclaw agent`.

Everything OpenClaw writes (state, config, logs, its SQLite transcripts) stays under the
scratch folder: HOME, OPENCLAW_STATE_DIR, OPENCLAW_CONFIG_PATH and TMPDIR point there.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from shared.localstack.processes import free_port
from tests.openclaw.toolchain import PLUGIN_DIR, Toolchain

PLUGIN_ID = "viking-context-engine"
MODEL_PROVIDER = "local"
MODEL_ID = "m"
GATEWAY_START_SECONDS = 300.0
TURN_SECONDS = 180.0
E2E_TIMEOUT_SECONDS = 1800
"""One end-to-end test's limit: ~4 min on an idle machine, over 10 on a loaded 2-core one."""
GATEWAY_READY_MARKS = ("startup outcomes:", "[heartbeat] started")
RECALL_LIMIT = 3
"""The test plugin config's `recallLimit` (below the engine's default 6), sent with every call;
`tests/assembly/test_call_settings.py` shows what it limits."""


def openclaw_config(model_base_url: str, gateway_port: int, log_file: Path) -> dict[str, Any]:
    """The host's config before the plugin is installed: the stand-in model, no memory plugin."""
    zero = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    return {
        "models": {
            "mode": "merge",
            "providers": {
                MODEL_PROVIDER: {
                    "baseUrl": model_base_url,
                    "apiKey": "x",
                    "api": "openai-completions",
                    "models": [
                        {
                            "id": MODEL_ID,
                            "name": MODEL_ID,
                            "input": ["text"],
                            "contextWindow": 128000,
                            "maxTokens": 4096,
                            "cost": zero,
                        }
                    ],
                }
            },
        },
        "agents": {"defaults": {"model": {"primary": f"{MODEL_PROVIDER}/{MODEL_ID}"}}},
        "gateway": {"port": gateway_port, "mode": "local", "bind": "loopback"},
        "plugins": {"slots": {"memory": "none"}},
        "logging": {"file": str(log_file)},
    }


@dataclass
class AgentReply:
    returncode: int
    payload: dict[str, Any]
    stderr: str
    seconds: float

    @property
    def texts(self) -> list[str]:
        payloads = self.payload.get("payloads") or self.payload.get("result", {}).get("payloads") or []
        return [str(p.get("text", "")) for p in payloads if isinstance(p, dict)]


@dataclass
class OpenClawHost:
    toolchain: Toolchain
    root: Path
    model_base_url: str
    plugin_config: dict[str, Any]
    extra_env: dict[str, str] = field(default_factory=dict)
    gateway_port: int = field(default_factory=free_port)
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    gateway: subprocess.Popen[str] | None = None

    @property
    def config_path(self) -> Path:
        return self.root / "state" / "openclaw.json"

    def env(self) -> dict[str, str]:
        keep = {
            k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "OPENCLAW_", "CONTEXT_ENGINE_"))
        }
        tmp = self.root / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        return {
            **keep,
            "HOME": str(self.root / "home"),
            "TMPDIR": str(tmp),
            "OPENCLAW_STATE_DIR": str(self.root / "state"),
            "OPENCLAW_CONFIG_PATH": str(self.config_path),
            "OPENCLAW_GATEWAY_TOKEN": self.token,
            "PATH": f"{self.toolchain.bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "NO_COLOR": "1",
            **self.extra_env,
        }

    def run(
        self, *args: str, timeout: float = TURN_SECONDS, config: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """One `openclaw` command (with another config file than the host's when given)."""
        env = self.env() if config is None else {**self.env(), "OPENCLAW_CONFIG_PATH": str(config)}
        return subprocess.run(
            [str(self.toolchain.node), str(self.toolchain.openclaw), *args],
            check=False,
            env=env,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def setup(self) -> None:
        """Write the config, install the plugin from its folder, then give it its config."""
        (self.root / "home").mkdir(parents=True, exist_ok=True)
        self.config_path.parent.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            json.dumps(
                openclaw_config(self.model_base_url, self.gateway_port, self.root / "openclaw.log"), indent=2
            )
        )
        installed = self.run("plugins", "install", "-l", "--force", "--accept-capabilities", str(PLUGIN_DIR))
        assert installed.returncode == 0, installed.stdout + installed.stderr
        config = json.loads(self.config_path.read_text())
        entry = config["plugins"].setdefault("entries", {}).setdefault(PLUGIN_ID, {})
        entry["config"] = self.plugin_config
        assert config["plugins"]["slots"]["contextEngine"] == PLUGIN_ID, config["plugins"]
        self.config_path.write_text(json.dumps(config, indent=2))

    def start_gateway(self) -> None:
        log = (self.root / "gateway.log").open("w")
        self.gateway = subprocess.Popen(
            [
                str(self.toolchain.node),
                str(self.toolchain.openclaw),
                "gateway",
                "run",
                "--port",
                str(self.gateway_port),
                "--auth",
                "token",
                "--token",
                self.token,
            ],
            env=self.env(),
            cwd=self.root,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + GATEWAY_START_SECONDS
        while time.monotonic() < deadline:
            if self.gateway.poll() is not None:
                raise AssertionError(f"gateway exited:\n{self.gateway_log()[-4000:]}")
            log = self.gateway_log()
            # "listening" comes before channels and sidecars start; until their outcomes are
            # logged a client's connect is refused ("unavailable during gateway restart"), which
            # takes tens of seconds on a loaded machine
            if "server listening" in log and any(mark in log for mark in GATEWAY_READY_MARKS):
                return
            time.sleep(0.5)
        raise AssertionError(f"gateway did not start:\n{self.gateway_log()[-4000:]}")

    def gateway_log(self) -> str:
        path = self.root / "gateway.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop_gateway(self) -> None:
        """Stop the Gateway and every process it started (its own process group)."""
        if self.gateway is None:
            return
        try:
            os.killpg(self.gateway.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            self.gateway.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.gateway.pid, signal.SIGKILL)
            self.gateway.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):  # workers the Gateway left behind in its group
            os.killpg(self.gateway.pid, signal.SIGKILL)

    def agent(self, session_key: str, message: str, *flags: str, config: Path | None = None) -> AgentReply:
        started = time.monotonic()
        done = self.run(
            "agent",
            *flags,
            "--agent",
            "main",
            "--session-key",
            session_key,
            "--message",
            message,
            "--json",
            config=config,
        )
        try:
            payload = json.loads(done.stdout[done.stdout.index("{") :]) if "{" in done.stdout else {}
        except json.JSONDecodeError:
            payload = {"raw": done.stdout}
        return AgentReply(done.returncode, payload, done.stderr, time.monotonic() - started)

    def agent_without_engine(self, session_key: str, message: str) -> AgentReply:
        """One embedded (`--local`) turn on the host's built-in engine: the same state, a config
        whose context-engine slot is `legacy` (a session with history from before the plugin)."""
        config = json.loads(self.config_path.read_text())
        config["plugins"]["slots"]["contextEngine"] = "legacy"
        legacy_config = self.root / "legacy-openclaw.json"
        legacy_config.write_text(json.dumps(config, indent=2))
        return self.agent(session_key, message, "--local", config=legacy_config)

    def compact(self, session_key: str) -> subprocess.CompletedProcess[str]:
        return self.run("sessions", "compact", session_key, "--json")
