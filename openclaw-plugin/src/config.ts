/**
 * The plugin's settings: the upstream OpenViking plugin's keys (accepted unchanged; the engine
 * reads the ones it acts on from its own config) plus `engine`, how to reach the gRPC services.
 */
import { readFileSync } from "node:fs";

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
};

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

type RawConfig = Partial<{ agentId: string; timeoutMs: number; engine: RawEngine }>;

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
  };
}
