"""tiktoken works offline from the seeded cache and yields the published token ids."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from shared.tokens import (
    SHIPPED_ENCODINGS,
    TokenCounter,
    encoding_for_model,
    seed_tiktoken_cache,
    tiktoken_cache_key,
)

# Ids published by OpenAI's tokenizer for these strings.
EXPECTED_IDS = {
    "cl100k_base": {"hello world": [15339, 1917], "tiktoken is great!": [83, 1609, 5963, 374, 2294, 0]},
    "o200k_base": {"hello world": [24912, 2375]},
}


def test_seeding_writes_tiktokens_cache_keys(tmp_path: Path) -> None:
    seed_tiktoken_cache(tmp_path)
    for name in SHIPPED_ENCODINGS:
        assert (tmp_path / tiktoken_cache_key(name)).stat().st_size > 1_000_000


def test_exact_ids_offline_in_a_fresh_process(tmp_path: Path) -> None:
    """A new interpreter with no network proxy reachable and an empty cache dir gets exact ids."""
    script = (
        "import json; from shared.tokens import TokenCounter;"
        "print(json.dumps({n: {t: TokenCounter(n).encode(t) for t in ts} for n, ts in "
        + repr({k: list(v) for k, v in EXPECTED_IDS.items()})
        + ".items()}))"
    )
    env = {
        **os.environ,
        "TIKTOKEN_CACHE_DIR": str(tmp_path / "cache"),
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
    }
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == __import__("json").dumps(EXPECTED_IDS)


def test_encoding_follows_the_model_name() -> None:
    assert encoding_for_model("gpt-4o", "cl100k_base") == "o200k_base"
    assert encoding_for_model("openai/gpt-4", "o200k_base") == "cl100k_base"
    assert encoding_for_model("claude-sonnet-4", "cl100k_base") == "cl100k_base"


def test_message_count_includes_framing() -> None:
    counter = TokenCounter("cl100k_base")
    assert counter.count_message(["hello world"]) == 2 + 4
    assert counter.count("") == 0
