// Drives the built plugin's context engine (openclaw-plugin/dist) the way OpenClaw does: one
// engine per turn (factory -> calls -> dispose), all turns in one process. Reads
// {config, turns: [{config?, calls: [{method, params}]}]} as JSON on stdin; writes one result
// per call ({value} or {error}) as a JSON array on stdout. Test-only.
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
