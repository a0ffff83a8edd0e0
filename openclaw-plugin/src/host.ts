/**
 * The parts of OpenClaw's plugin contract this plugin uses (openclaw@2026.9.6,
 * `src/context-engine/types` and `src/plugins/tool-types`), declared structurally so the plugin
 * builds without the 650 MB host package.
 */
import type { HostMessage } from "./messages.js";

export type Logger = { info(message: string): void; warn(message: string): void; error(message: string): void };

export type SessionTarget = { agentId?: string; sessionId?: string; sessionKey?: string };

export type RuntimeContext = Record<string, unknown> & { tokenBudget?: number; currentTokenCount?: number };

export type RuntimeSettings = { model?: { resolved?: string | null; requested?: string | null } };

/** A host's durable transcript position (`TranscriptEntryAnchor`, plus the admission's turn id). */
export type TurnAnchor = Record<string, unknown>;

export type EngineInfo = {
  id: string;
  name: string;
  version?: string;
  ownsCompaction?: boolean;
  transcriptSemantics?: {
    currentTurnFence?: "before-current-turn-entry-v1";
    turnAdvancementIdempotency?: "atomic-idempotent-v1";
  };
};

export type BootstrapParams = {
  sessionId: string;
  sessionKey?: string;
  sessionTarget?: SessionTarget;
  sessionFile?: string;
  runtimeContext?: RuntimeContext;
};

export type AssembleParams = {
  sessionId: string;
  sessionKey?: string;
  messages: HostMessage[];
  tokenBudget?: number;
  model?: string;
  prompt?: string;
  runtimeContext?: RuntimeContext;
};

export type AssembleResult = { messages: HostMessage[]; estimatedTokens: number; systemPromptAddition?: string };

export type CommitTurnParams = {
  advancementKey: string;
  admission: TurnAnchor;
  terminal: TurnAnchor;
  messages: HostMessage[];
  sessionId: string;
  sessionKey?: string;
  sessionTarget?: SessionTarget;
  runtimeSettings?: RuntimeSettings;
  runtimeContext?: RuntimeContext;
  isHeartbeat?: boolean;
};

export type CompactParams = {
  sessionId: string;
  sessionKey?: string;
  agentId?: string;
  tokenBudget?: number;
  force?: boolean;
  currentTokenCount?: number;
  compactionTarget?: "budget" | "threshold";
  customInstructions?: string;
  runtimeContext?: RuntimeContext;
};

export type CompactResult = {
  ok: boolean;
  compacted: boolean;
  reason?: string;
  result?: { summary?: string; tokensBefore: number; tokensAfter?: number; details?: unknown };
};

/** `prepareSubagentSpawn`'s params (openclaw@2026.9.6). */
export type SubagentSpawnParams = {
  parentSessionKey: string;
  childSessionKey: string;
  contextMode?: "isolated" | "fork";
  parentSessionId?: string;
  childSessionId?: string;
  ttlMs?: number;
};

/** `onSubagentEnded`'s params (`reason`: "deleted" | "completed" | "swept" | "released"). */
export type SubagentEndParams = { childSessionKey: string; reason: string };

export type MaintenanceResult = { changed: boolean; bytesFreed: number; rewrittenEntries: number; reason?: string };

export type ContextEngine = {
  readonly info: EngineInfo;
  bootstrap(params: BootstrapParams): Promise<{ bootstrapped: boolean; importedMessages?: number; reason?: string }>;
  maintain(params: BootstrapParams): Promise<MaintenanceResult>;
  ingest(params: { sessionId: string; sessionKey?: string; message: HostMessage; isHeartbeat?: boolean }): Promise<{
    ingested: boolean;
  }>;
  ingestBatch(params: {
    sessionId: string;
    sessionKey?: string;
    messages: HostMessage[];
    isHeartbeat?: boolean;
  }): Promise<{ ingestedCount: number }>;
  assemble(params: AssembleParams): Promise<AssembleResult>;
  commitTurn(params: CommitTurnParams): Promise<{ status: "committed" | "duplicate" }>;
  compact(params: CompactParams): Promise<CompactResult>;
  prepareSubagentSpawn(params: SubagentSpawnParams): Promise<{ rollback(): void }>;
  onSubagentEnded(params: SubagentEndParams): Promise<void>;
  dispose(): Promise<void>;
};

export type ToolContext = { agentId?: string; sessionKey?: string; sessionId?: string };

export type ToolResult = { content: { type: "text"; text: string }[]; details: unknown };

export type Tool = {
  name: string;
  label: string;
  description: string;
  parameters: Record<string, unknown>;
  catalogMode: "direct-only";
  execute(toolCallId: string, params: unknown, signal?: AbortSignal): Promise<ToolResult>;
};

/** `before_prompt_build` (`PluginHookBeforePromptBuildEvent` / `...Result`). */
export type PromptBuildEvent = { prompt: string; currentUserMessage?: string; messages: unknown[] };
export type PromptBuildResult = { prependContext?: string };
/** The parts of `PluginHookAgentContext` the hooks read. */
export type HookAgentContext = { agentId?: string; sessionKey?: string; sessionId?: string };

export type PluginApi = {
  pluginConfig?: Record<string, unknown>;
  /** The host's whole config (only its context-engine slot is read). */
  config?: { plugins?: { slots?: { contextEngine?: string } } };
  logger: Logger;
  /** Absent on hosts older than the context-engine API. */
  registerContextEngine?(id: string, factory: () => ContextEngine): void;
  registerTool(factory: (ctx: ToolContext) => Tool, opts?: { name?: string }): void;
  on?(
    hook: "before_prompt_build",
    handler: (event: PromptBuildEvent, ctx: HookAgentContext) => Promise<PromptBuildResult | undefined>,
  ): void;
};
