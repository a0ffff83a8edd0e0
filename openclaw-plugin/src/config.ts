/**
 * The plugin's settings: every key does something. The memory keys (named as in the upstream
 * OpenViking plugin) go to the engine with each call as `SettingsOverrides`, whose fields have
 * the same names; `agentId`, `timeoutMs`, `memoryExpandMaxResults` and `engine` (how to reach
 * the gRPC services) are the plugin's own; the rest (`baseUrl`, `captureMaxLength`, ...) are
 * the engine's, read when it is started with the same openclaw.json. The upstream keys nothing here uses are not accepted (a
 * config naming one fails registration, naming the key).
 */
import { readFileSync } from "node:fs";

import type { SettingsOverrides } from "../gen/contextengine/v1/common.js";
import { type JsonSchema, schemaProblems } from "./schema.js";

export const PLUGIN_ID = "viking-context-engine";
export const DEFAULT_TARGET = "127.0.0.1:50051";

type Manifest = { id: string; version: string; configSchema: JsonSchema };

/** `openclaw.plugin.json`, the single source of the id, version and config schema. */
export const manifest: Manifest = JSON.parse(
  readFileSync(new URL("../../openclaw.plugin.json", import.meta.url), "utf8"),
) as Manifest;

export type Targets = { capture: string; assembly: string; compaction: string };

export type Deadlines = {
  assembleMs: number;
  commitTurnMs: number;
  compactMs: number;
  toolMs: number;
};

export type PluginConfig = {
  targets: Targets;
  tls: boolean;
  accountId: string;
  userId: string;
  /** Agent id when the host does not name one (upstream `agentId`). */
  agentId: string;
  deadlines: Deadlines;
  /** The memory keys set in the config, sent with every call (unset: the engine's own). */
  overrides: SettingsOverrides;
  /** memory_expand's limit when the model gives none (0: the engine's). */
  expandLimit: number;
};

/** Config keys that are `SettingsOverrides` fields of the same name. */
export const OVERRIDE_KEYS = [
  "autoRecall",
  "recallLimit",
  "recallScoreThreshold",
  "recallMaxContentChars",
  "recallPreferAbstract",
  "recallTokenBudget",
  "recentRawTurnCount",
  "assembleRecallWindow",
  "autoCapture",
] as const satisfies readonly (keyof SettingsOverrides)[];

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid ${PLUGIN_ID} config: ${problems.join("; ")}`);
    this.name = "ConfigError";
  }
}

type RawEngine = Partial<{
  target: string;
  captureTarget: string;
  assemblyTarget: string;
  compactionTarget: string;
  tls: boolean;
  accountId: string;
  userId: string;
  assembleDeadlineMs: number;
  commitTurnDeadlineMs: number;
  compactDeadlineMs: number;
  toolDeadlineMs: number;
}>;

type RawConfig = Partial<{ agentId: string; timeoutMs: number; memoryExpandMaxResults: number; engine: RawEngine }> &
  SettingsOverrides;

/** Validated settings from `plugins.entries.<id>.config` (every problem reported at once, by key). */
export function parseConfig(raw: unknown): PluginConfig {
  const value = raw ?? {};
  const problems = schemaProblems(manifest.configSchema, value, `plugins.entries.${PLUGIN_ID}.config`);
  if (problems.length > 0) throw new ConfigError(problems);
  const config = value as RawConfig;
  const engine = config.engine ?? {};
  const target = engine.target ?? DEFAULT_TARGET;
  const timeoutMs = config.timeoutMs ?? 15_000;
  return {
    targets: {
      capture: engine.captureTarget ?? target,
      assembly: engine.assemblyTarget ?? target,
      compaction: engine.compactionTarget ?? target,
    },
    tls: engine.tls ?? false,
    accountId: engine.accountId ?? "default",
    userId: engine.userId ?? "default",
    agentId: config.agentId ?? "default",
    deadlines: {
      assembleMs: engine.assembleDeadlineMs ?? Math.min(timeoutMs, 8_000),
      commitTurnMs: engine.commitTurnDeadlineMs ?? timeoutMs,
      compactMs: engine.compactDeadlineMs ?? Math.max(timeoutMs, 120_000),
      toolMs: engine.toolDeadlineMs ?? timeoutMs,
    },
    overrides: Object.fromEntries(OVERRIDE_KEYS.filter((k) => config[k] !== undefined).map((k) => [k, config[k]])),
    expandLimit: config.memoryExpandMaxResults ?? 0,
  };
}
