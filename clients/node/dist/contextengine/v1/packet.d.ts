import { BinaryReader, BinaryWriter } from "@bufbuild/protobuf/wire";
import { ConversationMessage } from "./common.js";
import { TurnEnvelope } from "./envelope.js";
export declare const protobufPackage = "contextengine.v1";
export declare const protobufFileName = "contextengine/v1/packet.proto";
/** Which memory space a memory belongs to. */
export declare enum MemoryScope {
    MEMORY_SCOPE_UNSPECIFIED = 0,
    MEMORY_SCOPE_USER = 1,
    MEMORY_SCOPE_AGENT = 2,
    UNRECOGNIZED = -1
}
export declare function memoryScopeFromJSON(object: any): MemoryScope;
export declare function memoryScopeToJSON(object: MemoryScope): string;
/** A source recall can read (design Phase 3, recall intent). */
export declare enum RecallSource {
    RECALL_SOURCE_UNSPECIFIED = 0,
    RECALL_SOURCE_MEMORIES = 1,
    RECALL_SOURCE_EXCHANGES = 2,
    RECALL_SOURCE_SUMMARIES = 3,
    RECALL_SOURCE_SKILLS = 4,
    RECALL_SOURCE_TOOLS = 5,
    RECALL_SOURCE_DIRECTORY = 6,
    UNRECOGNIZED = -1
}
export declare function recallSourceFromJSON(object: any): RecallSource;
export declare function recallSourceToJSON(object: RecallSource): string;
export interface RecalledMemory {
    query: string;
    uri: string;
    abstract: string;
    score: number;
    /** Memory category (preferences, entities, events, profile, notes, ...). */
    category: string;
    /** Text injected for this memory (abstract or truncated body). */
    content: string;
    scope: MemoryScope;
    tags: string[];
    /**
     * What the item is: "memory" (a stored or extracted memory) or "turn" (a raw exchange from
     * the turn index; `uri` resolves through ExpandMemory to the exact original messages).
     */
    kind: string;
    /** When it was said, "YYYY-MM-DD HH:MM" UTC; empty when unknown. */
    saidAt: string;
}
export interface CompactSummary {
    sessionUri: string;
    abstract: string;
    overview: string;
    archiveUri: string;
    checkpointId: string;
}
/** How the budget was spent and what was cut. */
export interface TokenAccounting {
    budget: number;
    used: number;
    profile: number;
    recall: number;
    summaries: number;
    rawTurns: number;
    /**
     * Recalled items packing looked at and left out: shown raw already, or past the room (the
     * items ranked below the first that did not fit are not looked at, nor counted).
     */
    recalledMemoriesCut: number;
    summariesCut: number;
    /** True when the newest raw turns alone exceed the budget (they are never cut). */
    overBudget: boolean;
    /** Tokens of the skill, tool-experience and directory sections (inside `used`). */
    skills: number;
    tools: number;
    directory: number;
}
/** What the LLM-free intent stage decided before retrieval. */
export interface RecallIntent {
    /** False: no memory, exchange, skill or directory recall for this prompt. */
    recall: boolean;
    /** Why recall is skipped (greeting, follow_up, empty, ...); empty when it runs. */
    reason: string;
    /** The sources read for this call. */
    sources: RecallSource[];
    query: string;
    /** Date expressions and names pulled out of the prompt, as written. */
    dates: string[];
    names: string[];
}
/** A registered skill put in front of the model. */
export interface InjectedSkill {
    name: string;
    /** One line. */
    description: string;
    /** Where the host reads the skill (its SKILL.md), as registered. */
    uri: string;
    /** True when the skill's body is in the context too. */
    bodyIncluded: boolean;
    /** Set when the skill failed recently for a similar input ("failed 2 of the last 3 uses ..."). */
    failureNote: string;
    score: number;
}
/** What the engine learned about one tool from this user's own calls. */
export interface ToolExperience {
    toolName: string;
    /** The newest error the tool returned, shortened. */
    error: string;
    /** Argument shape of the failing call (keys and value types, never values). */
    failingArguments: string;
    /** Argument shape of the call that worked after it, empty when none did yet. */
    fixArguments: string;
    failures: number;
    /** Calls that worked right after a failure (the fixes); other successes are not counted. */
    successes: number;
}
/** One line of the directory listing of the user's OpenViking space. */
export interface DirectoryEntry {
    uri: string;
    /** resources, memories/<category>, skills. */
    kind: string;
    abstract: string;
}
/** What assemble chose and why (docs/design.md §5.2). */
export interface AssembledContextPacket {
    profileBlocks: string[];
    recalledMemories: RecalledMemory[];
    compactSummaries: CompactSummary[];
    recentRawTurns: TurnEnvelope[];
    injectedMessages: ConversationMessage[];
    estimatedTokens: number;
    tokens: TokenAccounting | undefined;
    recallQuery: string;
    /** Why recall was skipped, empty when it ran. */
    recallSkipReason: string;
    /** True when a backend problem reduced what could be assembled. */
    degraded: boolean;
    degradedReasons: string[];
    recallIntent: RecallIntent | undefined;
    skills: InjectedSkill[];
    toolExperience: ToolExperience[];
    directory: DirectoryEntry[];
}
export declare const RecalledMemory: MessageFns<RecalledMemory>;
export declare const CompactSummary: MessageFns<CompactSummary>;
export declare const TokenAccounting: MessageFns<TokenAccounting>;
export declare const RecallIntent: MessageFns<RecallIntent>;
export declare const InjectedSkill: MessageFns<InjectedSkill>;
export declare const ToolExperience: MessageFns<ToolExperience>;
export declare const DirectoryEntry: MessageFns<DirectoryEntry>;
export declare const AssembledContextPacket: MessageFns<AssembledContextPacket>;
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
