import assert from "node:assert/strict";
import { createServer } from "node:net";
import { after, test } from "node:test";

import { closeAllClients, engineClients } from "../src/channels.js";
import { parseConfig } from "../src/config.js";
import { createEngine } from "../src/engine.js";
import type { HostMessage } from "../src/messages.js";
import { createTool } from "../src/tools.js";

after(closeAllClients);

/** A port nothing listens on (bound, then released). */
async function deadPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function recordingLog() {
  const warnings: string[] = [];
  return { warnings, log: { info() {}, warn: (m: string) => warnings.push(m), error() {} } };
}

const HISTORY: HostMessage[] = [
  { role: "user", content: "hi", timestamp: 1 },
  { role: "assistant", content: [{ type: "text", text: "hello" }], timestamp: 2 },
];

test("the engine declares turn fencing, atomic idempotent commits and its own compaction", () => {
  const engine = createEngine(parseConfig({}), recordingLog().log);
  assert.deepEqual(engine.info.transcriptSemantics, {
    currentTurnFence: "before-current-turn-entry-v1",
    turnAdvancementIdempotency: "atomic-idempotent-v1",
  });
  assert.equal(engine.info.ownsCompaction, true);
});

test("with the engine down: assemble passes the host's messages through, commitTurn fails, compact reports it", async () => {
  const config = parseConfig({ engine: { target: `127.0.0.1:${await deadPort()}`, assembleDeadlineMs: 300, commitTurnDeadlineMs: 300 } });
  const { log, warnings } = recordingLog();
  const engine = createEngine(config, log);
  const started = Date.now();
  const assembled = await engine.assemble({ sessionId: "s", messages: HISTORY, prompt: "hi" });
  assert.equal(assembled.messages, HISTORY);
  assert.ok(assembled.estimatedTokens > 0);
  assert.match(warnings[0] ?? "", /assemble passthrough/);
  await assert.rejects(
    engine.commitTurn({ advancementKey: "lt-1", admission: {}, terminal: {}, messages: HISTORY, sessionId: "s" }),
    (error: { code?: number }) => error.code === 14 || error.code === 4,
  );
  const compacted = await engine.compact({ sessionId: "s", sessionKey: "k", force: true });
  assert.equal(compacted.ok, false);
  assert.match(compacted.reason ?? "", /engine unavailable/);
  assert.ok(Date.now() - started < 10_000, "every call is bounded by its deadline");
  await engine.dispose();
});

test("channels are cached process-wide: every turn's engine and tool share them", () => {
  const config = parseConfig({ engine: { target: "127.0.0.1:1" } });
  const first = engineClients(config);
  createEngine(config, recordingLog().log);
  createTool("memory_recall", config, { sessionId: "s" });
  assert.equal(engineClients(config).capture, first.capture);
  assert.notEqual(engineClients(parseConfig({ engine: { target: "127.0.0.1:2" } })).capture, first.capture);
});
