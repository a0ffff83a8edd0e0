import { BinaryReader, BinaryWriter } from "@bufbuild/protobuf/wire";
import { type CallOptions, type ChannelCredentials, Client, type ClientOptions, type ClientUnaryCall, type handleUnaryCall, type Metadata, type ServiceError, type UntypedServiceImplementation } from "@grpc/grpc-js";
import { ConversationMessage, Identity, JsonValue, SettingsOverrides } from "./common.js";
import { AssembledContextPacket, RecalledMemory } from "./packet.js";
export declare const protobufPackage = "contextengine.v1";
export declare const protobufFileName = "contextengine/v1/assembly.proto";
export interface AssembleRequest {
    identity: Identity | undefined;
    /** The host's current messages. */
    messages: ConversationMessage[];
    /** Total tokens the returned messages may use. 0 means the configured default. */
    tokenBudget: number;
    /** Model name, to pick the tokenizer. */
    model: string;
    /** The prompt about to be sent, when the host has one (absent on tool-loop iterations). */
    prompt: string;
    /** The host plugin's settings for this call (auto recall and its bounds, raw turns kept). */
    overrides: SettingsOverrides | undefined;
}
export interface AssembleResponse {
    messages: ConversationMessage[];
    estimatedTokens: number;
    systemPromptAddition: string;
    packet: AssembledContextPacket | undefined;
}
export interface RecallMemoriesRequest {
    identity: Identity | undefined;
    query: string;
    /** Maximum memories returned; 0 means recallLimit. */
    limit: number;
    /** The host plugin's recall settings for this call. */
    overrides: SettingsOverrides | undefined;
}
export interface RecallMemoriesResponse {
    memories: RecalledMemory[];
    /** The tool result as the model sees it: {"memories":[...],"source":"..."}. */
    toolResult: JsonValue | undefined;
    degraded: boolean;
}
export interface RecallFallbackRequest {
    identity: Identity | undefined;
    /** The prompt to recall for. */
    prompt: string;
    /** The host plugin's recall settings for this call. */
    overrides: SettingsOverrides | undefined;
}
export interface RecallFallbackResponse {
    /** `<relevant-memories>...</relevant-memories>` block, empty when nothing qualified. */
    prependContext: string;
    memories: RecalledMemory[];
    estimatedTokens: number;
    degraded: boolean;
}
export declare const AssembleRequest: MessageFns<AssembleRequest>;
export declare const AssembleResponse: MessageFns<AssembleResponse>;
export declare const RecallMemoriesRequest: MessageFns<RecallMemoriesRequest>;
export declare const RecallMemoriesResponse: MessageFns<RecallMemoriesResponse>;
export declare const RecallFallbackRequest: MessageFns<RecallFallbackRequest>;
export declare const RecallFallbackResponse: MessageFns<RecallFallbackResponse>;
/** Reads: the model's working context within a token budget, explicit recall, legacy fallback. */
export type AssemblyServiceService = typeof AssemblyServiceService;
export declare const AssemblyServiceService: {
    /** Build the messages the model sees (docs/design.md §3.3). */
    readonly assemble: {
        readonly path: "/contextengine.v1.AssemblyService/Assemble";
        readonly requestStream: false;
        readonly responseStream: false;
        readonly requestSerialize: (value: AssembleRequest) => Buffer;
        readonly requestDeserialize: (value: Buffer) => AssembleRequest;
        readonly responseSerialize: (value: AssembleResponse) => Buffer;
        readonly responseDeserialize: (value: Buffer) => AssembleResponse;
    };
    /** memory_recall: explicit retrieval with the same ranking and shape as auto recall. */
    readonly recallMemories: {
        readonly path: "/contextengine.v1.AssemblyService/RecallMemories";
        readonly requestStream: false;
        readonly responseStream: false;
        readonly requestSerialize: (value: RecallMemoriesRequest) => Buffer;
        readonly requestDeserialize: (value: Buffer) => RecallMemoriesRequest;
        readonly responseSerialize: (value: RecallMemoriesResponse) => Buffer;
        readonly responseDeserialize: (value: Buffer) => RecallMemoriesResponse;
    };
    /** The bounded legacy <relevant-memories> text block for hosts without the full lifecycle (docs/design.md §3.1). */
    readonly recallFallback: {
        readonly path: "/contextengine.v1.AssemblyService/RecallFallback";
        readonly requestStream: false;
        readonly responseStream: false;
        readonly requestSerialize: (value: RecallFallbackRequest) => Buffer;
        readonly requestDeserialize: (value: Buffer) => RecallFallbackRequest;
        readonly responseSerialize: (value: RecallFallbackResponse) => Buffer;
        readonly responseDeserialize: (value: Buffer) => RecallFallbackResponse;
    };
};
export interface AssemblyServiceServer extends UntypedServiceImplementation {
    /** Build the messages the model sees (docs/design.md §3.3). */
    assemble: handleUnaryCall<AssembleRequest, AssembleResponse>;
    /** memory_recall: explicit retrieval with the same ranking and shape as auto recall. */
    recallMemories: handleUnaryCall<RecallMemoriesRequest, RecallMemoriesResponse>;
    /** The bounded legacy <relevant-memories> text block for hosts without the full lifecycle (docs/design.md §3.1). */
    recallFallback: handleUnaryCall<RecallFallbackRequest, RecallFallbackResponse>;
}
export interface AssemblyServiceClient extends Client {
    /** Build the messages the model sees (docs/design.md §3.3). */
    assemble(request: AssembleRequest, callback: (error: ServiceError | null, response: AssembleResponse) => void): ClientUnaryCall;
    assemble(request: AssembleRequest, metadata: Metadata, callback: (error: ServiceError | null, response: AssembleResponse) => void): ClientUnaryCall;
    assemble(request: AssembleRequest, metadata: Metadata, options: Partial<CallOptions>, callback: (error: ServiceError | null, response: AssembleResponse) => void): ClientUnaryCall;
    /** memory_recall: explicit retrieval with the same ranking and shape as auto recall. */
    recallMemories(request: RecallMemoriesRequest, callback: (error: ServiceError | null, response: RecallMemoriesResponse) => void): ClientUnaryCall;
    recallMemories(request: RecallMemoriesRequest, metadata: Metadata, callback: (error: ServiceError | null, response: RecallMemoriesResponse) => void): ClientUnaryCall;
    recallMemories(request: RecallMemoriesRequest, metadata: Metadata, options: Partial<CallOptions>, callback: (error: ServiceError | null, response: RecallMemoriesResponse) => void): ClientUnaryCall;
    /** The bounded legacy <relevant-memories> text block for hosts without the full lifecycle (docs/design.md §3.1). */
    recallFallback(request: RecallFallbackRequest, callback: (error: ServiceError | null, response: RecallFallbackResponse) => void): ClientUnaryCall;
    recallFallback(request: RecallFallbackRequest, metadata: Metadata, callback: (error: ServiceError | null, response: RecallFallbackResponse) => void): ClientUnaryCall;
    recallFallback(request: RecallFallbackRequest, metadata: Metadata, options: Partial<CallOptions>, callback: (error: ServiceError | null, response: RecallFallbackResponse) => void): ClientUnaryCall;
}
export declare const AssemblyServiceClient: {
    new (address: string, credentials: ChannelCredentials, options?: Partial<ClientOptions>): AssemblyServiceClient;
    service: typeof AssemblyServiceService;
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
