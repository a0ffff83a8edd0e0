/**
 * bootstrap: import a session that existed before the engine saw it, once.
 *
 * The host passes no messages to `bootstrap`; the visible history comes from its transcript
 * cursor API (`openclaw/plugin-sdk/session-transcript-runtime`). The import is an Ingest with
 * `only_if_new`, which the engine applies only while the stream has no messages, in the same
 * compare-and-swap that claims them: repeated or concurrent bootstraps (the host calls it on
 * every turn of an existing session) store the history once and nothing after the first turn.
 */
import type { BootstrapParams } from "./host.js";
import type { HostMessage } from "./messages.js";

const TRANSCRIPT_SDK = "openclaw/plugin-sdk/session-transcript-runtime";
const MAX_IMPORTED_MESSAGES = 10_000;
const SEEN_KEY = Symbol.for("viking-context-engine.bootstrapped-sessions");

/** A page of `readSessionTranscriptVisibleMessageDelta` (2026.9.1-2026.9.6): visible message entries. */
type Page = { kind: string; entries?: { message?: unknown }[] };
type TranscriptSdk = { readSessionTranscriptVisibleMessageDelta?: (params: Record<string, unknown>) => Promise<Page> };

function seen(): Set<string> {
  const holder = globalThis as typeof globalThis & { [SEEN_KEY]?: Set<string> };
  holder[SEEN_KEY] ??= new Set();
  return holder[SEEN_KEY];
}

function messageOf(entry: { message?: unknown }): HostMessage | undefined {
  const candidate = entry.message as Partial<HostMessage> | undefined;
  return typeof candidate?.role === "string" ? (candidate as HostMessage) : undefined;
}

async function readHistory(params: BootstrapParams): Promise<HostMessage[] | string> {
  let sdk: TranscriptSdk;
  try {
    sdk = (await import(TRANSCRIPT_SDK)) as TranscriptSdk;
  } catch {
    return "the host's transcript reader is not available";
  }
  if (typeof sdk.readSessionTranscriptVisibleMessageDelta !== "function") return "the host has no transcript cursor API";
  const page = await sdk.readSessionTranscriptVisibleMessageDelta({
    agentId: params.sessionTarget?.agentId,
    sessionKey: params.sessionKey ?? params.sessionTarget?.sessionKey,
    sessionId: params.sessionId,
    maxMessages: MAX_IMPORTED_MESSAGES,
  });
  if (page.kind !== "page") return `the transcript is ${page.kind}`;
  return (page.entries ?? []).map(messageOf).filter((m): m is HostMessage => m !== undefined);
}

export async function importHostHistory(
  params: BootstrapParams,
  ingest: (messages: HostMessage[]) => Promise<number>,
): Promise<{ bootstrapped: boolean; importedMessages?: number; reason?: string }> {
  if (seen().has(params.sessionId)) return { bootstrapped: true, importedMessages: 0, reason: "already imported" };
  try {
    const history = await readHistory(params);
    if (typeof history === "string") return { bootstrapped: false, reason: history };
    const imported = history.length > 0 ? await ingest(history) : 0;
    seen().add(params.sessionId);
    return { bootstrapped: true, importedMessages: imported };
  } catch (error) {
    return { bootstrapped: false, reason: error instanceof Error ? error.message : String(error) };
  }
}
