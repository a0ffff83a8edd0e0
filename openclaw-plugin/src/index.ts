/**
 * OpenClaw plugin entry: the `viking-context-engine` context engine, its four memory tools and,
 * when the host does not run the engine, the `before_prompt_build` recall fallback.
 *
 * Install: `openclaw plugins install -l --force --accept-capabilities <this folder>` (see README).
 */
import { parseConfig, PLUGIN_ID } from "./config.js";
import { createEngine } from "./engine.js";
import { enginePathActive, fallbackRecall } from "./fallback.js";
import type { PluginApi } from "./host.js";
import { createTool, TOOL_NAMES } from "./tools.js";

export default {
  id: PLUGIN_ID,
  name: "Viking Context Engine",
  description: "Context engine over the Viking Context Engine's gRPC services (OpenViking).",
  register(api: PluginApi): void {
    const config = parseConfig(api.pluginConfig);
    api.registerContextEngine?.(PLUGIN_ID, () => createEngine(config, api.logger));
    if (!enginePathActive(api)) api.on?.("before_prompt_build", fallbackRecall(config, api.logger));
    for (const name of TOOL_NAMES) {
      api.registerTool((ctx) => createTool(name, config, ctx), { name });
    }
  },
};
