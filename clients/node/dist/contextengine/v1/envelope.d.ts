import { BinaryReader, BinaryWriter } from "@bufbuild/protobuf/wire";
import { Timestamp } from "../../google/protobuf/timestamp.js";
import { JsonValue } from "./common.js";
export declare const protobufPackage = "contextengine.v1";
export declare const protobufFileName = "contextengine/v1/envelope.proto";
/** Role of a persisted turn (docs/design.md §5.1). */
export declare enum EnvelopeRole {
    ENVELOPE_ROLE_UNSPECIFIED = 0,
    ENVELOPE_ROLE_USER = 1,
    ENVELOPE_ROLE_ASSISTANT = 2,
    ENVELOPE_ROLE_SYSTEM = 3,
    ENVELOPE_ROLE_TOOL = 4,
    UNRECOGNIZED = -1
}
export declare function envelopeRoleFromJSON(object: any): EnvelopeRole;
export declare function envelopeRoleToJSON(object: EnvelopeRole): string;
export declare enum ToolStatus {
    TOOL_STATUS_UNSPECIFIED = 0,
    TOOL_STATUS_SUCCESS = 1,
    TOOL_STATUS_ERROR = 2,
    UNRECOGNIZED = -1
}
export declare function toolStatusFromJSON(object: any): ToolStatus;
export declare function toolStatusToJSON(object: ToolStatus): string;
/** Whether a turn is raw host content or was produced after a compaction. */
export declare enum CompactionSource {
    COMPACTION_SOURCE_UNSPECIFIED = 0,
    COMPACTION_SOURCE_RAW = 1,
    COMPACTION_SOURCE_POST_COMPACT = 2,
    UNRECOGNIZED = -1
}
export declare function compactionSourceFromJSON(object: any): CompactionSource;
export declare function compactionSourceToJSON(object: CompactionSource): string;
export interface TextPart {
    text: string;
}
export interface ToolCallPart {
    toolCallId: string;
    toolName: string;
    arguments: JsonValue | undefined;
}
export interface ToolResultPart {
    toolCallId: string;
    toolName: string;
    result: JsonValue | undefined;
    status: ToolStatus;
}
export interface ContextRefPart {
    uri: string;
    abstract: string;
}
export interface MetaPart {
    key: string;
    value: JsonValue | undefined;
}
export interface EnvelopePart {
    text?: TextPart | undefined;
    toolCall?: ToolCallPart | undefined;
    toolResult?: ToolResultPart | undefined;
    contextRef?: ContextRefPart | undefined;
    meta?: MetaPart | undefined;
}
export interface UsedSkill {
    uri: string;
    input: string;
    output: string;
    success?: boolean | undefined;
}
export interface ToolCallRecord {
    toolCallId: string;
    toolName: string;
    arguments: JsonValue | undefined;
    status: ToolStatus;
}
export interface ToolResultRecord {
    toolCallId: string;
    toolName: string;
    result: JsonValue | undefined;
    status: ToolStatus;
}
export interface CompactionMarker {
    source: CompactionSource;
    compactCheckpointId: string;
}
/** One host message as persisted into an OpenViking session (docs/design.md §5.1). */
export interface TurnEnvelope {
    /** Stable id derived from host session, agent, position and content; retries reuse it. */
    turnId: string;
    /** The OpenViking session the turn was written to. */
    sessionId: string;
    /** Position of the message in the host transcript (0-based), stable across retries. */
    sequence: number;
    timestamp: Timestamp | undefined;
    role: EnvelopeRole;
    parts: EnvelopePart[];
    usedContextUris: string[];
    usedSkills: UsedSkill[];
    toolCalls: ToolCallRecord[];
    toolResults: ToolResultRecord[];
    compactionMarker: CompactionMarker | undefined;
    /** Host message id, if the host gave one. */
    hostMessageId: string;
    /** Agent the turn belongs to. */
    agentId: string;
}
export declare const TextPart: MessageFns<TextPart>;
export declare const ToolCallPart: MessageFns<ToolCallPart>;
export declare const ToolResultPart: MessageFns<ToolResultPart>;
export declare const ContextRefPart: MessageFns<ContextRefPart>;
export declare const MetaPart: MessageFns<MetaPart>;
export declare const EnvelopePart: MessageFns<EnvelopePart>;
export declare const UsedSkill: MessageFns<UsedSkill>;
export declare const ToolCallRecord: MessageFns<ToolCallRecord>;
export declare const ToolResultRecord: MessageFns<ToolResultRecord>;
export declare const CompactionMarker: MessageFns<CompactionMarker>;
export declare const TurnEnvelope: MessageFns<TurnEnvelope>;
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
