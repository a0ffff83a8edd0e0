/**
 * OpenClaw messages <-> the engine's ConversationMessage, losslessly in both directions.
 *
 * What the engine reads is mapped to its typed blocks (text, thinking, images, tool calls with
 * their JSON arguments, tool results); everything else of the host message stays in
 * `host_fields`, verbatim, and comes back unchanged. A block the typed form cannot reproduce
 * exactly (unknown type, extra fields) is kept whole in `host_fields` too, by position. Messages
 * the engine adds (auto-recall exchange, summaries; marked `contextengine_injected`) get the
 * fields OpenClaw expects of their role.
 */
import type { ContentBlock, ConversationMessage } from "../gen/contextengine/v1/common.js";
import { MessageRole } from "../gen/contextengine/v1/common.js";

export type HostBlock = Record<string, unknown> & { type?: unknown };
export type HostMessage = Record<string, unknown> & { role: string; content?: unknown };

const CONTENT_IS_STRING = "_ceContentString";
const KEPT_BLOCKS = "_ceBlocks";
const HOST_ROLE = "_ceRole";
const ENGINE_KEYS = [CONTENT_IS_STRING, KEPT_BLOCKS, HOST_ROLE];
/** The marker the engine puts in `host_fields` of the messages it adds (auto recall, summaries). */
const ENGINE_INJECTED = "contextengine_injected";

const ROLE_TO_ENGINE: Record<string, MessageRole> = {
  user: MessageRole.MESSAGE_ROLE_USER,
  assistant: MessageRole.MESSAGE_ROLE_ASSISTANT,
  toolResult: MessageRole.MESSAGE_ROLE_TOOL_RESULT,
  system: MessageRole.MESSAGE_ROLE_SYSTEM,
};
const ENGINE_TO_ROLE = new Map<MessageRole, string>(Object.entries(ROLE_TO_ENGINE).map(([k, v]) => [v, k]));

/** JSON text with object keys sorted: equal values, equal text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v,
  );
}

const DATA_URI = /^data:([^;,]*);base64,(.*)$/s;

function toEngineBlock(block: HostBlock): ContentBlock {
  switch (block.type) {
    case "text":
      return { text: { text: String(block.text ?? "") } };
    case "thinking":
      return {
        thinking: {
          thinking: String(block.thinking ?? ""),
          signature: typeof block.thinkingSignature === "string" ? block.thinkingSignature : "",
          redacted: block.redacted === true,
        },
      };
    case "image": {
      const mimeType = String(block.mimeType ?? "");
      return { image: { uri: `data:${mimeType};base64,${String(block.data ?? "")}`, mimeType } };
    }
    case "toolCall":
      return {
        toolCall: {
          id: String(block.id ?? ""),
          name: String(block.name ?? ""),
          arguments: { json: JSON.stringify(block.arguments ?? {}) },
        },
      };
    default:
      return { text: { text: "" } };
  }
}

function toHostBlock(block: ContentBlock): HostBlock {
  if (block.text) return { type: "text", text: block.text.text };
  if (block.thinking) {
    const out: HostBlock = { type: "thinking", thinking: block.thinking.thinking };
    if (block.thinking.signature) out.thinkingSignature = block.thinking.signature;
    if (block.thinking.redacted) out.redacted = true;
    return out;
  }
  if (block.image) {
    const match = DATA_URI.exec(block.image.uri);
    return { type: "image", data: match ? match[2] : block.image.uri, mimeType: block.image.mimeType };
  }
  if (block.toolCall) {
    const raw = block.toolCall.arguments?.json ?? "";
    return { type: "toolCall", id: block.toolCall.id, name: block.toolCall.name, arguments: raw ? JSON.parse(raw) : {} };
  }
  return { type: "text", text: "" };
}

function hostBlocksOf(content: unknown): HostBlock[] {
  if (typeof content === "string") return [{ type: "text", text: content }];
  return Array.isArray(content) ? (content as HostBlock[]) : [];
}

/** Engine blocks plus the host blocks the typed form would not give back exactly, by position. */
function mapBlocks(blocks: HostBlock[]): { mapped: ContentBlock[]; kept: Record<string, HostBlock> } {
  const kept: Record<string, HostBlock> = {};
  const mapped = blocks.map((block, i) => {
    const engine = toEngineBlock(block);
    if (canonicalJson(toHostBlock(engine)) !== canonicalJson(block)) kept[String(i)] = block;
    return engine;
  });
  return { mapped, kept };
}

