/**
 * gRPC clients, one per (service, target, TLS) for the whole process.
 *
 * OpenClaw builds the engine once per turn and loads this module more than once per process,
 * so the cache lives on `globalThis`: every turn and every module instance reuses the same
 * channels (and their connections), which grpc-js reconnects by itself after an outage.
 */
import { ChannelCredentials, type Client, connectivityState, Metadata, type ServiceError, status } from "@grpc/grpc-js";

import { AssemblyServiceClient } from "../gen/contextengine/v1/assembly.js";
import { CaptureServiceClient } from "../gen/contextengine/v1/capture.js";
import { CompactionServiceClient } from "../gen/contextengine/v1/compaction.js";
import type { PluginConfig } from "./config.js";

const CACHE_KEY = Symbol.for("viking-context-engine.grpc-clients");
/** The `Metadata` class of the grpc-js instance that made a client (see `unary`). */
const METADATA_CLASS = Symbol.for("viking-context-engine.grpc-metadata-class");
const CHANNEL_OPTIONS = {
  "grpc.keepalive_time_ms": 30_000,
  "grpc.max_receive_message_length": 64 * 1024 * 1024,
  "grpc.max_send_message_length": 64 * 1024 * 1024,
  // Reconnect quickly after the engine restarts (grpc-js backs off up to 120 s by default).
  "grpc.initial_reconnect_backoff_ms": 200,
  "grpc.max_reconnect_backoff_ms": 2_000,
};
/**
 * Longest a call waits for a channel that is backing off after a failed connect: over the
 * backoff cap plus its 20 % jitter, so the channel's next attempt falls inside it. A channel in
 * that state fails calls at once, so the first call after the engine came back failed until the
 * next attempt (seen on the real host: the turn after an outage retried its commit 1.8 s after
 * the engine was up, failed, and ran on the host's built-in engine).
 */
const RECONNECT_WAIT_MS = 2_500;

type Constructor<C> = new (target: string, credentials: ChannelCredentials, options: object) => C;
type Cache = Map<string, Client>;

function cache(): Cache {
  const holder = globalThis as typeof globalThis & { [CACHE_KEY]?: Cache };
  holder[CACHE_KEY] ??= new Map();
  return holder[CACHE_KEY];
}

function client<C extends Client>(kind: string, make: Constructor<C>, target: string, tls: boolean): C {
  const key = `${kind}|${target}|${tls ? "tls" : "plaintext"}`;
  const clients = cache();
  let found = clients.get(key);
  if (found === undefined) {
    const credentials = tls ? ChannelCredentials.createSsl() : ChannelCredentials.createInsecure();
    found = new make(target, credentials, CHANNEL_OPTIONS);
    Object.defineProperty(found, METADATA_CLASS, { value: Metadata });
    clients.set(key, found);
  }
  return found as C;
}

export type EngineClients = {
  capture: CaptureServiceClient;
  assembly: AssemblyServiceClient;
  compaction: CompactionServiceClient;
};

export function engineClients(config: PluginConfig): EngineClients {
  return {
    capture: client("capture", CaptureServiceClient, config.targets.capture, config.tls),
    assembly: client("assembly", AssemblyServiceClient, config.targets.assembly, config.tls),
    compaction: client("compaction", CompactionServiceClient, config.targets.compaction, config.tls),
  };
}

/** Close every cached channel (tests; the host process owns them otherwise). */
export function closeAllClients(): void {
  for (const c of cache().values()) c.close();
  cache().clear();
}

type UnaryMethod<Req, Res> = (
  request: Req,
  metadata: Metadata,
  options: { deadline: Date },
  callback: (error: ServiceError | null, response: Res) => void,
) => unknown;

/** Resolves at once unless the client's channel is backing off from a failed connect; then once
 * it is ready, or after `RECONNECT_WAIT_MS` (the engine is still down), or at `deadline`. */
function reconnected(client: Client, deadline: number): Promise<void> {
  if (client.getChannel().getConnectivityState(true) !== connectivityState.TRANSIENT_FAILURE) return Promise.resolve();
  return new Promise((resolve) => client.waitForReady(Math.min(deadline, Date.now() + RECONNECT_WAIT_MS), () => resolve()));
}

/**
 * One unary call with a deadline and the given metadata entries (e.g. `traceparent`); the
 * deadline covers waiting for a reconnecting channel (`RECONNECT_WAIT_MS`) too.
 *
 * The metadata is built with the grpc-js instance that made the client: OpenClaw may load this
 * module (and so grpc-js) more than once, and grpc-js rejects another instance's `Metadata`.
 */
export async function unary<C extends Client, Req, Res>(
  client: C,
  method: UnaryMethod<Req, Res>,
  request: Req,
  deadlineMs: number,
  headers: Record<string, string>,
): Promise<Res> {
  const deadline = Date.now() + deadlineMs;
  await reconnected(client, deadline);
  const MetadataClass = (client as unknown as { [METADATA_CLASS]?: typeof Metadata })[METADATA_CLASS] ?? Metadata;
  const metadata = new MetadataClass();
  for (const [key, value] of Object.entries(headers)) metadata.set(key, value);
  return new Promise((resolve, reject) => {
    method.call(client, request, metadata, { deadline: new Date(deadline) }, (error, response) =>
      error ? reject(error) : resolve(response),
    );
  });
}

/** True when the engine could not be reached or did not answer in time (not a refusal). */
export function isUnreachable(error: unknown): boolean {
  const code = (error as Partial<ServiceError> | undefined)?.code;
  return code === status.UNAVAILABLE || code === status.DEADLINE_EXCEEDED || code === status.CANCELLED;
}
