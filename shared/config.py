"""One frozen settings object, from a JSON file plus the environment.

The file uses the upstream OpenClaw plugin's camelCase keys (docs/design.md §7.1), so an old plugin
config file starts the services unchanged; the new keys of docs/design.md §7.2 and the engine's own keys sit
beside them. Every key can be overridden by `CONTEXT_ENGINE_<UPPER_SNAKE_KEY>` (for example
`CONTEXT_ENGINE_BASE_URL`). Every invalid value is reported at once, by name.
"""

from __future__ import annotations

import difflib
import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from shared.errors import ConfigurationError
from shared.openviking.shards import (
    Shard,
    ShardMap,
    parse_pin_list,
    parse_shard_list,
    shard_map_problems,
)

log = logging.getLogger("contextengine.config")

CONFIG_PATH_ENV = "CONTEXT_ENGINE_CONFIG"
ENV_PREFIX = "CONTEXT_ENGINE_"
OTHER_ENVIRONMENT: Mapping[str, str] = {
    CONFIG_PATH_ENV: "JSON config file of the services (`--config` overrides it).",
    "CONTEXT_ENGINE_LLM_BASE_URL": "`make run`: an OpenAI-compatible endpoint for OpenViking's "
    "summaries and memory extraction (with `CONTEXT_ENGINE_LLM_MODEL`).",
    "CONTEXT_ENGINE_LLM_MODEL": "`make run`: the model at `CONTEXT_ENGINE_LLM_BASE_URL`.",
    "CONTEXT_ENGINE_LLM_API_KEY": "`make run`: the key of that endpoint (or of the LiteLLM model).",
    "CONTEXT_ENGINE_LLM_LITELLM_MODEL": "`make run`: a LiteLLM model name instead of a base URL.",
    "CONTEXT_ENGINE_STACK_DIR": "`make run` and the tests: where the local stack keeps its "
    "runtimes and data (default `.stack/`).",
    "CONTEXT_ENGINE_EMBEDDINGS_PORT": "`make run`: the embedding server's port (default 8011; "
    "OpenViking's is `port`, the engine's `grpcPort`).",
    "CONTEXT_ENGINE_EMBEDDER": "`make run` and the tests: `onnx` (default, no PyTorch) or `torch`, "
    "the embedding server the local stack starts.",
    "CONTEXT_ENGINE_TEST_EMBEDDINGS_URL": "Tests: reuse an embedding server already running there.",
}
"""`CONTEXT_ENGINE_*` variables that are not settings: read by the local stack, the demo and the
tests. Any other `CONTEXT_ENGINE_*` name is a typo, warned about at startup."""
ENGINE_PLUGIN_IDS = ("viking-context-engine", "openviking")
"""Plugin ids whose `plugins.entries` block is the engine's when no context-engine slot is set:
this project's OpenClaw plugin, then the upstream plugin (which existing configs use)."""
# Keys of the upstream plugin that the engine accepts but has no use for.
_UPSTREAM_IGNORED_KEYS = frozenset(
    {
        "targetUri",
        "captureMode",
        "commitTokenThreshold",
        "commitKeepRecentCount",
        "commitOnMemoryIntent",
        "recallResources",
        "recallMaxInjectedChars",
        "recallHealthCacheTtlMs",
        "recallHealthStaleTtlMs",
        "bypassSessionPatterns",
        "ingestReplyAssist",
        "ingestReplyAssistMinSpeakerTurns",
        "ingestReplyAssistMinChars",
        "logFindRequests",
        "emitStandardDiagnostics",
        # The OpenClaw plugin's own block (how it reaches the engine: targets, TLS, deadlines).
        "engine",
    }
)


