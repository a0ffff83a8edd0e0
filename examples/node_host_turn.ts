/**
 * A Node.js host turn against the engine, traced end to end.
 *
 * The host opens one span per turn (`host.turn`) and sends its W3C `traceparent` in the gRPC
 * metadata of Assemble, AfterTurn and Compact, so the three services (and the OpenViking calls
 * they make) join the host's trace.
 *
 *   npx tsx examples/node_host_turn.ts [target]        # default 127.0.0.1:50051 (--service all)
 *   CAPTURE_TARGET=... ASSEMBLY_TARGET=... COMPACTION_TARGET=... npx tsx examples/node_host_turn.ts
 *
 * With an OpenTelemetry SDK registered by the host (e.g. @opentelemetry/sdk-node), `host.turn`
 * is a real, exported span and its context is used. Without one (this repo installs only
 * @opentelemetry/api) the API's span is non-recording, so the example makes up a valid trace
 * id and span id itself: the services' spans still share one trace, whose root is not exported.
 */
import { randomBytes, randomUUID } from "node:crypto";

import { credentials, Metadata, type ServiceError } from "@grpc/grpc-js";
import { context, isSpanContextValid, type SpanContext, trace, TraceFlags } from "@opentelemetry/api";

import { AssembleRequest, AssembleResponse, AssemblyServiceClient } from "../gen/ts/contextengine/v1/assembly.js";
import { AfterTurnRequest, AfterTurnResponse, CaptureServiceClient } from "../gen/ts/contextengine/v1/capture.js";
import { compactionTriggerToJSON } from "../gen/ts/contextengine/v1/checkpoint.js";
import { ConversationMessage, Identity, MessageRole } from "../gen/ts/contextengine/v1/common.js";
import { CompactionServiceClient, CompactRequest, CompactResponse } from "../gen/ts/contextengine/v1/compaction.js";

const target = process.argv[2] ?? "127.0.0.1:50051";
const targets = {
  capture: process.env.CAPTURE_TARGET ?? target,
  assembly: process.env.ASSEMBLY_TARGET ?? target,
  compaction: process.env.COMPACTION_TARGET ?? target,
};
const TOKEN_BUDGET = 32_000;

/** W3C `traceparent` for a span context: `00-<32 hex trace id>-<16 hex span id>-<flags>`. */
function traceparent(spanContext: SpanContext): string {
  const flags = (spanContext.traceFlags & 0xff).toString(16).padStart(2, "0");
  return `00-${spanContext.traceId}-${spanContext.spanId}-${flags}`;
}

/** The turn span's context, or a fresh sampled one when no SDK is registered. */
function turnSpanContext(apiContext: SpanContext | undefined): SpanContext {
  if (apiContext && isSpanContextValid(apiContext)) {
    return apiContext;
  }
  return {
    traceId: randomBytes(16).toString("hex"),
    spanId: randomBytes(8).toString("hex"),
    traceFlags: TraceFlags.SAMPLED,
  };
}

function text(role: MessageRole, body: string): ConversationMessage {
  return ConversationMessage.fromPartial({ id: randomUUID(), role, content: [{ text: { text: body } }] });
}

/** Promise wrapper over a grpc-js unary method taking (request, metadata, options, callback). */
function unary<Req, Res>(
  call: (
    request: Req,
    metadata: Metadata,
    options: { deadline: Date },
    callback: (error: ServiceError | null, response: Res) => void,
  ) => unknown,
  request: Req,
  metadata: Metadata,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    call(request, metadata, { deadline: new Date(Date.now() + 30_000) }, (error, response) =>
      error ? reject(error) : resolve(response),
    );
  });
}

async function main(): Promise<void> {
  const insecure = credentials.createInsecure();
  const capture = new CaptureServiceClient(targets.capture, insecure);
  const assembly = new AssemblyServiceClient(targets.assembly, insecure);
  const compaction = new CompactionServiceClient(targets.compaction, insecure);
  const identity = Identity.fromPartial({
    accountId: "default",
    userId: "default",
    agentId: "main",
    sessionId: `node-example-${randomUUID().slice(0, 8)}`,
  });
  const prompt = "Which database did we pick for the billing service, and why?";
  const user = text(MessageRole.MESSAGE_ROLE_USER, prompt);
  const assistant = text(MessageRole.MESSAGE_ROLE_ASSISTANT, "PostgreSQL, for transactions across accounts.");

  const tracer = trace.getTracer("example-host");
  const span = tracer.startSpan("host.turn");
  const spanContext = turnSpanContext(span.spanContext());
  try {
    await context.with(trace.setSpan(context.active(), span), async () => {
      const metadata = new Metadata();
      metadata.set("traceparent", traceparent(spanContext));

      const assembled = await unary<AssembleRequest, AssembleResponse>(
        assembly.assemble.bind(assembly),
        AssembleRequest.fromPartial({ identity, messages: [user], tokenBudget: TOKEN_BUDGET, prompt }),
        metadata,
      );
      console.log(`assembled: ${assembled.messages.length} messages, ${assembled.estimatedTokens} tokens`);

      // ... the model runs on assembled.messages and answers `assistant` ...
      const afterTurn = await unary<AfterTurnRequest, AfterTurnResponse>(
        capture.afterTurn.bind(capture),
        AfterTurnRequest.fromPartial({
          identity,
          messages: [user, assistant],
          prePromptMessageCount: 0,
          tokenBudget: TOKEN_BUDGET,
        }),
        metadata,
      );
      console.log(
        `after turn: persisted=${afterTurn.persistedCount} trigger=${compactionTriggerToJSON(afterTurn.triggerFired)}`,
      );

      const compacted = await unary<CompactRequest, CompactResponse>(
        compaction.compact.bind(compaction),
        CompactRequest.fromPartial({ identity, tokenBudget: TOKEN_BUDGET, force: true, background: true }),
        metadata,
      );
      console.log(`compact: ok=${compacted.ok} reason=${JSON.stringify(compacted.reason)}`);
    });
  } finally {
    span.end();
    capture.close();
    assembly.close();
    compaction.close();
  }
  console.log(`trace id: ${spanContext.traceId}  (Jaeger: Search -> Trace ID)`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
