import { BinaryReader, BinaryWriter } from "@bufbuild/protobuf/wire";
import { type CallOptions, type ChannelCredentials, Client, type ClientOptions, type ClientUnaryCall, type handleUnaryCall, type Metadata, type ServiceError, type UntypedServiceImplementation } from "@grpc/grpc-js";
import { CompactCheckpoint, CompactionTrigger } from "./checkpoint.js";
import { ConversationMessage, Identity, JsonValue, SettingsOverrides } from "./common.js";
import { UsedSkill } from "./envelope.js";
import { MemoryScope, RecalledMemory } from "./packet.js";
export declare const protobufPackage = "contextengine.v1";
export declare const protobufFileName = "contextengine/v1/capture.proto";
export declare enum CommitTurnStatus {
    COMMIT_TURN_STATUS_UNSPECIFIED = 0,
    /** COMMIT_TURN_STATUS_COMMITTED - The turn is stored now (or was skipped on purpose: see skipped_reason). */
    COMMIT_TURN_STATUS_COMMITTED = 1,
    /** COMMIT_TURN_STATUS_DUPLICATE - A turn with this advancement key was stored before; nothing was written. */
    COMMIT_TURN_STATUS_DUPLICATE = 2,
    UNRECOGNIZED = -1
}
export declare function commitTurnStatusFromJSON(object: any): CommitTurnStatus;
export declare function commitTurnStatusToJSON(object: CommitTurnStatus): string;
export interface AfterTurnRequest {
    identity: Identity | undefined;
    /** The whole host transcript after the turn. */
    messages: ConversationMessage[];
    /** Number of messages that existed before this turn's prompt; messages[pre_prompt_message_count:] are new. */
    prePromptMessageCount: number;
    /** The host's context window for the model, used by the budget trigger. 0 means the configured default. */
    tokenBudget: number;
    isHeartbeat: boolean;
    /** Summary the host produced by its own auto-compaction, if any. */
    autoCompactionSummary: string;
    /** Model name, to pick the tokenizer. */
    model: string;
    /** The skills the turn used, as the host reports them; kept with each skill. */
    usedSkills: UsedSkill[];
}
export interface AfterTurnResponse {
    /** Messages newly written to OpenViking by this call. */
    persistedCount: number;
    /** Messages already persisted earlier (retries, duplicates) and skipped. */
    duplicateCount: number;
    /**
     * Engine injections recognised and never captured: 1 per wholly injected message, plus 1 per
     * injected recall block or `<relevant-memories>` block stripped from a host message.
     */
    injectedSkippedCount: number;
    /** Sequence of the last persisted host message, -1 when none. */
    lastSequence: number;
    /** OpenViking session the turn landed in. */
    openvikingSessionId: string;
    /** The trigger that fired, UNSPECIFIED when none. */
    triggerFired: CompactionTrigger;
    /** Checkpoint id of the background compaction started by the trigger. */
    compactionCheckpointId: string;
    /** Tokens of the live (uncommitted) context after the write. */
    estimatedTokens: number;
    /** Set when capture is off or the turn was a heartbeat. */
    skippedReason: string;
    /** Whether the new text passed the capture decision (worth extracting); persistence happens regardless. */
    captureWorthy: boolean;
}
export interface IngestRequest {
    identity: Identity | undefined;
    messages: ConversationMessage[];
    isHeartbeat: boolean;
    /**
     * Bootstrap import: store the messages only when the stream has none yet (checked in the
     * same compare-and-swap that claims them, so concurrent or repeated imports store them once).
     */
    onlyIfNew: boolean;
}
export interface IngestResponse {
    ingestedCount: number;
    duplicateCount: number;
    /** Counted as in AfterTurnResponse.injected_skipped_count. */
    injectedSkippedCount: number;
    openvikingSessionId: string;
}
export interface StoreMemoryRequest {
    identity: Identity | undefined;
    /** What to remember, in the user's words. */
    text: string;
    /**
     * Optional category (preferences, entities, events, notes, ...): the memory's directory,
     * memories/<category>/. Default notes. `[a-z][a-z0-9_-]{0,31}`, not starting with `ce-`.
     */
    category: string;
    /** USER (default): recalled by every agent of the user. AGENT: only by this exact agent_id. */
    scope: MemoryScope;
}
export interface StoreMemoryResponse {
    uri: string;
    /** False when an identical memory already existed and was kept. */
    created: boolean;
}
export interface ForgetMemoryRequest {
    identity: Identity | undefined;
    uri?: string | undefined;
    query?: string | undefined;
}
export interface ForgetMemoryResponse {
    deletedUris: string[];
    /** With a query that matched ambiguously: the candidates, nothing deleted. */
    candidates: RecalledMemory[];
}
export interface FlushSessionsRequest {
    /** Identity to flush; with an empty session_id every session of that user/agent known to this replica. */
    identity: Identity | undefined;
}
export interface FlushSessionsResponse {
    checkpoints: CompactCheckpoint[];
}
export interface CommitTurnRequest {
    identity: Identity | undefined;
    /**
     * This turn's messages only, in order: the admitted user message through the terminal
     * assistant message, with the tool calls and results between.
     */
    messages: ConversationMessage[];
    /**
     * The host's logical turn id. Retries carry the same key; a key already committed answers
     * DUPLICATE and stores nothing. Required, at most 512 characters.
     */
    advancementKey: string;
    /**
     * The host's durable positions of the turn's first (admission) and last (terminal) entries:
     * JSON objects kept verbatim on every stored message of the turn (provenance).
     */
    admission: JsonValue | undefined;
    terminal: JsonValue | undefined;
    isHeartbeat: boolean;
    /** The host's context window for the model, used by the budget trigger. 0 means the configured default. */
    tokenBudget: number;
    /** Model name, to pick the tokenizer. */
    model: string;
    /** The skills the turn used, as the host reports them; kept with each skill. */
    usedSkills: UsedSkill[];
    /** The host plugin's settings for this call (auto_capture). */
    overrides: SettingsOverrides | undefined;
}
export interface CommitTurnResponse {
    status: CommitTurnStatus;
    /** Messages written by this call (0 on DUPLICATE). */
    persistedCount: number;
    /** Engine-injected messages recognised and never captured. */
    injectedSkippedCount: number;
    /**
     * Stream positions of the turn's stored messages (of the original commit on DUPLICATE);
     * -1 when none.
     */
    firstSequence: number;
    lastSequence: number;
    /** OpenViking session the turn landed in. */
    openvikingSessionId: string;
    /** The trigger that fired, UNSPECIFIED when none. */
    triggerFired: CompactionTrigger;
    /** Checkpoint id of the background compaction started by the trigger. */
    compactionCheckpointId: string;
    /** Tokens of the live (uncommitted) context after the write. */
    estimatedTokens: number;
    /** Set when capture is off or the turn was a heartbeat (nothing stored, status COMMITTED). */
    skippedReason: string;
    /** Whether the new user text passed the capture decision (worth extracting). */
    captureWorthy: boolean;
}
/** One skill as the host knows it (an OpenClaw SKILL.md: front matter name + description, body). */
export interface SkillDefinition {
    /** `[a-z0-9][a-z0-9_-]{0,63}` after lower-casing; unique per user. */
    name: string;
    /** One line, at most 1024 characters. */
    description: string;
    /** The instructions, at most 64 KiB. */
    body: string;
    /** Where the host reads it (SKILL.md path or URL); returned with the skill when injected. */
    uri: string;
}
export interface RegisterSkillsRequest {
    identity: Identity | undefined;
    skills: SkillDefinition[];
}
export interface RegisterSkillsResponse {
    /** Skills written (new or changed); unchanged ones are skipped. */
    storedCount: number;
    unchangedCount: number;
}
export declare const AfterTurnRequest: MessageFns<AfterTurnRequest>;
export declare const AfterTurnResponse: MessageFns<AfterTurnResponse>;
export declare const IngestRequest: MessageFns<IngestRequest>;
export declare const IngestResponse: MessageFns<IngestResponse>;
export declare const StoreMemoryRequest: MessageFns<StoreMemoryRequest>;
export declare const StoreMemoryResponse: MessageFns<StoreMemoryResponse>;
export declare const ForgetMemoryRequest: MessageFns<ForgetMemoryRequest>;
export declare const ForgetMemoryResponse: MessageFns<ForgetMemoryResponse>;
export declare const FlushSessionsRequest: MessageFns<FlushSessionsRequest>;
export declare const FlushSessionsResponse: MessageFns<FlushSessionsResponse>;
export declare const CommitTurnRequest: MessageFns<CommitTurnRequest>;
export declare const CommitTurnResponse: MessageFns<CommitTurnResponse>;
export declare const SkillDefinition: MessageFns<SkillDefinition>;
export declare const RegisterSkillsRequest: MessageFns<RegisterSkillsRequest>;
export declare const RegisterSkillsResponse: MessageFns<RegisterSkillsResponse>;
/** Writes: lossless turn persistence, engine session state, compaction triggers, explicit memories. */
export type CaptureServiceService = typeof CaptureServiceService;
export declare const CaptureServiceService: {
    /** Persist the turn that just ended and evaluate the compaction triggers (docs/design.md §3.2). */
    readonly afterTurn: {
        readonly path: "/contextengine.v1.CaptureService/AfterTurn";
        readonly requestStream: false;
        readonly responseStream: false;
        readonly requestSerialize: (value: AfterTurnRequest) => Buffer;
        readonly requestDeserialize: (value: Buffer) => AfterTurnRequest;
        readonly responseSerialize: (value: AfterTurnResponse) => Buffer;
        readonly responseDeserialize: (value: Buffer) => AfterTurnResponse;
    };
    /** Append one or many messages outside a turn (bootstrap import, host ingest). */
    readonly ingest: {
        readonly path: "/contextengine.v1.CaptureService/Ingest";
        readonly requestStream: false;
        readonly responseStream: false;
        readonly requestSerialize: (value: IngestRequest) => Buffer;
        readonly requestDeserialize: (value: Buffer) => IngestRequest;
        readonly responseSerialize: (value: IngestResponse) => Buffer;
        readonly responseDeserialize: (value: Buffer) => IngestResponse;
    };
    /** memory_store: write an explicit long-term memory now. */
    readonly storeMemory: {
        readonly path: "/contextengine.v1.CaptureService/StoreMemory";
        readonly requestStream: false;
        readonly responseStream: false;
        readonly requestSerialize: (value: StoreMemoryRequest) => Buffer;
        readonly requestDeserialize: (value: Buffer) => StoreMemoryRequest;
        readonly responseSerialize: (value: StoreMemoryResponse) => Buffer;
        readonly responseDeserialize: (value: Buffer) => StoreMemoryResponse;
    };
    /** memory_forget: delete a memory by URI or by an unambiguous query match. */
    readonly forgetMemory: {
        readonly path: "/contextengine.v1.CaptureService/ForgetMemory";
        readonly requestStream: false;
        readonly responseStream: false;
        readonly requestSerialize: (value: ForgetMemoryRequest) => Buffer;
        readonly requestDeserialize: (value: Buffer) => ForgetMemoryRequest;
        readonly responseSerialize: (value: ForgetMemoryResponse) => Buffer;
        readonly responseDeserialize: (value: Buffer) => ForgetMemoryResponse;
    };
    /** Commit every session with uncommitted turns (shutdown, session end). */
    readonly flushSessions: {
        readonly path: "/contextengine.v1.CaptureService/FlushSessions";
        readonly requestStream: false;
        readonly responseStream: false;
        readonly requestSerialize: (value: FlushSessionsRequest) => Buffer;
        readonly requestDeserialize: (value: Buffer) => FlushSessionsRequest;
        readonly responseSerialize: (value: FlushSessionsResponse) => Buffer;
        readonly responseDeserialize: (value: Buffer) => FlushSessionsResponse;
    };
    /**
     * Persist one fenced turn (hosts with turn fencing, e.g. OpenClaw commitTurn): atomic (all of
     * the turn's messages or none) and idempotent per advancement key (a replay answers DUPLICATE).
     */
    readonly commitTurn: {
        readonly path: "/contextengine.v1.CaptureService/CommitTurn";
        readonly requestStream: false;
        readonly responseStream: false;
        readonly requestSerialize: (value: CommitTurnRequest) => Buffer;
        readonly requestDeserialize: (value: Buffer) => CommitTurnRequest;
        readonly responseSerialize: (value: CommitTurnResponse) => Buffer;
        readonly responseDeserialize: (value: Buffer) => CommitTurnResponse;
    };
    /** Store (or replace) the host's skills in the user's OpenViking skill space, indexed for recall. */
    readonly registerSkills: {
        readonly path: "/contextengine.v1.CaptureService/RegisterSkills";
        readonly requestStream: false;
        readonly responseStream: false;
        readonly requestSerialize: (value: RegisterSkillsRequest) => Buffer;
        readonly requestDeserialize: (value: Buffer) => RegisterSkillsRequest;
        readonly responseSerialize: (value: RegisterSkillsResponse) => Buffer;
        readonly responseDeserialize: (value: Buffer) => RegisterSkillsResponse;
    };
};
export interface CaptureServiceServer extends UntypedServiceImplementation {
    /** Persist the turn that just ended and evaluate the compaction triggers (docs/design.md §3.2). */
    afterTurn: handleUnaryCall<AfterTurnRequest, AfterTurnResponse>;
    /** Append one or many messages outside a turn (bootstrap import, host ingest). */
    ingest: handleUnaryCall<IngestRequest, IngestResponse>;
    /** memory_store: write an explicit long-term memory now. */
    storeMemory: handleUnaryCall<StoreMemoryRequest, StoreMemoryResponse>;
    /** memory_forget: delete a memory by URI or by an unambiguous query match. */
    forgetMemory: handleUnaryCall<ForgetMemoryRequest, ForgetMemoryResponse>;
    /** Commit every session with uncommitted turns (shutdown, session end). */
    flushSessions: handleUnaryCall<FlushSessionsRequest, FlushSessionsResponse>;
    /**
     * Persist one fenced turn (hosts with turn fencing, e.g. OpenClaw commitTurn): atomic (all of
     * the turn's messages or none) and idempotent per advancement key (a replay answers DUPLICATE).
     */
    commitTurn: handleUnaryCall<CommitTurnRequest, CommitTurnResponse>;
    /** Store (or replace) the host's skills in the user's OpenViking skill space, indexed for recall. */
    registerSkills: handleUnaryCall<RegisterSkillsRequest, RegisterSkillsResponse>;
}
export interface CaptureServiceClient extends Client {
    /** Persist the turn that just ended and evaluate the compaction triggers (docs/design.md §3.2). */
    afterTurn(request: AfterTurnRequest, callback: (error: ServiceError | null, response: AfterTurnResponse) => void): ClientUnaryCall;
    afterTurn(request: AfterTurnRequest, metadata: Metadata, callback: (error: ServiceError | null, response: AfterTurnResponse) => void): ClientUnaryCall;
    afterTurn(request: AfterTurnRequest, metadata: Metadata, options: Partial<CallOptions>, callback: (error: ServiceError | null, response: AfterTurnResponse) => void): ClientUnaryCall;
    /** Append one or many messages outside a turn (bootstrap import, host ingest). */
    ingest(request: IngestRequest, callback: (error: ServiceError | null, response: IngestResponse) => void): ClientUnaryCall;
    ingest(request: IngestRequest, metadata: Metadata, callback: (error: ServiceError | null, response: IngestResponse) => void): ClientUnaryCall;
    ingest(request: IngestRequest, metadata: Metadata, options: Partial<CallOptions>, callback: (error: ServiceError | null, response: IngestResponse) => void): ClientUnaryCall;
    /** memory_store: write an explicit long-term memory now. */
    storeMemory(request: StoreMemoryRequest, callback: (error: ServiceError | null, response: StoreMemoryResponse) => void): ClientUnaryCall;
    storeMemory(request: StoreMemoryRequest, metadata: Metadata, callback: (error: ServiceError | null, response: StoreMemoryResponse) => void): ClientUnaryCall;
    storeMemory(request: StoreMemoryRequest, metadata: Metadata, options: Partial<CallOptions>, callback: (error: ServiceError | null, response: StoreMemoryResponse) => void): ClientUnaryCall;
    /** memory_forget: delete a memory by URI or by an unambiguous query match. */
    forgetMemory(request: ForgetMemoryRequest, callback: (error: ServiceError | null, response: ForgetMemoryResponse) => void): ClientUnaryCall;
    forgetMemory(request: ForgetMemoryRequest, metadata: Metadata, callback: (error: ServiceError | null, response: ForgetMemoryResponse) => void): ClientUnaryCall;
    forgetMemory(request: ForgetMemoryRequest, metadata: Metadata, options: Partial<CallOptions>, callback: (error: ServiceError | null, response: ForgetMemoryResponse) => void): ClientUnaryCall;
    /** Commit every session with uncommitted turns (shutdown, session end). */
    flushSessions(request: FlushSessionsRequest, callback: (error: ServiceError | null, response: FlushSessionsResponse) => void): ClientUnaryCall;
    flushSessions(request: FlushSessionsRequest, metadata: Metadata, callback: (error: ServiceError | null, response: FlushSessionsResponse) => void): ClientUnaryCall;
    flushSessions(request: FlushSessionsRequest, metadata: Metadata, options: Partial<CallOptions>, callback: (error: ServiceError | null, response: FlushSessionsResponse) => void): ClientUnaryCall;
    /**
     * Persist one fenced turn (hosts with turn fencing, e.g. OpenClaw commitTurn): atomic (all of
     * the turn's messages or none) and idempotent per advancement key (a replay answers DUPLICATE).
     */
    commitTurn(request: CommitTurnRequest, callback: (error: ServiceError | null, response: CommitTurnResponse) => void): ClientUnaryCall;
    commitTurn(request: CommitTurnRequest, metadata: Metadata, callback: (error: ServiceError | null, response: CommitTurnResponse) => void): ClientUnaryCall;
    commitTurn(request: CommitTurnRequest, metadata: Metadata, options: Partial<CallOptions>, callback: (error: ServiceError | null, response: CommitTurnResponse) => void): ClientUnaryCall;
    /** Store (or replace) the host's skills in the user's OpenViking skill space, indexed for recall. */
    registerSkills(request: RegisterSkillsRequest, callback: (error: ServiceError | null, response: RegisterSkillsResponse) => void): ClientUnaryCall;
    registerSkills(request: RegisterSkillsRequest, metadata: Metadata, callback: (error: ServiceError | null, response: RegisterSkillsResponse) => void): ClientUnaryCall;
    registerSkills(request: RegisterSkillsRequest, metadata: Metadata, options: Partial<CallOptions>, callback: (error: ServiceError | null, response: RegisterSkillsResponse) => void): ClientUnaryCall;
}
export declare const CaptureServiceClient: {
    new (address: string, credentials: ChannelCredentials, options?: Partial<ClientOptions>): CaptureServiceClient;
    service: typeof CaptureServiceService;
    serviceName: string;
};
type Builtin = Date | Function | Uint8Array | string | number | boolean | undefined;
export type DeepPartial<T> = T extends Builtin ? T : T extends globalThis.Array<infer U> ? globalThis.Array<DeepPartial<U>> : T extends ReadonlyArray<infer U> ? ReadonlyArray<DeepPartial<U>> : T extends {} ? {
    [K in keyof T]?: DeepPartial<T[K]>;
} : Partial<T>;
type KeysOfUnion<T> = T extends T ? keyof T : never;
export type Exact<P, I extends P> = P extends Builtin ? P : P & {
    [K in keyof P]: Exact<P[K], I[K]>;
} & {
    [K in Exclude<keyof I, KeysOfUnion<P>>]: never;
};
export interface MessageFns<T> {
    encode(message: T, writer?: BinaryWriter): BinaryWriter;
    decode(input: BinaryReader | Uint8Array, length?: number): T;
    fromJSON(object: any): T;
    toJSON(message: T): unknown;
    create<I extends Exact<DeepPartial<T>, I>>(base?: I): T;
    fromPartial<I extends Exact<DeepPartial<T>, I>>(object: I): T;
}
export {};
