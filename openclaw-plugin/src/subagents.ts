/**
 * Subagents: OpenClaw's `prepareSubagentSpawn` and `onSubagentEnded`.
 *
 * At spawn the engine assembles the parent's context (its stored summaries, the newest turns of
 * its transcript and recall for the request in progress) within `PACKET_TOKENS`; the plugin
 * renders it as text, capped at `PACKET_CHARS`, and every `assemble` of the child adds it to the
 * child's system prompt. The child's calls are for its parent's user (`identity.ts`). When the
 * child ends (whatever the reason), its newest answer is stored in the parent's stream as one
 * message keyed by the child's session key, so a second end notice stores nothing more.
 *
 * Neither hook fails the host's spawn or cleanup: with the engine down the child starts without
 * a packet, and an answer not stored stays linked for the next end notice.
 */
import { AssembleRequest } from "../gen/contextengine/v1/assembly.js";
import { transcriptOf } from "./acknowledged.js";
import { type EngineClients, unary } from "./channels.js";
import { PLUGIN_ID, type PluginConfig } from "./config.js";
import type { Logger, SubagentEndParams, SubagentSpawnParams } from "./host.js";
import { identityFor } from "./identity.js";
import { type HostMessage, toEngineMessage, toHostMessage } from "./messages.js";
import { link, linkOf, sessionIdOf, textOf, unlink } from "./subagent-links.js";
import type { TraceScope } from "./tracing.js";

/** Tokens of the parent's context the engine assembles for a child. */
export const PACKET_TOKENS = 2_000;
/** Characters of the rendered packet a child is shown at most (its newest part). */
export const PACKET_CHARS = PACKET_TOKENS * 4;

export type Ingest = (sessionId: string, sessionKey: string, messages: HostMessage[]) => Promise<number>;

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** The packet a child is shown: the parent's assembled context as lines, newest kept. */
export function renderPacket(parentSessionKey: string, messages: HostMessage[], prompt: string): string | undefined {
  const lines = messages.map((m) => [m.role, textOf(m).trim()]).filter(([, text]) => text.length > 0);
  if (prompt.trim()) lines.push(["user (the request in progress)", prompt.trim()]);
  if (lines.length === 0) return undefined;
  const body = lines.map(([role, text]) => `${role}: ${text}`).join("\n");
  const bounded = body.length > PACKET_CHARS ? `...${body.slice(-PACKET_CHARS)}` : body;
  return `Context from the parent session ${parentSessionKey}, as it stood when this subagent was spawned (background; your task is the prompt):\n${bounded}`;
}

export function subagentHooks(
  config: PluginConfig,
  clients: EngineClients,
  log: Logger,
  ingest: Ingest,
  scope: (sessionId: string, sessionKey: string) => TraceScope,
) {
  /** The parent's context for the child; `sessionId` is the parent's, as far as it is known. */
  async function parentPacket(parentSessionKey: string, sessionId: string | undefined): Promise<string | undefined> {
    const parent = transcriptOf(sessionId);
    const response = await unary(
      clients.assembly,
      clients.assembly.assemble,
      AssembleRequest.fromPartial({
        identity: identityFor(config, sessionId ?? parentSessionKey, parentSessionKey),
        messages: parent.messages.map(toEngineMessage),
        tokenBudget: PACKET_TOKENS,
        prompt: parent.prompt,
        overrides: config.overrides,
      }),
      config.deadlines.assembleMs,
      scope(sessionId ?? parentSessionKey, parentSessionKey).headers(),
    );
    return renderPacket(parentSessionKey, response.messages.map(toHostMessage), parent.prompt);
  }

  async function prepareSubagentSpawn(params: SubagentSpawnParams): Promise<{ rollback(): void }> {
    // OpenClaw 2026.9.6 gives an isolated child's parent no session id: the one its key had here
    const parentSessionId = params.parentSessionId ?? sessionIdOf(params.parentSessionKey);
    let packet: string | undefined;
    try {
      packet = await parentPacket(params.parentSessionKey, parentSessionId);
    } catch (error) {
      log.warn(`[${PLUGIN_ID}] subagent ${params.childSessionKey} starts without its parent's context: ${describe(error)}`);
    }
    link(params.childSessionKey, {
      parentSessionKey: params.parentSessionKey,
      ...(parentSessionId ? { parentSessionId } : {}),
      ...(packet ? { packet } : {}),
    });
    return { rollback: () => unlink(params.childSessionKey) };
  }

  async function onSubagentEnded(params: SubagentEndParams): Promise<void> {
    const found = linkOf(params.childSessionKey);
    if (found?.answer === undefined || found.parentSessionId === undefined) {
      unlink(params.childSessionKey);
      return;
    }
    const result: HostMessage = {
      role: "user",
      content: `[Subagent ${params.childSessionKey} ${params.reason}]\n${found.answer}`,
      timestamp: Date.now(),
      idempotencyKey: `subagent:${params.childSessionKey}:result`,
    };
    try {
      await ingest(found.parentSessionId, found.parentSessionKey, [result]);
      unlink(params.childSessionKey);
    } catch (error) {
      log.warn(`[${PLUGIN_ID}] subagent ${params.childSessionKey}'s result is not stored yet: ${describe(error)}`);
    }
  }

  return { prepareSubagentSpawn, onSubagentEnded };
}
