/**
 * The OpenClaw context engine: each lifecycle call is one RPC to the engine's services.
 *
 * The host builds one of these per turn (factory -> calls -> dispose), so it holds nothing but
 * the turn's span; channels come from the process-wide cache. Failure policy: `assemble` never
 * throws (the host's messages pass through unchanged, with a warning); `commitTurn` throws so
 * the host keeps the turn in its durable outbox and retries it (same advancement key) before
 * its next turn; `compact` reports `ok: false`.
 */
import { AssembleRequest } from "../gen/contextengine/v1/assembly.js";
import { CommitTurnRequest, CommitTurnStatus, IngestRequest } from "../gen/contextengine/v1/capture.js";
import { CompactionTrigger } from "../gen/contextengine/v1/checkpoint.js";
import { CompactRequest } from "../gen/contextengine/v1/compaction.js";
import { engineClients, unary } from "./channels.js";
import { manifest, PLUGIN_ID, type PluginConfig } from "./config.js";
import type {
  AssembleParams,
  AssembleResult,
  BootstrapParams,
  CommitTurnParams,
  CompactParams,
  CompactResult,
  ContextEngine,
  Logger,
  TurnAnchor,
} from "./host.js";
import { acknowledge, missedTurns, rememberTranscript, runOfCommit } from "./acknowledged.js";
import { identityFor } from "./identity.js";
import { type HostMessage, toEngineMessage, toHostMessage } from "./messages.js";
import { importHostHistory } from "./bootstrap.js";
import { linkOf, noteAnswer, noteSession } from "./subagent-links.js";
import { subagentHooks } from "./subagents.js";
import { forgetTurn, rememberTurn, TraceScope } from "./tracing.js";

/** Rough size of messages the engine did not count (passthrough): 4 characters per token. */
export function roughTokens(messages: HostMessage[]): number {
  return Math.ceil(JSON.stringify(messages).length / 4);
}

