/**
 * memory_recall / memory_store / memory_forget / memory_expand (docs/design.md §6) over the engine's
 * RPCs. Listed in the manifest's `contracts.tools` and `catalogMode: "direct-only"`, so the model
 * sees them directly instead of behind the host's tool search. A tool call joins the trace of
 * the turn it belongs to.
 */
import { RecallMemoriesRequest } from "../gen/contextengine/v1/assembly.js";
import { ForgetMemoryRequest, StoreMemoryRequest } from "../gen/contextengine/v1/capture.js";
import { ExpandMemoryRequest } from "../gen/contextengine/v1/compaction.js";
import { MemoryScope } from "../gen/contextengine/v1/packet.js";
import { engineClients, unary } from "./channels.js";
import type { PluginConfig } from "./config.js";
import type { Tool, ToolContext, ToolResult } from "./host.js";
import { identityFor } from "./identity.js";
import { toHostMessage } from "./messages.js";
import { TraceScope, turnOf } from "./tracing.js";

export const TOOL_NAMES = ["memory_recall", "memory_store", "memory_forget", "memory_expand"] as const;
export type ToolName = (typeof TOOL_NAMES)[number];

const CATEGORIES = ["preferences", "entities", "events", "notes"];

/** Parameter schemas (JSON Schema), as the model sees them. */
export const TOOL_PARAMETERS: Record<ToolName, Record<string, unknown>> = {
  memory_recall: {
    type: "object",
    additionalProperties: false,
    required: ["query"],
    properties: {
      query: { type: "string", minLength: 1, description: "What to look for in long-term memory." },
      limit: { type: "integer", minimum: 1, maximum: 20, description: "Most memories to return (default: recallLimit)." },
    },
  },
  memory_store: {
    type: "object",
    additionalProperties: false,
    required: ["text"],
    properties: {
      text: { type: "string", minLength: 1, description: "What to remember, in the user's words." },
      category: { type: "string", enum: CATEGORIES, description: "Default notes." },
      scope: { type: "string", enum: ["user", "agent"], description: "Whose memory (default user)." },
    },
  },
  memory_forget: {
    type: "object",
    additionalProperties: false,
    properties: {
      uri: { type: "string", description: "The memory's viking:// URI (from memory_recall)." },
      query: { type: "string", description: "Forget the one memory matching this; ambiguous matches are listed, not deleted." },
    },
  },
  memory_expand: {
    type: "object",
    additionalProperties: false,
    required: ["summaryOrMemoryUri"],
    properties: {
      summaryOrMemoryUri: {
        type: "string",
        minLength: 1,
        description:
          "A recalled item's ref (the `ref=` at its end, e.g. t418306755912.12), a compact summary (archive) URI, a checkpoint id (cp-...) or a long-term memory URI.",
      },
      query: { type: "string", description: "Rank the original turns by this." },
      limit: { type: "integer", minimum: 1, maximum: 100, description: "Most turns to return (default memoryExpandMaxResults)." },
    },
  },
};

const DESCRIPTIONS: Record<ToolName, string> = {
  memory_recall: "Search long-term memory (user and agent memories) and return the matching memories.",
  memory_store: "Remember something now, when the user explicitly asks you to.",
  memory_forget: "Delete a wrong or outdated memory, by URI or by an unambiguous query.",
  memory_expand:
    "Go back from a recalled item (its ref), a compact summary, checkpoint or memory to the original conversation turns.",
};

type Args = Record<string, unknown>;

function text(value: unknown): ToolResult {
  return { content: [{ type: "text", text: JSON.stringify(value) }], details: value };
}

function str(args: Args, key: string): string {
  const value = args[key];
  if (value === undefined) return "";
  if (typeof value !== "string") throw new Error(`${key}: must be a string`);
  return value;
}

function int(args: Args, key: string): number {
  const value = args[key];
  if (value === undefined) return 0;
  if (!Number.isInteger(value)) throw new Error(`${key}: must be an integer`);
  return value as number;
}

export function createTool(name: ToolName, config: PluginConfig, ctx: ToolContext): Tool {
  const clients = engineClients(config);
  const identity = () => identityFor(config, ctx.sessionId ?? "", ctx.sessionKey);
  const run: Record<ToolName, (args: Args, headers: Record<string, string>) => Promise<ToolResult>> = {
    async memory_recall(args, headers) {
      const response = await unary(
        clients.assembly,
        clients.assembly.recallMemories,
        RecallMemoriesRequest.fromPartial({
          identity: identity(),
          query: str(args, "query"),
          limit: int(args, "limit"),
          overrides: config.overrides,
        }),
        config.deadlines.toolMs,
        headers,
      );
      const result = response.toolResult?.json ? JSON.parse(response.toolResult.json) : { memories: response.memories };
      return text(result);
    },
    async memory_store(args, headers) {
      const scope = str(args, "scope") === "agent" ? MemoryScope.MEMORY_SCOPE_AGENT : MemoryScope.MEMORY_SCOPE_USER;
      const response = await unary(
        clients.capture,
        clients.capture.storeMemory,
        StoreMemoryRequest.fromPartial({ identity: identity(), text: str(args, "text"), category: str(args, "category"), scope }),
        config.deadlines.toolMs,
        headers,
      );
      return text({ uri: response.uri, created: response.created });
    },
    async memory_forget(args, headers) {
      const uri = str(args, "uri");
      const request = ForgetMemoryRequest.fromPartial({ identity: identity(), ...(uri ? { uri } : { query: str(args, "query") }) });
      const response = await unary(clients.capture, clients.capture.forgetMemory, request, config.deadlines.toolMs, headers);
      return text({ deletedUris: response.deletedUris, candidates: response.candidates.map((c) => ({ uri: c.uri, content: c.content })) });
    },
    async memory_expand(args, headers) {
      const response = await unary(
        clients.compaction,
        clients.compaction.expandMemory,
        ExpandMemoryRequest.fromPartial({
          identity: identity(),
          summaryOrMemoryUri: str(args, "summaryOrMemoryUri"),
          query: str(args, "query"),
          limit: int(args, "limit") || config.expandLimit,
        }),
        config.deadlines.toolMs,
        headers,
      );
      return text({
        checkpointId: response.checkpointId,
        linkedUris: response.linkedUris,
        readableUris: response.readableUris,
        // Each turn as the host's own message (role, text, tool calls with their arguments,
        // tool results): the engine keeps the message exactly as the host sent it.
        turns: response.turns.map((t) => ({
          sequence: t.turn?.sequence ?? 0,
          sourceUri: t.sourceUri,
          ...(t.message ? { message: toHostMessage(t.message) } : {}),
        })),
      });
    },
  };
  return {
    name,
    label: name,
    description: DESCRIPTIONS[name],
    parameters: TOOL_PARAMETERS[name],
    catalogMode: "direct-only",
    async execute(_toolCallId, params) {
      const scope = TraceScope.start(`tool ${name}`, { "tool.name": name }, turnOf(ctx.sessionKey ?? ctx.sessionId));
      try {
        return await run[name]((params ?? {}) as Args, scope.headers());
      } catch (error) {
        scope.fail(error);
        throw error;
      } finally {
        await scope.end();
      }
    },
  };
}
