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
/** Links remembered per process (oldest dropped first). */
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

function links(): Map<string, SubagentLink> {
  const holder = globalThis as typeof globalThis & { [LINKS_KEY]?: Map<string, SubagentLink> };
  holder[LINKS_KEY] ??= new Map();
  return holder[LINKS_KEY];
}

export function link(childSessionKey: string, value: SubagentLink): void {
  const all = links();
  all.delete(childSessionKey);
  all.set(childSessionKey, value);
  while (all.size > MAX_LINKS) all.delete(all.keys().next().value as string);
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