/** `systemPromptAddition` of the given parts (none when all are empty). */
function withAddition(...parts: (string | undefined)[]): { systemPromptAddition?: string } {
  const text = parts.filter((p) => p).join("\n\n");
  return text ? { systemPromptAddition: text } : {};
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function createEngine(config: PluginConfig, log: Logger): ContextEngine {
  const clients = engineClients(config);
  let turn: TraceScope | undefined;
  let turnSession: string | undefined;

  /** The turn span, opened by the turn's first call. */
  function turnScope(sessionId: string, sessionKey?: string): TraceScope {
    if (turn === undefined) {
      turn = TraceScope.start("openclaw.turn", { "session.id": sessionId, "session.key": sessionKey ?? "" });
      turnSession = sessionKey ?? sessionId;
      rememberTurn(turnSession, turn.context);
    }
    return turn;
  }

  async function assemble(params: AssembleParams): Promise<AssembleResult> {
    const scope = turnScope(params.sessionId, params.sessionKey);
    rememberTranscript(params.sessionId, params.messages, params.prompt);
    noteSession(params.sessionKey, params.sessionId);
    const parentContext = linkOf(params.sessionKey)?.packet;
    try {
      const response = await unary(
        clients.assembly,
        clients.assembly.assemble,
        AssembleRequest.fromPartial({
          identity: identityFor(config, params.sessionId, params.sessionKey),
          messages: params.messages.map(toEngineMessage),
          tokenBudget: params.tokenBudget ?? params.runtimeContext?.tokenBudget ?? 0,
          model: params.model ?? "",
          prompt: params.prompt ?? "",
          overrides: config.overrides,
        }),
        config.deadlines.assembleMs,
        scope.headers(),
      );
      return {
        messages: response.messages.map(toHostMessage),
        estimatedTokens: response.estimatedTokens,
        ...withAddition(response.systemPromptAddition, parentContext),
      };
    } catch (error) {
      log.warn(`[${PLUGIN_ID}] assemble passthrough (engine unavailable: ${describe(error)})`);
      return { messages: params.messages, estimatedTokens: roughTokens(params.messages), ...withAddition(parentContext) };
    }
  }

  /** One fenced turn to the engine: true when it answered DUPLICATE (stored before). */
  async function commitOne(
    params: CommitTurnParams,
    turn: { key: string; messages: HostMessage[]; admission: TurnAnchor; terminal: TurnAnchor },
    scope: TraceScope,
  ): Promise<boolean> {
    const response = await unary(
      clients.capture,
      clients.capture.commitTurn,
      CommitTurnRequest.fromPartial({
        identity: identityFor(config, params.sessionId, params.sessionKey),
        messages: turn.messages.map(toEngineMessage),
        advancementKey: turn.key,
        admission: { json: JSON.stringify(turn.admission) },
        terminal: { json: JSON.stringify(turn.terminal) },
        isHeartbeat: params.isHeartbeat === true,
        tokenBudget: params.runtimeContext?.tokenBudget ?? 0,
        model: params.runtimeSettings?.model?.resolved ?? "",
        overrides: config.overrides,
      }),
      config.deadlines.commitTurnMs,
      scope.headers(),
    );
    return response.status === CommitTurnStatus.COMMIT_TURN_STATUS_DUPLICATE;
  }

  /**
   * The turns the host ran on its own engine since the last one acknowledged (see
   * `acknowledged.ts`), each under its run's id, before this one: the stream stays in order.
   * Their anchors are the host's own ids; the host kept no entry positions for them here.
   */
  async function commitMissedTurns(params: CommitTurnParams, run: string | undefined, scope: TraceScope): Promise<void> {
    const where = { agentId: params.admission?.agentId, sessionId: params.sessionId, sessionKey: params.sessionKey ?? "" };
    for (const missed of missedTurns(params.sessionId, run)) {
      const first = missed.messages[0];
      await commitOne(
        params,
        {
          key: missed.runId,
          messages: missed.messages,
          admission: { ...where, logicalTurnId: missed.runId, role: "user", idempotencyKey: first?.idempotencyKey, recovered: true },
          terminal: { ...where, recovered: true },
        },
        scope,
      );
      acknowledge(params.sessionId, missed.runId);
      log.info(`[${PLUGIN_ID}] stored run ${missed.runId}, which the host ran without the engine`);
    }
  }

  async function commitTurn(params: CommitTurnParams): Promise<{ status: "committed" | "duplicate" }> {
    const scope = turnScope(params.sessionId, params.sessionKey);
    const run = runOfCommit(params.admission ?? {}, params.messages);
    noteAnswer(params.sessionKey, params.messages);
    try {
      await commitMissedTurns(params, run, scope);
      const duplicate = await commitOne(
        params,
        { key: params.advancementKey, messages: params.messages, admission: params.admission ?? {}, terminal: params.terminal ?? {} },
        scope,
      );
      if (run !== undefined) acknowledge(params.sessionId, run);
      return { status: duplicate ? "duplicate" : "committed" };
    } catch (error) {
      scope.fail(error);
      log.warn(`[${PLUGIN_ID}] commitTurn ${params.advancementKey} failed, the host will retry it: ${describe(error)}`);
      throw error;
    }
  }

  async function compact(params: CompactParams): Promise<CompactResult> {
    const scope = turnScope(params.sessionId, params.sessionKey);
    try {
      const response = await unary(
        clients.compaction,
        clients.compaction.compact,
        CompactRequest.fromPartial({
          identity: identityFor(config, params.sessionId, params.sessionKey),
          tokenBudget: params.tokenBudget ?? params.runtimeContext?.tokenBudget ?? 0,
          force: params.force === true,
          trigger: CompactionTrigger.COMPACTION_TRIGGER_HOST_REQUEST,
          currentTokenCount: params.currentTokenCount ?? params.runtimeContext?.currentTokenCount ?? 0,
          customInstructions: params.customInstructions ?? "",
        }),
        config.deadlines.compactMs,
        scope.headers(),
      );
      return {
        ok: response.ok,
        compacted: response.compacted,
        ...(response.reason ? { reason: response.reason } : {}),
        result: {
          ...(response.summary ? { summary: response.summary } : {}),
          tokensBefore: response.tokensBefore,
          tokensAfter: response.tokensAfter,
          details: { checkpointId: response.checkpoint?.checkpointId ?? "" },
        },
      };
    } catch (error) {
      scope.fail(error);
      return { ok: false, compacted: false, reason: `engine unavailable: ${describe(error)}` };
    }
  }

  async function ingestMessages(
    sessionId: string,
    sessionKey: string | undefined,
    messages: HostMessage[],
    isHeartbeat: boolean,
    onlyIfNew: boolean,
  ): Promise<number> {
    const response = await unary(
      clients.capture,
      clients.capture.ingest,
      IngestRequest.fromPartial({
        identity: identityFor(config, sessionId, sessionKey),
        messages: messages.map(toEngineMessage),
        isHeartbeat,
        onlyIfNew,
      }),
      config.deadlines.commitTurnMs,
      turnScope(sessionId, sessionKey).headers(),
    );
    return response.ingestedCount;
  }

  const subagents = subagentHooks(
    config,
    clients,
    log,
    (sessionId, sessionKey, messages) => ingestMessages(sessionId, sessionKey, messages, false, false),
    turnScope,
  );

  return {
    info: {
      id: PLUGIN_ID,
      name: "Viking Context Engine",
      version: manifest.version,
      ownsCompaction: true,
      transcriptSemantics: {
        currentTurnFence: "before-current-turn-entry-v1",
        turnAdvancementIdempotency: "atomic-idempotent-v1",
      },
    },
    async bootstrap(params: BootstrapParams) {
      turnScope(params.sessionId, params.sessionKey);
      return importHostHistory(params, (messages) => ingestMessages(params.sessionId, params.sessionKey, messages, false, true));
    },
    async maintain() {
      return { changed: false, bytesFreed: 0, rewrittenEntries: 0, reason: "turns are stored at commit; nothing to rewrite" };
    },
    async ingest(params) {
      const count = await ingestMessages(params.sessionId, params.sessionKey, [params.message], params.isHeartbeat === true, false);
      return { ingested: count > 0 };
    },
    async ingestBatch(params) {
      const count = await ingestMessages(params.sessionId, params.sessionKey, params.messages, params.isHeartbeat === true, false);
      return { ingestedCount: count };
    },
    assemble,
    commitTurn,
    compact,
    ...subagents,
    async dispose() {
      if (turn === undefined) return;
      const ending = turn;
      turn = undefined;
      if (turnSession !== undefined) forgetTurn(turnSession, ending.context);
      await ending.end();
    },
  };
}
