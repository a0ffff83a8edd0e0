import assert from "node:assert/strict";
import { test } from "node:test";

import { ConfigError, DEFAULT_TARGET, manifest, parseConfig } from "../src/config.js";
import { TOOL_NAMES } from "../src/tools.js";

const UPSTREAM = {
  mode: "remote",
  baseUrl: "http://127.0.0.1:1933",
  apiKey: "k",
  agentId: "default",
  timeoutMs: 15000,
  autoRecall: true,
  autoCapture: true,
  recallLimit: 6,
  recallScoreThreshold: 0.15,
  recallMaxContentChars: 500,
  recallPreferAbstract: true,
  recallTokenBudget: 2000,
  captureMode: "semantic",
  captureMaxLength: 24000,
  targetUri: "viking://user/memories",
  commitTokenThreshold: 20000,
};

test("an upstream OpenViking plugin config is accepted unchanged", () => {
  const config = parseConfig(UPSTREAM);
  assert.deepEqual(config.targets, { capture: DEFAULT_TARGET, assembly: DEFAULT_TARGET, compaction: DEFAULT_TARGET });
  assert.equal(config.deadlines.commitTurnMs, 15000);
  assert.equal(config.tls, false);
});

test("the engine block sets targets, TLS and deadlines", () => {
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
