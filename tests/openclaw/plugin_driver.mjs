// Drives the built plugin's context engine (openclaw-plugin/dist) the way OpenClaw does: one
// engine per turn (factory -> calls -> dispose), all turns in one process. Reads
// {config, turns: [{config?, calls: [{method, params}]}]} as JSON on stdin; writes one result
// per call ({value} or {error}) as a JSON array on stdout. The call {method: "waitForFile",
// params: {path}} waits (here, not in the plugin) until the test creates that file. Test-only.
import { existsSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";
import { closeAllClients } from "../../openclaw-plugin/dist/src/channels.js";
import { parseConfig } from "../../openclaw-plugin/dist/src/config.js";
import { createEngine } from "../../openclaw-plugin/dist/src/engine.js";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const script = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const log = { info() {}, warn() {}, error() {} };
const results = [];
for (const turn of script.turns) {
  const engine = createEngine(parseConfig(turn.config ?? script.config), log);
  for (const call of turn.calls) {
    if (call.method === "waitForFile") {
      while (!existsSync(call.params.path)) await sleep(10);
      results.push({ value: null });
      continue;
    }
    try {
      results.push({ value: await engine[call.method](call.params) });
    } catch (error) {
      results.push({ error: error instanceof Error ? error.message : String(error) });
    }
  }
  await engine.dispose();
}
closeAllClients();
process.stdout.write(JSON.stringify(results));
