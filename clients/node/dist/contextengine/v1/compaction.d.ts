import { BinaryReader, BinaryWriter } from "@bufbuild/protobuf/wire";
import { type CallOptions, type ChannelCredentials, Client, type ClientOptions, type ClientUnaryCall, type handleUnaryCall, type Metadata, type ServiceError, type UntypedServiceImplementation } from "@grpc/grpc-js";
import { CompactCheckpoint, CompactionTrigger } from "./checkpoint.js";
import { ConversationMessage, Identity } from "./common.js";
import { TurnEnvelope } from "./envelope.js";
export declare const protobufPackage = "contextengine.v1";
export declare const protobufFileName = "contextengine/v1/compaction.proto";
export interface CompactRequest {
    identity: Identity | undefined;
    tokenBudget: number;
    /** Compact even when no trigger threshold is reached. */
    force: boolean;
    /** Return at once with the pending checkpoint; finalisation happens later. */
    background: boolean;
    trigger: CompactionTrigger;
    currentTokenCount: number;
    customInstructions: string;
    /** Model name, to pick the tokenizer. */
    model: string;
    /**
     * Only make sure the compactions already handed off on this stream (by capture, when a
     * trigger fired or on flush) have a live owner; never start a new one. Capture's nudge.
     */
    resumeOnly: boolean;
}
export interface CompactResponse {
    ok: boolean;
    compacted: boolean;
    reason: string;
    checkpoint: CompactCheckpoint | undefined;
    /** The new working context (empty for background compactions). */
    messages: ConversationMessage[];
    summary: string;
    tokensBefore: number;
    tokensAfter: number;
}
export interface ExpandMemoryRequest {
    identity: Identity | undefined;
    /** A compact summary (archive) URI, a checkpoint id or a long-term memory URI. */
    summaryOrMemoryUri: string;
    /** Ranks the turns by word overlap with it; empty: in transcript order (a memory: by its text). */
    query: string;
    /** Turns per page. 0 means memoryExpandMaxResults; larger values are capped to it. */
    limit: number;
    /** The next_page_token of a previous response with the same reference and query; empty: first page. */
    pageToken: string;
}
export interface ExpandedTurn {
    /** The engine's envelope view of the turn (docs/design.md §5.1): roles, parts, tool records, provenance. */
    turn: TurnEnvelope | undefined;
    /** Where the full original can be read. */
    sourceUri: string;
    matchScore: number;
    /**
     * The host message exactly as the host sent it, byte for byte (the same shape Compact returns):
     * every block, thinking signatures and the redacted flag, images, tool-result details, host_fields.
     */
    message: ConversationMessage | undefined;
}
export interface ExpandMemoryResponse {
    /** Session and archive URIs the summary or memory links to. */
    linkedUris: string[];
    turns: ExpandedTurn[];
    /** URIs that can be read for the full original context. */
    readableUris: string[];
    checkpointId: string;
    /** Set when more turns follow: pass it as page_token to read them. Empty on the last page. */
    nextPageToken: string;
}
export interface GetCheckpointRequest {
    identity: Identity | undefined;
    checkpointId: string;
}
export interface GetCheckpointResponse {
    checkpoint: CompactCheckpoint | undefined;
}
/**
 * Newest first. With identity.session_id: that host session's checkpoints (for identity.agent_id,
 * or the configured default agent). Without it: the user's checkpoints across all their sessions,
 * only those of identity.agent_id when it is set.
 */
