/**
 * The hook chain as the fallback path (design §3.1, §7.3): when this plugin's engine is not the
 * one the host runs, `before_prompt_build` still gets recall, as the engine's `RecallFallback`
 * block (`<relevant-memories>...`) prepended to the prompt. Capture strips that block from any
 * transcript it later stores, as it does the engine path's injections.
 *
 * Never both paths in one turn: while the host can run this engine (it has the context-engine
 * API and its `contextEngine` slot names this plugin) the hook adds nothing; `assemble` does
 * the recall. The hook needs `plugins.entries.<id>.hooks.allowConversationAccess: true`; the
 * host skips it otherwise.
 */
import { RecallFallbackRequest } from "../gen/contextengine/v1/assembly.js";
import { engineClients, unary } from "./channels.js";
import { PLUGIN_ID, type PluginConfig } from "./config.js";
import type { HookAgentContext, Logger, PluginApi, PromptBuildEvent, PromptBuildResult } from "./host.js";
import { identityFor } from "./identity.js";
import { TraceScope } from "./tracing.js";

/** Whether the host runs this plugin's engine, so `assemble` recalls and the hook must not. */
export function enginePathActive(api: Pick<PluginApi, "registerContextEngine" | "config">): boolean {
  return typeof api.registerContextEngine === "function" && api.config?.plugins?.slots?.contextEngine === PLUGIN_ID;
}

export function fallbackRecall(config: PluginConfig, log: Logger) {
  const clients = engineClients(config);
  return async (event: PromptBuildEvent, ctx: HookAgentContext): Promise<PromptBuildResult | undefined> => {
    const prompt = event.currentUserMessage ?? event.prompt;
    if (!prompt?.trim() || config.overrides.autoRecall === false) return undefined;
    const scope = TraceScope.start("openclaw.fallback_recall", { "session.key": ctx.sessionKey ?? "" });
    try {
      const response = await unary(
        clients.assembly,
        clients.assembly.recallFallback,
        RecallFallbackRequest.fromPartial({
          identity: identityFor(config, ctx.sessionId ?? ctx.sessionKey ?? "", ctx.sessionKey),
          prompt,
          overrides: config.overrides,
        }),
        config.deadlines.assembleMs,
        scope.headers(),
      );
      return response.prependContext ? { prependContext: response.prependContext } : undefined;
    } catch (error) {
      scope.fail(error);
      log.warn(`[${PLUGIN_ID}] fallback recall skipped: ${error instanceof Error ? error.message : String(error)}`);
      return undefined;
    } finally {
      await scope.end();
    }
  };
}
