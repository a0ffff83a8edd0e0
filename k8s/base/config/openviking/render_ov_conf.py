"""Render OpenViking's ov.conf from ConfigMap fragments and Secret files (runs in an init container).

Fragments ``*.json`` in the template directory are deep-merged in file-name order (the base ships
``00-ov.conf.json``; the llm-extraction component adds ``50-llm.json``). Secrets are read from
files, never from the environment:

* ``<secrets>/root-api-key/root-api-key``  -> ``server.root_api_key`` (required unless auth_mode=dev)
* ``<secrets>/llm/api-key``                -> ``vlm.api_key`` (only if a ``vlm`` section exists)

The result is written with mode 0600 to the output path. Consistency is checked up front so a bad
combination fails the pod at start with a clear message instead of failing every commit later.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def read_secret(path: Path) -> str | None:
    if not path.is_file():
        return None
    value = path.read_text(encoding="utf-8").strip()
    return value or None


def render(template_dir: Path, secrets_dir: Path) -> dict[str, Any]:
    conf: dict[str, Any] = {}
    for fragment in sorted(template_dir.glob("*.json")):
        conf = deep_merge(conf, json.loads(fragment.read_text(encoding="utf-8")))

    problems: list[str] = []
    server = conf.setdefault("server", {})
    auth_mode = server.get("auth_mode", "api_key")
    if auth_mode == "dev" and str(server.get("host", "127.0.0.1")) not in LOOPBACK_HOSTS:
        problems.append("server.auth_mode=dev only starts on a loopback host; use trusted or api_key")
    root_key = read_secret(secrets_dir / "root-api-key" / "root-api-key")
    if auth_mode != "dev":
        if root_key is None:
            problems.append("missing Secret file root-api-key/root-api-key (Secret openviking-root-key)")
        else:
            server["root_api_key"] = root_key

    extraction = conf.get("memory", {}).get("extraction_enabled", True)
    if extraction and "vlm" not in conf:
        problems.append("memory.extraction_enabled needs a vlm section (see components/llm-extraction)")
    if "vlm" in conf:
        llm_key = read_secret(secrets_dir / "llm" / "api-key")
        if llm_key is not None:
            conf["vlm"]["api_key"] = llm_key
        elif not conf["vlm"].get("api_key"):
            problems.append("vlm configured but no Secret file llm/api-key (Secret openviking-llm)")

    if problems:
        raise SystemExit("render_ov_conf: " + "; ".join(problems))
    return conf


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--templates", type=Path, default=Path("/etc/openviking-templates"))
    parser.add_argument("--secrets", type=Path, default=Path("/var/run/secrets/openviking"))
    parser.add_argument("--output", type=Path, default=Path("/etc/openviking/ov.conf"))
    args = parser.parse_args(argv)

    conf = render(args.templates, args.secrets)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(conf, out, indent=2, sort_keys=True)
    extraction = conf.get("memory", {}).get("extraction_enabled", True)
    print(
        f"render_ov_conf: wrote {args.output}; sections {sorted(conf)}; "
        f"auth_mode={conf['server'].get('auth_mode')}; extraction_enabled={extraction}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
