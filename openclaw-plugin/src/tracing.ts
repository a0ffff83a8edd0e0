/**
 * One trace per turn: the plugin opens the turn span and sends its W3C `traceparent` with every
 * RPC, so the engine's spans (and their OpenViking calls) join the host's trace.
 *
 * Configured only by the standard `OTEL_*` variables: with an OTLP endpoint set, spans are
 * exported over OTLP/gRPC by this plugin's own tracer provider (never registered globally, so
 * the host's telemetry is untouched); without one, the span context is still made up and
 * propagated, and the services' spans share one trace whose root is not exported.
 */
import { randomBytes } from "node:crypto";

import {
  context as contextApi,
  isSpanContextValid,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace as traceApi,
  type Tracer,
} from "@opentelemetry/api";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-grpc";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";

import { manifest, PLUGIN_ID } from "./config.js";

const PROVIDER_KEY = Symbol.for("viking-context-engine.tracer-provider");
const ACTIVE_TURNS_KEY = Symbol.for("viking-context-engine.active-turns");
const FLUSH_TIMEOUT_MS = 2_000;

type Holder = typeof globalThis & {
  [PROVIDER_KEY]?: TracerProvider | null;
  [ACTIVE_TURNS_KEY]?: Map<string, SpanContext>;
};
const holder = globalThis as Holder;

function exportConfigured(env: NodeJS.ProcessEnv): boolean {
  if (env.OTEL_SDK_DISABLED === "true" || env.OTEL_TRACES_EXPORTER === "none") return false;
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

/** The process-wide provider, or null when no OTLP endpoint is configured. */
function provider(): TracerProvider | null {
  if (holder[PROVIDER_KEY] === undefined) {
    holder[PROVIDER_KEY] = exportConfigured(process.env)
      ? new TracerProvider({
          resource: resourceFromAttributes({
            "service.name": process.env.OTEL_SERVICE_NAME || "openclaw",
            "service.version": manifest.version,
          }),
          spanProcessors: [new SimpleSpanProcessor({ exporter: new OTLPTraceExporter() })],
        })
      : null;
  }
  return holder[PROVIDER_KEY];
}

function activeTurns(): Map<string, SpanContext> {
  holder[ACTIVE_TURNS_KEY] ??= new Map();
  return holder[ACTIVE_TURNS_KEY];
}

function madeUpContext(): SpanContext {
  return { traceId: randomBytes(16).toString("hex"), spanId: randomBytes(8).toString("hex"), traceFlags: TraceFlags.SAMPLED };
}

/** W3C `traceparent` for a span context: `00-<trace id>-<span id>-<flags>`. */
export function traceparent(context: SpanContext): string {
  const flags = (context.traceFlags & 0xff).toString(16).padStart(2, "0");
  return `00-${context.traceId}-${context.spanId}-${flags}`;
}

/** A span (turn or tool call) and the headers that carry it into an RPC. */
export class TraceScope {
  private constructor(
    private readonly span: Span | undefined,
    readonly context: SpanContext,
  ) {}

  static start(name: string, attributes: Record<string, string>, parent?: SpanContext): TraceScope {
    const tracer: Tracer | undefined = provider()?.getTracer(PLUGIN_ID, manifest.version);
    if (tracer === undefined) return new TraceScope(undefined, parent ?? madeUpContext());
    const parentContext = parent ? traceContextOf(parent) : undefined;
    const span = tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes }, parentContext);
    const context = span.spanContext();
    return new TraceScope(span, isSpanContextValid(context) ? context : madeUpContext());
  }

  headers(): Record<string, string> {
    return { traceparent: traceparent(this.context) };
  }

  fail(error: unknown): void {
    this.span?.recordException(error instanceof Error ? error : String(error));
    this.span?.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
  }

  async end(): Promise<void> {
    if (this.span === undefined) return;
    this.span.end();
    const flushing = provider()?.forceFlush();
    await Promise.race([flushing, new Promise((resolve) => setTimeout(resolve, FLUSH_TIMEOUT_MS).unref())]);
  }
}

function traceContextOf(parent: SpanContext) {
  return traceApi.setSpanContext(contextApi.active(), parent);
}

/** Remember the turn span of a session so the tools the model calls in that turn join it. */
export function rememberTurn(sessionKey: string, context: SpanContext): void {
  activeTurns().set(sessionKey, context);
}

export function forgetTurn(sessionKey: string, context: SpanContext): void {
  if (activeTurns().get(sessionKey)?.spanId === context.spanId) activeTurns().delete(sessionKey);
}

export function turnOf(sessionKey: string | undefined): SpanContext | undefined {
  return sessionKey === undefined ? undefined : activeTurns().get(sessionKey);
}
