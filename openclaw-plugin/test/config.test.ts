import assert from "node:assert/strict";
import { test } from "node:test";

import { ConfigError, DEFAULT_TARGET, manifest, OVERRIDE_KEYS, parseConfig } from "../src/config.js";
import { TOOL_NAMES } from "../src/tools.js";

const MEMORY_KEYS = {
  autoRecall: false,
  recallLimit: 1,
  recallScoreThreshold: 0.3,
  recallMaxContentChars: 200,
  recallPreferAbstract: false,
  recallTokenBudget: 2000,
  recentRawTurnCount: 4,
  assembleRecallWindow: 2,
  autoCapture: true,
};

/** Keys only the engine reads, from this config block when it loads the host's openclaw.json. */
const ENGINE_FILE_KEYS = ["mode", "configPath", "port", "baseUrl", "apiKey", "captureMaxLength", "compactCommitThreshold"];

test("every memory key reaches the engine with each call, under its own name", () => {
  const config = parseConfig({ ...MEMORY_KEYS, agentId: "main", timeoutMs: 9000, memoryExpandMaxResults: 3 });
  assert.deepEqual(config.overrides, MEMORY_KEYS);
  assert.deepEqual([...OVERRIDE_KEYS].sort(), Object.keys(MEMORY_KEYS).sort());
  assert.equal(config.expandLimit, 3);
  assert.equal(config.deadlines.commitTurnMs, 9000);
  assert.deepEqual(parseConfig({}).overrides, {}, "unset keys leave the engine's own values");
});

test("every key in the schema does something (in the plugin or the engine): the upstream keys nothing uses are refused", () => {
  const keys = Object.keys(manifest.configSchema.properties ?? {}).sort();
  assert.deepEqual(keys, [...OVERRIDE_KEYS, ...ENGINE_FILE_KEYS, "agentId", "timeoutMs", "memoryExpandMaxResults", "engine"].sort());
  for (const ignored of ["captureMode", "targetUri", "commitTokenThreshold", "recallResources"]) {
    assert.throws(() => parseConfig({ [ignored]: "x" }), /unknown key/, ignored);
  }
});

test("the engine block sets targets, TLS and deadlines", () => {
  const defaults = parseConfig({});
  assert.deepEqual(defaults.targets, { capture: DEFAULT_TARGET, assembly: DEFAULT_TARGET, compaction: DEFAULT_TARGET });
  assert.equal(defaults.tls, false);
  const config = parseConfig({
    engine: { target: "engine:50051", compactionTarget: "compaction:50053", tls: true, assembleDeadlineMs: 900 },
  });
  assert.deepEqual(config.targets, { capture: "engine:50051", assembly: "engine:50051", compaction: "compaction:50053" });
  assert.equal(config.tls, true);
  assert.equal(config.deadlines.assembleMs, 900);
});

test("every bad value is reported at once, naming its key", () => {
  assert.throws(
    () => parseConfig({ recallLimit: 0, autoRecall: "yes", engine: { target: "nohost", tls: 1 }, bogus: true }),
    (error: unknown) => {
      assert.ok(error instanceof ConfigError);
      const prefix = "plugins.entries.viking-context-engine.config";
      assert.deepEqual(
        error.problems.map((p) => p.split(":")[0]),
        [`${prefix}.recallLimit`, `${prefix}.autoRecall`, `${prefix}.engine.target`, `${prefix}.engine.tls`, `${prefix}.bogus`],
      );
      return true;
    },
  );
});

test("the manifest declares the engine kind and exactly the tools the plugin registers", () => {
  const full = manifest as unknown as { kind: string; contracts: { tools: string[] } };
  assert.equal(full.kind, "context-engine");
  assert.deepEqual(full.contracts.tools, [...TOOL_NAMES]);
});
