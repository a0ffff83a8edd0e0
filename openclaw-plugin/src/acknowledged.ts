/**
 * What the engine has acknowledged of each host session, and the turns it has not.
 *
 * While the engine is down OpenClaw keeps a failed commitTurn in its outbox, but the turn after
 * it runs on the host's built-in engine: that turn's commitTurn never reaches this plugin. Its
 * messages are still in the host transcript the next `assemble` gets. So the plugin remembers,
 * per session, the last turn the engine acknowledged (committed or duplicate) and the newest
 * transcript `assemble` saw; before it commits a turn it commits every turn between the two,
 * each under its own key, in order.
 *
 * A turn is found in the transcript by its run: OpenClaw keys the user message that opens a
 * run `"<runId>:user"` (`idempotencyKey`), in the transcript and on a commit's `admission`
 * alike. The commit's `advancementKey` (the admission's `logicalTurnId`) is another id, found
 * nowhere in the transcript: acknowledging by it matched nothing, and no gap was ever found.
 * Nothing is guessed: a session without an acknowledged turn in this process, or whose
 * acknowledged turn is no longer in the transcript, recovers nothing.
 *
 * The records live on `globalThis`: the host builds the engine once per turn and loads this
 * module more than once per process. After an outage the host's retry of the first failed turn
 * comes first (from its outbox, in the process that runs the next turn), so the acknowledged
 * run is known there even in a fresh process. A recovered turn is at most
 * `MAX_RECOVERED_TURNS` back, far inside the committed keys the engine remembers, so a stale
 * record only ever costs DUPLICATEs.
 */
import { type HostMessage, isEngineMade } from "./messages.js";

const RECORDS_KEY = Symbol.for("viking-context-engine.acknowledged-turns");
const USER_KEY_SUFFIX = ":user";
/** Sessions remembered per process (oldest dropped first). */
const MAX_SESSIONS = 1_000;
/** Turns one commit may recover (the engine remembers the newest 64 committed keys). */
export const MAX_RECOVERED_TURNS = 32;

type SessionRecord = { acknowledged?: string; transcript?: HostMessage[]; prompt?: string };

/** A turn the host handled without the engine, as found in its transcript (its run's id). */
export type MissedTurn = { runId: string; messages: HostMessage[] };

function records(): Map<string, SessionRecord> {
  const holder = globalThis as typeof globalThis & { [RECORDS_KEY]?: Map<string, SessionRecord> };
  holder[RECORDS_KEY] ??= new Map();
  return holder[RECORDS_KEY];
}

function record(sessionId: string): SessionRecord {
  const all = records();
  const found = all.get(sessionId) ?? {};
  all.delete(sessionId); // re-inserted last: the map's order is least recently used first
  all.set(sessionId, found);
  while (all.size > MAX_SESSIONS) all.delete(all.keys().next().value as string);
  return found;
}

function runOfKey(key: unknown): string | undefined {
  if (typeof key !== "string" || !key.endsWith(USER_KEY_SUFFIX)) return undefined;
  const id = key.slice(0, -USER_KEY_SUFFIX.length);
  return id.length > 0 ? id : undefined;
}

/** The run a message opens, if it is a keyed user message. */
export function turnOpenedBy(message: HostMessage): string | undefined {
  return message.role === "user" ? runOfKey(message.idempotencyKey) : undefined;
}

/** The run of a committed turn: its admission's key, else its first keyed user message's. */
export function runOfCommit(admission: Record<string, unknown>, messages: HostMessage[]): string | undefined {
  return runOfKey(admission.idempotencyKey) ?? messages.map(turnOpenedBy).find((id) => id !== undefined);
}

/** The host's transcript as `assemble` got it, less the messages the engine put there, and
 * the prompt of the turn in progress (when the call has one). */
export function rememberTranscript(sessionId: string, messages: HostMessage[], prompt?: string): void {
  const found = record(sessionId);
  found.transcript = messages.filter((m) => !isEngineMade(m));
  if (prompt) found.prompt = prompt;
}

/** What `assemble` last saw of a session in this process (nothing when it saw none). */
export function transcriptOf(sessionId: string | undefined): { messages: HostMessage[]; prompt: string } {
  const found = sessionId === undefined ? undefined : records().get(sessionId);
  return { messages: found?.transcript ?? [], prompt: found?.prompt ?? "" };
}

export function acknowledge(sessionId: string, runId: string): void {
  record(sessionId).acknowledged = runId;
}

/** The turns after the acknowledged run and before run `current`, in transcript order. */
export function missedTurns(sessionId: string, current: string | undefined): MissedTurn[] {
  const { acknowledged, transcript } = record(sessionId);
  if (acknowledged === undefined || transcript === undefined || acknowledged === current) return [];
  const opened = transcript.map(turnOpenedBy);
  const from = opened.indexOf(acknowledged);
  if (from < 0) return [];
  const turns: MissedTurn[] = [];
  for (let i = from + 1; i < transcript.length; i++) {
    const id = opened[i];
    if (id === undefined) {
      turns.at(-1)?.messages.push(transcript[i]);
      continue;
    }
    if (id === current) break;
    turns.push({ runId: id, messages: [transcript[i]] });
  }
  return turns.slice(-MAX_RECOVERED_TURNS);
}
