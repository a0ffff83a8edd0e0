import { BinaryReader, BinaryWriter } from "@bufbuild/protobuf/wire";
import { Timestamp } from "../../google/protobuf/timestamp.js";
export declare const protobufPackage = "contextengine.v1";
export declare const protobufFileName = "contextengine/v1/common.proto";
/** Role of a host conversation message. */
export declare enum MessageRole {
    MESSAGE_ROLE_UNSPECIFIED = 0,
    MESSAGE_ROLE_USER = 1,
    MESSAGE_ROLE_ASSISTANT = 2,
    MESSAGE_ROLE_TOOL_RESULT = 3,
    MESSAGE_ROLE_SYSTEM = 4,
    UNRECOGNIZED = -1
}
export declare function messageRoleFromJSON(object: any): MessageRole;
export declare function messageRoleToJSON(object: MessageRole): string;
/** Who is asking. Present on every request; the engine never assumes a process-wide identity. */
export interface Identity {
    /**
     * Tenant account (OpenViking account id), required. Charset [A-Za-z0-9_.@-], at most 255
     * characters, at most one '@', not '.'/'..', not starting with '_'.
     */
    accountId: string;
    /** End user within the account (OpenViking user id), required. Same charset. */
    userId: string;
    /** Agent acting for the user; buffers, state and agent memories are scoped by it. Empty means "default". */
    agentId: string;
    /** The host's session id (OpenClaw sessionId). Required for session-scoped calls. */
    sessionId: string;
    /** The host's session key, where the host has one (OpenClaw sessionKey). */
    sessionKey: string;
}
/**
 * Arbitrary JSON carried verbatim (tool arguments, tool results, meta values).
 * `json` is RFC 8259 JSON text; the engine stores and returns it byte for byte. Text that is not
 * RFC 8259 JSON (NaN, Infinity, malformed) or nests deeper than 128 levels is INVALID_ARGUMENT.
 */
export interface JsonValue {
    json: string;
}
export interface TextBlock {
    text: string;
}
/** An image by reference (URL, data URI or viking:// URI); bytes are never inlined by the engine. */
export interface ImageBlock {
    uri: string;
    mimeType: string;
}
export interface ThinkingBlock {
    thinking: string;
    signature: string;
    redacted: boolean;
}
export interface ToolCallBlock {
    /** Provider tool-call id; the matching tool result carries the same id. */
    id: string;
    name: string;
    arguments: JsonValue | undefined;
}
export interface ToolResultBlock {
    toolCallId: string;
    toolName: string;
    /** Text and image blocks returned by the tool. */
    content: ContentBlock[];
    isError: boolean;
    /** Structured details the host keeps beside the content (OpenClaw `details`). */
    details: JsonValue | undefined;
}
export interface ContentBlock {
    text?: TextBlock | undefined;
    image?: ImageBlock | undefined;
    thinking?: ThinkingBlock | undefined;
    toolCall?: ToolCallBlock | undefined;
    toolResult?: ToolResultBlock | undefined;
}
/**
 * A host-neutral conversation message. OpenClaw's AgentMessage maps to it one to one:
 * user -> USER, assistant -> ASSISTANT, toolResult -> TOOL_RESULT (one tool_result block).
 */
export interface ConversationMessage {
    /** The host's id for this message, if it has one; used for idempotency when present. */
    id: string;
    role: MessageRole;
    content: ContentBlock[];
    timestamp: Timestamp | undefined;
    /**
     * Host fields the engine does not interpret (provider, model, usage, stop reason, ...),
     * kept as one JSON object so the host shape round-trips losslessly.
     */
    hostFields: JsonValue | undefined;
}
/**
 * Per-call values of the engine's settings, from the host plugin's config (the config key in
 * brackets). An unset field keeps the engine's own value; a value outside the setting's range
 * is INVALID_ARGUMENT naming the field (`overrides.recall_limit`).
 */
export interface SettingsOverrides {
    /** [autoRecall] Assemble injects auto recall. */
    autoRecall?: boolean | undefined;
    /**
     * [recallLimit] Most stored memories auto recall shows (the exchanges beside them are bounded
     * by the token budget); most items RecallMemories and RecallFallback return. 1-100.
     */
    recallLimit?: number | undefined;
    /** [recallScoreThreshold] Lowest score a recalled memory may have, 0-1. */
    recallScoreThreshold?: number | undefined;
    /** [recallMaxContentChars] Characters of one recalled memory shown, 20-100000. */
    recallMaxContentChars?: number | undefined;
    /** [recallPreferAbstract] Show a memory's abstract rather than its full text. */
    recallPreferAbstract?: boolean | undefined;
    /** [recallTokenBudget] Tokens auto recall may take; 0 means a share of the budget. */
    recallTokenBudget?: number | undefined;
    /** [recentRawTurnCount] Newest host turns Assemble always keeps raw, 1-10000. */
    recentRawTurnCount?: number | undefined;
    /** [assembleRecallWindow] Newest user messages the recall query reads, 1-100. */
    assembleRecallWindow?: number | undefined;
    /** [autoCapture] CommitTurn stores the turn. */
    autoCapture?: boolean | undefined;
}
export declare const Identity: MessageFns<Identity>;
export declare const JsonValue: MessageFns<JsonValue>;
export declare const TextBlock: MessageFns<TextBlock>;
export declare const ImageBlock: MessageFns<ImageBlock>;
export declare const ThinkingBlock: MessageFns<ThinkingBlock>;
export declare const ToolCallBlock: MessageFns<ToolCallBlock>;
export declare const ToolResultBlock: MessageFns<ToolResultBlock>;
export declare const ContentBlock: MessageFns<ContentBlock>;
export declare const ConversationMessage: MessageFns<ConversationMessage>;
export declare const SettingsOverrides: MessageFns<SettingsOverrides>;
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
