/**
 * The subagent sessions this process prepared (`prepareSubagentSpawn`): child session key -> the
 * parent it came from, the packet of the parent's context it starts with, and its newest answer.
 *
 * On `globalThis`: the host builds an engine per call (spawn, each child turn, the end notice
 * each get their own) and loads this module more than once per process. Bounded; a link is
 * dropped when the child's end is captured or its spawn rolled back.
 */
import type { HostMessage } from "./messages.js";

const LINKS_KEY = Symbol.for("viking-context-engine.subagent-links");
const SESSIONS_KEY = Symbol.for("viking-context-engine.session-ids");
/** Links (and session ids) remembered per process (oldest dropped first). */
const MAX_LINKS = 1_000;
/** Nesting followed to find a subagent's owner (a child of a child ...). */
const MAX_DEPTH = 16;

export type SubagentLink = {
  parentSessionKey: string;
  parentSessionId?: string;
  /** The parent's context as the child's model is shown it (system prompt), bounded. */
  packet?: string;
  /** The child's newest assistant answer (what its end stores in the parent's stream). */
  answer?: string;
};

function processMap<V>(key: symbol): Map<string, V> {
  const holder = globalThis as typeof globalThis & Record<symbol, Map<string, V> | undefined>;
  holder[key] ??= new Map();
  return holder[key];
}

const links = () => processMap<SubagentLink>(LINKS_KEY);
const sessionIds = () => processMap<string>(SESSIONS_KEY);

/** Set `key` last (the maps' order is least recently set first), dropping the oldest past the bound. */
function put<V>(all: Map<string, V>, key: string, value: V): void {
  all.delete(key);
  all.set(key, value);
  while (all.size > MAX_LINKS) all.delete(all.keys().next().value as string);
}

export function link(childSessionKey: string, value: SubagentLink): void {
  put(links(), childSessionKey, value);
}

/** Remember a session key's session id: OpenClaw 2026.9.6 spawns an isolated child without the
 * parent's (`parentSessionId` absent), and ends it with the child's key only. */
export function noteSession(sessionKey: string | undefined, sessionId: string): void {
  if (sessionKey !== undefined && sessionIds().get(sessionKey) !== sessionId) put(sessionIds(), sessionKey, sessionId);
}

export function sessionIdOf(sessionKey: string): string | undefined {
  return sessionIds().get(sessionKey);
}

export function linkOf(childSessionKey: string | undefined): SubagentLink | undefined {
  return childSessionKey === undefined ? undefined : links().get(childSessionKey);
}

export function unlink(childSessionKey: string): void {
  links().delete(childSessionKey);
}

/** The session a subagent's session belongs to (its root parent); undefined when not a child. */
export function parentSessionKeyOf(sessionKey: string | undefined): string | undefined {
  let found: string | undefined;
  for (let key = sessionKey, depth = 0; depth < MAX_DEPTH; depth++) {
    const parent = linkOf(key)?.parentSessionKey;
    if (parent === undefined) break;
    found = key = parent;
  }
  return found;
}

/** The text of a host message's text blocks. */
export function textOf(message: HostMessage): string {
  if (typeof message.content === "string") return message.content;
  if (!Array.isArray(message.content)) return "";
  return (message.content as { type?: unknown; text?: unknown }[])
    .filter((b) => b.type === "text" && typeof b.text === "string")
    .map((b) => b.text as string)
    .join("\n");
}

/** Keep a linked child's newest answer (the last assistant text of a turn it committed). */
export function noteAnswer(childSessionKey: string | undefined, messages: HostMessage[]): void {
  const found = linkOf(childSessionKey);
  const answer = messages
    .filter((m) => m.role === "assistant")
    .map(textOf)
    .filter((t) => t.trim().length > 0)
    .at(-1);
  if (found !== undefined && answer !== undefined) found.answer = answer;
}
