import assert from "node:assert/strict";
import { createServer } from "node:net";
import { after, test } from "node:test";

import { closeAllClients } from "../src/channels.js";
import { parseConfig, PLUGIN_ID } from "../src/config.js";
import { enginePathActive, fallbackRecall } from "../src/fallback.js";
import type { PluginApi } from "../src/host.js";
import plugin from "../src/index.js";

after(closeAllClients);

function hostApi(slot: string | undefined, withEngineApi: boolean) {
  const hooks: string[] = [];
  const engines: string[] = [];
  const api: PluginApi = {
    pluginConfig: {},
    config: { plugins: { slots: { contextEngine: slot } } },
    logger: { info() {}, warn() {}, error() {} },
    registerTool() {},
    on: (hook) => void hooks.push(hook),
    ...(withEngineApi ? { registerContextEngine: (id: string) => void engines.push(id) } : {}),
  };
  return { api, hooks, engines };
}

test("the hook recalls only where the host does not run the engine: never both paths", () => {
  for (const [slot, engineApi, active] of [
    [PLUGIN_ID, true, true],
    ["legacy", true, false],
    [undefined, true, false],
    [PLUGIN_ID, false, false],
  ] as const) {
    const { api, hooks, engines } = hostApi(slot, engineApi);
    assert.equal(enginePathActive(api), active);
    plugin.register(api);
    assert.deepEqual(hooks, active ? [] : ["before_prompt_build"], `${slot} ${engineApi}`);
    assert.deepEqual(engines, engineApi ? [PLUGIN_ID] : []);
  }
});

test("the fallback degrades to no recall when the engine is down, and asks nothing with autoRecall off", async () => {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  const warnings: string[] = [];
  const log = { info() {}, warn: (m: string) => warnings.push(m), error() {} };
  const engine = { target: `127.0.0.1:${port}`, assembleDeadlineMs: 300 };
  const started = Date.now();
  const down = await fallbackRecall(parseConfig({ engine }), log)({ prompt: "which editor do I use?", messages: [] }, { sessionKey: "k" });
  assert.equal(down, undefined);
  assert.match(warnings[0] ?? "", /fallback recall skipped/);
  assert.ok(Date.now() - started < 5_000, "bounded by the assemble deadline");
  const off = await fallbackRecall(parseConfig({ engine, autoRecall: false }), log)({ prompt: "x", messages: [] }, {});
  assert.equal(off, undefined);
  assert.equal(warnings.length, 1, "no RPC was tried");
});
