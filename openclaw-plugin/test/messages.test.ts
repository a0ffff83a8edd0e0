import assert from "node:assert/strict";
import { randomInt } from "node:crypto";
import { test } from "node:test";

import { ConversationMessage, MessageRole } from "../gen/contextengine/v1/common.js";
import { canonicalJson, type HostMessage, toEngineMessage, toHostMessage } from "../src/messages.js";

/** Through the engine's wire format and back, as a stored message would come back. */
function roundTrip(message: HostMessage): HostMessage {
  const wire = ConversationMessage.encode(toEngineMessage(message)).finish();
  return toHostMessage(ConversationMessage.decode(wire));
}

const USER: HostMessage = { role: "user", content: "Which database did we pick?", timestamp: 1764583200123, idempotencyKey: "lt-1:user" };
const ASSISTANT: HostMessage = {
  role: "assistant",
  content: [
    { type: "thinking", thinking: "look it up", thinkingSignature: "sig==" },
    { type: "text", text: "Let me check." },
    { type: "toolCall", id: "call0a1b2c3d", name: "memory_recall", arguments: { query: "database", limit: 3, nested: { a: [1, 2.5, null] } } },
  ],
  api: "openai-completions",
  provider: "local",
  model: "m",
  usage: { input: 10, output: 5, cacheRead: 0, cacheWrite: 0, totalTokens: 15 },
  stopReason: "toolUse",
  timestamp: 1764583201000,
  responseId: "chatcmpl-1",
};
const TOOL_RESULT: HostMessage = {
  role: "toolResult",
  toolCallId: "call0a1b2c3d",
  toolName: "memory_recall",
  content: [{ type: "text", text: '{"memories":[]}' }, { type: "image", data: "aGVsbG8=", mimeType: "image/png" }],
  details: { count: 0 },
  isError: false,
  timestamp: 1764583202000,
};

test("OpenClaw's message shapes survive the engine's wire format unchanged", () => {
  for (const message of [USER, ASSISTANT, TOOL_RESULT]) {
    assert.equal(canonicalJson(roundTrip(message)), canonicalJson(message));
  }
});

test("the engine sees typed blocks: texts, tool calls with JSON arguments, tool results", () => {
  const user = toEngineMessage(USER);
  assert.equal(user.role, MessageRole.MESSAGE_ROLE_USER);
  assert.equal(user.id, "lt-1:user");
  assert.deepEqual(user.content, [{ text: { text: "Which database did we pick?" } }]);
  assert.deepEqual(user.timestamp, { seconds: 1764583200, nanos: 123_000_000 });
  const call = toEngineMessage(ASSISTANT).content[2]?.toolCall;
  assert.equal(call?.name, "memory_recall");
  assert.deepEqual(JSON.parse(call?.arguments?.json ?? ""), ASSISTANT.content && (ASSISTANT.content as { arguments?: unknown }[])[2]?.arguments);
  const result = toEngineMessage(TOOL_RESULT).content[0]?.toolResult;
  assert.equal(result?.toolCallId, "call0a1b2c3d");
  assert.equal(result?.content[0]?.text?.text, '{"memories":[]}');
});

test("unknown roles, unknown blocks and extra block fields come back exactly", () => {
  const odd: HostMessage = {
    role: "bashExecution",
    content: [{ type: "text", text: "ls", textSignature: "t1" }, { type: "widget", payload: { x: 1 } }],
    timestamp: 5,
  };
  assert.equal(canonicalJson(roundTrip(odd)), canonicalJson(odd));
});

test("messages the engine adds get the fields OpenClaw expects", () => {
  const injected = toHostMessage({
    id: "ce-injected-x",
    role: MessageRole.MESSAGE_ROLE_ASSISTANT,
    content: [{ toolCall: { id: "AbC123xyZ", name: "memory_recall_auto", arguments: { json: '{"query":"db"}' } } }],
    timestamp: { seconds: 10, nanos: 0 },
    hostFields: undefined,
  });
  assert.equal(injected.role, "assistant");
  assert.equal(injected.stopReason, "toolUse");
  assert.equal(injected.timestamp, 10_000);
  assert.deepEqual(injected.content, [{ type: "toolCall", id: "AbC123xyZ", name: "memory_recall_auto", arguments: { query: "db" } }]);
});

test("a marked engine message keeps its marker and gets the assistant fields", () => {
  const injected = toHostMessage({
    id: "ce-injected-y",
    role: MessageRole.MESSAGE_ROLE_ASSISTANT,
    content: [{ toolCall: { id: "AbC123xyZ", name: "memory_recall_auto", arguments: { json: "{}" } } }],
    timestamp: undefined,
    hostFields: { json: '{"contextengine_injected":"memory_recall_auto"}' },
  });
  assert.equal(injected.contextengine_injected, "memory_recall_auto");
  assert.equal(injected.stopReason, "toolUse");
  assert.equal((injected.usage as { input: number }).input, 0);
});

function randomText(): string {
  const alphabet = ["a", "Z", " ", "\n", "é", "漢", "😀", '"', "\\", "{", "}"];
  return Array.from({ length: randomInt(0, 20) }, () => alphabet[randomInt(alphabet.length)]).join("");
}

function randomJson(depth: number): unknown {
  const pick = randomInt(depth > 2 ? 4 : 6);
  if (pick === 0) return randomText();
  if (pick === 1) return randomInt(-1000, 1000) / 8;
  if (pick === 2) return randomInt(2) === 1;
  if (pick === 3) return null;
  if (pick === 4) return Array.from({ length: randomInt(3) }, () => randomJson(depth + 1));
  return Object.fromEntries(Array.from({ length: randomInt(3) }, (_, i) => [`k${i}${randomText()}`, randomJson(depth + 1)]));
}

function randomMessage(): HostMessage {
  const kind = randomInt(3);
  if (kind === 0) return { role: "user", content: randomInt(2) ? randomText() : [{ type: "text", text: randomText() }], timestamp: randomInt(1e12) };
  if (kind === 1) {
    const blocks = Array.from({ length: randomInt(4) }, () =>
      randomInt(2)
        ? { type: "text", text: randomText() }
        : { type: "toolCall", id: `call${randomInt(1e6)}`, name: "t", arguments: randomJson(0) },
    );
    return { role: "assistant", content: blocks, stopReason: "stop", usage: { input: 1 }, extra: randomJson(0) };
  }
  return { role: "toolResult", toolCallId: "c", toolName: "t", content: [{ type: "text", text: randomText() }], details: randomJson(0), isError: randomInt(2) === 1 };
}

test("any message round-trips (300 random messages)", () => {
  for (let i = 0; i < 300; i++) {
    const message = randomMessage();
    assert.equal(canonicalJson(roundTrip(message)), canonicalJson(message), JSON.stringify(message));
  }
});