function restoreBlocks(blocks: ContentBlock[], kept: Record<string, HostBlock> | undefined): HostBlock[] {
  return blocks.map((block, i) => kept?.[String(i)] ?? toHostBlock(block));
}

function timestampOf(value: unknown): ConversationMessage["timestamp"] {
  if (typeof value !== "number" || !Number.isFinite(value)) return undefined;
  const seconds = Math.floor(value / 1000);
  return { seconds, nanos: Math.round((value - seconds * 1000) * 1e6) };
}

/** One OpenClaw message as the engine's ConversationMessage. */
export function toEngineMessage(message: HostMessage): ConversationMessage {
  const { role, content, ...rest } = message;
  const hostFields: Record<string, unknown> = { ...rest };
  const engineRole = ROLE_TO_ENGINE[role];
  if (engineRole === undefined) hostFields[HOST_ROLE] = role;
  if (typeof content === "string") hostFields[CONTENT_IS_STRING] = true;
  let blocks: ContentBlock[];
  if (role === "toolResult") {
    const inner = mapBlocks(hostBlocksOf(content));
    if (Object.keys(inner.kept).length > 0) hostFields[KEPT_BLOCKS] = inner.kept;
    blocks = [
      {
        toolResult: {
          toolCallId: String(message.toolCallId ?? ""),
          toolName: String(message.toolName ?? ""),
          content: inner.mapped,
          isError: message.isError === true,
          details: message.details === undefined ? undefined : { json: JSON.stringify(message.details) },
        },
      },
    ];
  } else {
    const outer = mapBlocks(hostBlocksOf(content));
    if (Object.keys(outer.kept).length > 0) hostFields[KEPT_BLOCKS] = outer.kept;
    blocks = outer.mapped;
  }
  return {
    id: typeof message.idempotencyKey === "string" ? message.idempotencyKey : "",
    role: engineRole ?? MessageRole.MESSAGE_ROLE_SYSTEM,
    content: blocks,
    timestamp: timestampOf(message.timestamp),
    hostFields: { json: JSON.stringify(hostFields) },
  };
}

function millisOf(message: ConversationMessage): number {
  const ts = message.timestamp;
  return ts ? ts.seconds * 1000 + Math.floor(ts.nanos / 1e6) : Date.now();
}

/** Fields OpenClaw expects on a message of `role` that the engine made up (no host fields). */
function engineDefaults(role: string, message: ConversationMessage, blocks: HostBlock[]): Record<string, unknown> {
  const base = { timestamp: millisOf(message) };
  if (role !== "assistant") return base;
  const usage = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, totalTokens: 0 };
  return {
    ...base,
    api: "openai-completions",
    provider: "viking-context-engine",
    model: "viking-context-engine",
    usage: { ...usage, cost: { input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 } },
    stopReason: blocks.some((b) => b.type === "toolCall") ? "toolUse" : "stop",
  };
}

/** Whether a host message is one the engine added (auto recall, summaries), not the host's. */
export function isEngineMade(message: HostMessage): boolean {
  return ENGINE_INJECTED in message;
}

/** The engine's ConversationMessage back as the OpenClaw message it came from (or a new one). */
export function toHostMessage(message: ConversationMessage): HostMessage {
  const raw = message.hostFields?.json;
  const fields = raw ? (JSON.parse(raw) as Record<string, unknown>) : undefined;
  const kept = fields?.[KEPT_BLOCKS] as Record<string, HostBlock> | undefined;
  const role =
    typeof fields?.[HOST_ROLE] === "string" ? (fields[HOST_ROLE] as string) : (ENGINE_TO_ROLE.get(message.role) ?? "user");
  const rest = Object.fromEntries(Object.entries(fields ?? {}).filter(([key]) => !ENGINE_KEYS.includes(key)));
  const result = message.content.find((b) => b.toolResult)?.toolResult;
  let content: unknown;
  let resultFields: Record<string, unknown> = {};
  if (role === "toolResult" && result) {
    content = restoreBlocks(result.content, kept);
    resultFields = {
      toolCallId: result.toolCallId,
      toolName: result.toolName,
      isError: result.isError,
      ...(result.details?.json ? { details: JSON.parse(result.details.json) } : {}),
    };
  } else {
    const blocks = restoreBlocks(message.content, kept);
    content = fields?.[CONTENT_IS_STRING] === true ? String(blocks[0]?.text ?? "") : blocks;
  }
  const engineMade = fields === undefined || ENGINE_INJECTED in fields;
  const defaults = engineMade ? engineDefaults(role, message, hostBlocksOf(content)) : {};
  return { role, content, ...defaults, ...resultFields, ...rest };
}
