import { BinaryReader, BinaryWriter } from "@bufbuild/protobuf/wire";
import { Timestamp } from "../../google/protobuf/timestamp.js";
export declare const protobufPackage = "contextengine.v1";
export declare const protobufFileName = "contextengine/v1/checkpoint.proto";
/** Why a compaction ran (docs/design.md §3.2 step 7, in priority order, then explicit reasons). */
export declare enum CompactionTrigger {
    COMPACTION_TRIGGER_UNSPECIFIED = 0,
    COMPACTION_TRIGGER_BUDGET = 1,
    COMPACTION_TRIGGER_TOKENS_ADDED = 2,
    COMPACTION_TRIGGER_TURN_COUNT = 3,
    COMPACTION_TRIGGER_INTERVAL = 4,
    COMPACTION_TRIGGER_HOST_REQUEST = 5,
    COMPACTION_TRIGGER_FLUSH = 6,
    UNRECOGNIZED = -1
}
export declare function compactionTriggerFromJSON(object: any): CompactionTrigger;
export declare function compactionTriggerToJSON(object: CompactionTrigger): string;
export declare enum CheckpointStatus {
    CHECKPOINT_STATUS_UNSPECIFIED = 0,
    /** CHECKPOINT_STATUS_PENDING - Commit accepted by OpenViking; phase 2 (summary, extraction) still running. */
    CHECKPOINT_STATUS_PENDING = 1,
    CHECKPOINT_STATUS_COMPLETED = 2,
    /** CHECKPOINT_STATUS_FAILED - Phase 2 failed or timed out; raw turns stay readable in the archive. */
    CHECKPOINT_STATUS_FAILED = 3,
    UNRECOGNIZED = -1
}
export declare function checkpointStatusFromJSON(object: any): CheckpointStatus;
export declare function checkpointStatusToJSON(object: CheckpointStatus): string;
export interface TurnRange {
    startSequence: number;
    endSequence: number;
}
/** The record of one compaction (docs/design.md §5.3). */
export interface CompactCheckpoint {
    checkpointId: string;
    /** The OpenViking session that was committed. */
    sessionId: string;
    committedAt: Timestamp | undefined;
    /** 1-based archive number (archive_001 -> 1). */
    archiveIndex: number;
    sourceTurnRange: TurnRange | undefined;
    summaryUri: string;
    extractedMemoryUris: string[];
    status: CheckpointStatus;
    failureReason: string;
    archiveUri: string;
    taskId: string;
    trigger: CompactionTrigger;
    finishedAt: Timestamp | undefined;
    /** Host session and agent the compacted turns came from. */
    hostSessionId: string;
    agentId: string;
    /** Trace context of the turn that started the compaction (W3C traceparent), for span links. */
    originTraceparent: string;
}
export declare const TurnRange: MessageFns<TurnRange>;
export declare const CompactCheckpoint: MessageFns<CompactCheckpoint>;
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