export interface ListCheckpointsRequest {
    identity: Identity | undefined;
    pageSize: number;
    pageToken: string;
}
export interface ListCheckpointsResponse {
    checkpoints: CompactCheckpoint[];
    nextPageToken: string;
}
export declare const CompactRequest: MessageFns<CompactRequest>;
export declare const CompactResponse: MessageFns<CompactResponse>;
export declare const ExpandMemoryRequest: MessageFns<ExpandMemoryRequest>;
export declare const ExpandedTurn: MessageFns<ExpandedTurn>;
export declare const ExpandMemoryResponse: MessageFns<ExpandMemoryResponse>;
export declare const GetCheckpointRequest: MessageFns<GetCheckpointRequest>;
export declare const GetCheckpointResponse: MessageFns<GetCheckpointResponse>;
export declare const ListCheckpointsRequest: MessageFns<ListCheckpointsRequest>;
export declare const ListCheckpointsResponse: MessageFns<ListCheckpointsResponse>;
/** Commit and expand: OpenViking session.commit as the formal sync point, checkpoints, memory_expand. */
export type CompactionServiceService = typeof CompactionServiceService;
export declare const CompactionServiceService: {
    /** Commit the session (docs/design.md §3.4). Synchronous unless `background` is set. */
    readonly compact: {
        readonly path: "/contextengine.v1.CompactionService/Compact";
        readonly requestStream: false;
        readonly responseStream: false;
        readonly requestSerialize: (value: CompactRequest) => Buffer;
        readonly requestDeserialize: (value: Buffer) => CompactRequest;
        readonly responseSerialize: (value: CompactResponse) => Buffer;
        readonly responseDeserialize: (value: Buffer) => CompactResponse;
    };
    /** memory_expand: from a summary or memory back to the raw turns it came from (docs/design.md §6.2). */
    readonly expandMemory: {
        readonly path: "/contextengine.v1.CompactionService/ExpandMemory";
        readonly requestStream: false;
        readonly responseStream: false;
        readonly requestSerialize: (value: ExpandMemoryRequest) => Buffer;
        readonly requestDeserialize: (value: Buffer) => ExpandMemoryRequest;
        readonly responseSerialize: (value: ExpandMemoryResponse) => Buffer;
        readonly responseDeserialize: (value: Buffer) => ExpandMemoryResponse;
    };
    readonly getCheckpoint: {
        readonly path: "/contextengine.v1.CompactionService/GetCheckpoint";
        readonly requestStream: false;
        readonly responseStream: false;
        readonly requestSerialize: (value: GetCheckpointRequest) => Buffer;
        readonly requestDeserialize: (value: Buffer) => GetCheckpointRequest;
        readonly responseSerialize: (value: GetCheckpointResponse) => Buffer;
        readonly responseDeserialize: (value: Buffer) => GetCheckpointResponse;
    };
    readonly listCheckpoints: {
        readonly path: "/contextengine.v1.CompactionService/ListCheckpoints";
        readonly requestStream: false;
        readonly responseStream: false;
        readonly requestSerialize: (value: ListCheckpointsRequest) => Buffer;
        readonly requestDeserialize: (value: Buffer) => ListCheckpointsRequest;
        readonly responseSerialize: (value: ListCheckpointsResponse) => Buffer;
        readonly responseDeserialize: (value: Buffer) => ListCheckpointsResponse;
    };
};
export interface CompactionServiceServer extends UntypedServiceImplementation {
    /** Commit the session (docs/design.md §3.4). Synchronous unless `background` is set. */
    compact: handleUnaryCall<CompactRequest, CompactResponse>;
    /** memory_expand: from a summary or memory back to the raw turns it came from (docs/design.md §6.2). */
    expandMemory: handleUnaryCall<ExpandMemoryRequest, ExpandMemoryResponse>;
    getCheckpoint: handleUnaryCall<GetCheckpointRequest, GetCheckpointResponse>;
    listCheckpoints: handleUnaryCall<ListCheckpointsRequest, ListCheckpointsResponse>;
}
export interface CompactionServiceClient extends Client {
    /** Commit the session (docs/design.md §3.4). Synchronous unless `background` is set. */
    compact(request: CompactRequest, callback: (error: ServiceError | null, response: CompactResponse) => void): ClientUnaryCall;
    compact(request: CompactRequest, metadata: Metadata, callback: (error: ServiceError | null, response: CompactResponse) => void): ClientUnaryCall;
    compact(request: CompactRequest, metadata: Metadata, options: Partial<CallOptions>, callback: (error: ServiceError | null, response: CompactResponse) => void): ClientUnaryCall;
    /** memory_expand: from a summary or memory back to the raw turns it came from (docs/design.md §6.2). */
    expandMemory(request: ExpandMemoryRequest, callback: (error: ServiceError | null, response: ExpandMemoryResponse) => void): ClientUnaryCall;
    expandMemory(request: ExpandMemoryRequest, metadata: Metadata, callback: (error: ServiceError | null, response: ExpandMemoryResponse) => void): ClientUnaryCall;
    expandMemory(request: ExpandMemoryRequest, metadata: Metadata, options: Partial<CallOptions>, callback: (error: ServiceError | null, response: ExpandMemoryResponse) => void): ClientUnaryCall;
    getCheckpoint(request: GetCheckpointRequest, callback: (error: ServiceError | null, response: GetCheckpointResponse) => void): ClientUnaryCall;
    getCheckpoint(request: GetCheckpointRequest, metadata: Metadata, callback: (error: ServiceError | null, response: GetCheckpointResponse) => void): ClientUnaryCall;
    getCheckpoint(request: GetCheckpointRequest, metadata: Metadata, options: Partial<CallOptions>, callback: (error: ServiceError | null, response: GetCheckpointResponse) => void): ClientUnaryCall;
    listCheckpoints(request: ListCheckpointsRequest, callback: (error: ServiceError | null, response: ListCheckpointsResponse) => void): ClientUnaryCall;
    listCheckpoints(request: ListCheckpointsRequest, metadata: Metadata, callback: (error: ServiceError | null, response: ListCheckpointsResponse) => void): ClientUnaryCall;
    listCheckpoints(request: ListCheckpointsRequest, metadata: Metadata, options: Partial<CallOptions>, callback: (error: ServiceError | null, response: ListCheckpointsResponse) => void): ClientUnaryCall;
}
export declare const CompactionServiceClient: {
    new (address: string, credentials: ChannelCredentials, options?: Partial<ClientOptions>): CompactionServiceClient;
    service: typeof CompactionServiceService;
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