def _upper_snake(alias: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", alias).upper()


def env_name(alias: str) -> str:
    """The environment variable that overrides the setting with file key `alias`."""
    return ENV_PREFIX + _upper_snake(alias)


class Settings(BaseModel):
    """Engine settings. Field aliases are the config-file keys."""

    # Attribute docstrings become the fields' descriptions: docs/config.md is generated from them.
    model_config = ConfigDict(
        frozen=True, populate_by_name=True, extra="forbid", use_attribute_docstrings=True
    )

    # --- upstream plugin keys (docs/design.md §7.1) ---
    mode: Literal["local", "remote"] = "local"
    """local: the engine starts and owns an OpenViking server; remote: it uses an existing one."""
    config_path: str | None = Field(default=None, alias="configPath")
    """Local mode: an ov.conf to start OpenViking with instead of the generated one."""
    port: int = Field(default=1933, ge=1, le=65535)
    """Local mode: OpenViking's port (not the engine's: that is `grpcPort`)."""
    base_url: str = Field(default="http://127.0.0.1:1933", alias="baseUrl", pattern=r"^https?://\S+$")
    """OpenViking's base URL."""
    openviking_shards: dict[str, str] = Field(default_factory=dict, alias="openvikingShards")
    """Several OpenViking servers, `{name: url}` (env: `name=url,name=url`); each tenant lives on
    one (`shared.openviking.shards`). Empty (default) = the one server at `baseUrl`."""
    openviking_shard_pins: dict[str, str] = Field(default_factory=dict, alias="openvikingShardPins")
    """`{"<account>/<user>": shard}` (env: `account/user=shard,...`): overrides the hash, e.g.
    to keep existing tenants where they are when a shard is added."""
    api_key: SecretStr | None = Field(default=None, alias="apiKey")
    """Root key (trusted / api_key modes) for OpenViking."""
    agent_id: str = Field(default="default", alias="agentId", pattern=r"^[A-Za-z0-9_.@-]{1,64}$")
    """Agent id used when a request names none."""
    timeout_ms: int = Field(default=15000, alias="timeoutMs", gt=0, le=600_000)
    """Default timeout of one OpenViking call."""
    auto_recall: bool = Field(default=True, alias="autoRecall")
    """Assemble recalls memories and past exchanges for the prompt; off = no automatic recall."""
    auto_capture: bool = Field(default=True, alias="autoCapture")
    """AfterTurn / CommitTurn store the host's turns; off = they answer without storing."""
    capture_max_length: int = Field(default=24000, alias="captureMaxLength", gt=0)
    """Longest text the capture decision treats as worth extracting."""
    recall_limit: int = Field(default=6, alias="recallLimit", ge=1, le=100)
    """Most items RecallMemories returns when the request sets no limit."""
    recall_score_threshold: float = Field(default=0.15, alias="recallScoreThreshold", ge=0.0, le=1.0)
    """Lowest semantic score a stored memory needs to be recalled."""
    recall_max_content_chars: int = Field(default=500, alias="recallMaxContentChars", ge=20, le=100_000)
    """Longest content of one recalled item, in characters (longer ones are cut)."""
    recall_prefer_abstract: bool = Field(default=True, alias="recallPreferAbstract")
    """Show a memory's abstract instead of its full text when OpenViking has one."""
    recall_token_budget: int = Field(default=0, alias="recallTokenBudget", ge=0, le=1_000_000)
    """Cap on the injected recall pair's tokens; 0 (default) = no cap beyond the request's budget.

    The upstream default was 2000; the lossless-recall issue measured that a fixed cap keeps the
    context at ~1k tokens whatever the budget, so recall now fills the budget by relevance.
    """
    recall_lexical_source: Literal["index", "candidates", "grep", "off"] = Field(
        default="index", alias="recallLexicalSource"
    )
    """Lexical leg of recall: BM25 over every exchange of the user in the replica's derived index
    (`index`, services/assembly/exchange_index.py; the semantic pool until its first sync), over
    the semantic pool only (`candidates`), over every exchange grep matches (`grep`, O(exchanges)
    per call in OpenViking), or none (`off`)."""
    recall_budget_share: float = Field(default=0.9, alias="recallBudgetShare", gt=0.0, le=1.0)
    """Share of the request's budget recall may take before the recent raw window when the prompt
    stands alone (at most 0.5 when it leans on the turns before it; it takes what the window
    leaves over, too). 0.9: on the hard recall tier's continuing session at 1k tokens, 0.75 let
    the window take ~200 tokens and evidence recall was 78.0 %, 0.9 gives 82.6 % (the same at
    4k-8k); 1.0 (no window) lost 1-4 points at 2k-8k. Below 1,500 tokens a standalone prompt's
    recall takes all of it (`assemble.recall_share`: +2 points at 1k)."""

    # --- refactor keys (docs/design.md §7.2) ---
    recent_raw_turn_count: int = Field(default=8, alias="recentRawTurnCount", ge=1, le=10_000)
    """Exchanges of the recent raw window Assemble keeps verbatim (shrunk from its oldest end to
    fit the budget); also the raw turns a Compact keeps."""
    assemble_recall_window: int = Field(default=5, alias="assembleRecallWindow", ge=1, le=100)
    """Newest messages the recall query may draw on; the previous user turn is added only when
    the prompt has fewer than three content words."""
    compact_commit_threshold: float = Field(default=0.75, alias="compactCommitThreshold", gt=0.0, le=1.0)
    """BUDGET trigger: compact once the stream's active tokens reach this share of the budget."""
    memory_expand_max_results: int = Field(default=6, alias="memoryExpandMaxResults", ge=1, le=100)
    """Most turns one ExpandMemory page returns (a request's `limit` of 0 or above it means this)."""

    # --- engine keys ---
    default_token_budget: int = Field(default=128_000, alias="defaultTokenBudget", gt=0)
    """Budget of a request whose `token_budget` is 0 (Assemble, AfterTurn, CommitTurn)."""
    compact_tokens_added_threshold: int = Field(default=30_000, alias="compactTokensAddedThreshold", gt=0)
    """TOKENS_ADDED trigger: compact once this many tokens arrived since the last compaction."""
    compact_turn_threshold: int = Field(default=20, alias="compactTurnThreshold", gt=0)
    """TURN_COUNT trigger: compact once this many turns arrived since the last compaction."""
    compact_interval_minutes: float = Field(default=30.0, alias="compactIntervalMinutes", gt=0)
    """INTERVAL trigger: compact this long after the last compaction when a turn arrived since."""
    compact_task_timeout_ms: int = Field(default=120_000, alias="compactTaskTimeoutMs", gt=0)
    """How long a synchronous Compact waits for OpenViking's phase 2."""
    compact_summary_max_tokens: int = Field(default=200, alias="compactSummaryMaxTokens", ge=20, le=8000)
    """Cap on the engine's own (LLM-free, extractive) summary of one compaction, and on the
    summary of the older compactions of a stream: Assemble shows at most four of them."""
    fallback_recall_enabled: bool = Field(default=True, alias="fallbackRecallEnabled")
    """Serve RecallFallback (the before_prompt_build path). Off = engine-only lifecycle."""
    recall_timeout_ms: int = Field(default=5000, alias="recallTimeoutMs", gt=0)
    """Longest Assemble waits for recall; past it the context is built without (degraded)."""
    turn_index_coalesce_ms: int = Field(default=2000, alias="turnIndexCoalesceMs", ge=0, le=60_000)
    """How long capture holds a turn's exchanges for the turn index so that more of the same
    user's turns join one OpenViking write (~26 ms of OpenViking CPU per exchange written alone,
    ~17 in fours): an exchange becomes findable by recall up to this much later. A compaction
    hand-off or a flush writes the user's held exchanges at once; 0 writes each turn's at once."""
    turn_index_recover_after_ms: int = Field(
        default=60_000, alias="turnIndexRecoverAfterMs", ge=1000, le=3_600_000
    )
    """How long a claimed turn may stay unconfirmed in the turn index before the next claim of its
    stream, on any replica, indexes it again (its replica may have died holding it). Well above
    the batch window and a busy write's retries; a turn indexed twice still has one document."""
    openviking_auth_mode: Literal["dev", "trusted", "api_key"] = Field(
        default="dev", alias="openvikingAuthMode"
    )
    """How the engine authenticates to OpenViking (dev: identity headers on loopback only)."""
    default_encoding: Literal["cl100k_base", "o200k_base"] = Field(
        default="o200k_base", alias="defaultEncoding"
    )
    """Tokenizer for a request whose model the engine does not know."""
    grpc_host: str = Field(default="127.0.0.1", alias="grpcHost")
    """Address the gRPC server binds (`0.0.0.0` to serve other machines)."""
    grpc_port: int = Field(default=50051, alias="grpcPort", ge=0, le=65535)
    """Port the gRPC server binds (0 = any free port); `--port` overrides it."""
    compaction_target: str = Field(default="", alias="compactionTarget")
    """gRPC target of CompactionService for capture's triggers; empty = in this process."""
    shutdown_grace_seconds: float = Field(default=20.0, alias="shutdownGraceSeconds", ge=0, le=600)
    """How long in-flight calls may finish after SIGTERM before the server stops."""
    max_connection_age_seconds: int = Field(default=300, alias="maxConnectionAgeSeconds", ge=1)
    """Server closes a client connection after this long, so clients re-balance over replicas."""
    max_message_bytes: int = Field(default=16 * 1024 * 1024, alias="maxMessageBytes", ge=1024)
    """Largest gRPC request or response, in bytes."""

    @field_validator("openviking_shards", mode="before")
    @classmethod
    def _shards_from_text(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        shards = parse_shard_list(value)
        names = [shard.name for shard in shards]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"shard {', '.join(twice)}: listed twice")
        return {shard.name: shard.base_url for shard in shards}

    @field_validator("openviking_shard_pins", mode="before")
    @classmethod
    def _pins_from_text(cls, value: Any) -> Any:
        return parse_pin_list(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _shards_are_consistent(self) -> Settings:
        if self.openviking_shard_pins and not self.openviking_shards:
            raise ValueError("openvikingShardPins: needs openvikingShards")
        problems = shard_map_problems(
            [Shard(name, url) for name, url in self.openviking_shards.items()], self.openviking_shard_pins
        )
        if self.openviking_shards and problems:
            raise ValueError("openvikingShards: " + "; ".join(problems))
        return self

    @property
    def openviking_shard_map(self) -> ShardMap:
        """Where each tenant's OpenViking is: the shards, or the one server at `baseUrl`."""
        if not self.openviking_shards:
            return ShardMap.single(self.base_url)
        shards = tuple(Shard(name, url) for name, url in self.openviking_shards.items())
        return ShardMap(shards, self.openviking_shard_pins)

    @model_validator(mode="after")
    def _remote_needs_url(self) -> Settings:
        if self.openviking_auth_mode in ("trusted", "api_key") and self.api_key is None:
            raise ValueError("apiKey is required when openvikingAuthMode is trusted or api_key")
        return self

    @property
    def openviking_timeout_seconds(self) -> float:
        return self.timeout_ms / 1000.0


def _aliases() -> dict[str, str]:
    return {(f.alias or name): name for name, f in Settings.model_fields.items()}


def _unwrap_plugin_file(data: Mapping[str, Any]) -> Mapping[str, Any]:
    """The engine's block of an OpenClaw config (`plugins.entries.<id>.config`), or the file bare.

    The entry is the one `plugins.slots.contextEngine` names; without a slot, the entry of the
    engine's own plugin id (`ENGINE_PLUGIN_IDS`). Other plugins' entries are never read.
    """
    plugins = data.get("plugins")
    if not isinstance(plugins, dict):
        return dict(data["config"]) if isinstance(data.get("config"), dict) else data
    entries = plugins.get("entries")
    entries = entries if isinstance(entries, dict) else {}
    slots = plugins.get("slots")
    slot = slots.get("contextEngine") if isinstance(slots, dict) else None
    if isinstance(slot, str) and slot:
        entry_id = slot
        if entry_id not in entries:
            raise ConfigurationError(
                [f"plugins.slots.contextEngine: names {entry_id!r}, which plugins.entries does not hold"]
            )
    else:
        entry_id = next((i for i in ENGINE_PLUGIN_IDS if i in entries), "")
        if not entry_id:
            raise ConfigurationError(
                ["plugins: no plugins.slots.contextEngine and no entry of " + " / ".join(ENGINE_PLUGIN_IDS)]
            )
    entry = entries[entry_id]
    config = entry.get("config", {}) if isinstance(entry, dict) else None
    if not isinstance(config, dict):
        raise ConfigurationError([f"plugins.entries.{entry_id}.config: expected a JSON object"])
    return dict(config)


def load_settings(
    path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Settings from `path` (or $CONTEXT_ENGINE_CONFIG), then env overrides, then `overrides`."""
    env = os.environ if environ is None else environ
    path = path or (Path(env[CONFIG_PATH_ENV]) if env.get(CONFIG_PATH_ENV) else None)
    problems: list[str] = []
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigurationError([f"{path}: {exc}"]) from exc
        if not isinstance(loaded, dict):
            raise ConfigurationError([f"{path}: expected a JSON object"])
        raw.update(_unwrap_plugin_file(loaded))
    aliases = _aliases()
    for alias in aliases:
        value = env.get(env_name(alias))
        if value is not None:
            raw[alias] = value
    for warning in unknown_environment(env):
        log.warning("%s", warning)
    raw.update(overrides or {})
    for key in list(raw):
        if key in _UPSTREAM_IGNORED_KEYS and key not in aliases:
            raw.pop(key)
        elif key not in aliases and key not in Settings.model_fields:
            problems.append(f"{key}: unknown setting")
    try:
        settings = Settings.model_validate(
            {k: v for k, v in raw.items() if k in aliases or k in Settings.model_fields}
        )
    except ValidationError as exc:
        problems.extend(_describe(err) for err in exc.errors())
        raise ConfigurationError(problems) from exc
    if problems:
        raise ConfigurationError(problems)
    return settings


def unknown_environment(environ: Mapping[str, str]) -> list[str]:
    """One line per `CONTEXT_ENGINE_*` variable that nothing reads, with the likeliest meant name.

    A misspelt JSON key is refused, but the environment holds other programs' variables too, so
    an unknown name there is a warning, not an error.
    """
    known = {env_name(alias) for alias in _aliases()} | set(OTHER_ENVIRONMENT)
    lines = []
    for name in sorted(n for n in environ if n.startswith(ENV_PREFIX) and n not in known):
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        hint = f" (did you mean {close[0]}?)" if close else " (docs/config.md lists every variable)"
        lines.append(f"{name}: not a context-engine setting, ignored{hint}")
    return lines


def _describe(error: Any) -> str:
    location = ".".join(str(part) for part in error["loc"]) or "settings"
    return f"{location}: {error['msg']} (got {error.get('input')!r})"
