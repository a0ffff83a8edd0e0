import assert from "node:assert/strict";
import { test } from "node:test";

import { acknowledge, MAX_RECOVERED_TURNS, missedTurns, rememberTranscript, turnOpenedBy } from "../src/acknowledged.js";
import type { HostMessage } from "../src/messages.js";

function turn(id: string, tools = 0): HostMessage[] {
  const messages: HostMessage[] = [{ role: "user", content: `question ${id}`, idempotencyKey: `${id}:user` }];
  for (let i = 0; i < tools; i++) {
    messages.push({ role: "assistant", content: [{ type: "toolCall", id: `${id}-c${i}`, name: "t", arguments: {} }] });
    messages.push({ role: "toolResult", toolCallId: `${id}-c${i}`, toolName: "t", content: [{ type: "text", text: "r" }] });
  }
  messages.push({ role: "assistant", content: [{ type: "text", text: `answer ${id}` }] });
  return messages;
}

test("a keyed user message opens its logical turn; other messages open none", () => {
  assert.equal(turnOpenedBy({ role: "user", content: "x", idempotencyKey: "lt-7:user" }), "lt-7");
  assert.equal(turnOpenedBy({ role: "user", content: "x" }), undefined);
  assert.equal(turnOpenedBy({ role: "user", content: "x", idempotencyKey: ":user" }), undefined);
  assert.equal(turnOpenedBy({ role: "assistant", content: [], idempotencyKey: "lt-7:user" }), undefined);
});

test("the turns between the acknowledged one and the current one come back whole, in order", () => {
  const session = `s-${Math.random()}`;
  rememberTranscript(session, [...turn("d1"), ...turn("d2"), ...turn("d3", 2), ...turn("d3b"), ...turn("d4")]);
  assert.deepEqual(missedTurns(session, "d4"), [], "nothing is acknowledged yet: nothing is guessed");
  acknowledge(session, "d2");
  const missed = missedTurns(session, "d4");
  assert.deepEqual(missed.map((t) => t.logicalTurnId), ["d3", "d3b"]);
  assert.deepEqual(missed[0].messages, turn("d3", 2));
  assert.deepEqual(missed[1].messages, turn("d3b"));
  assert.deepEqual(missedTurns(session, "d3"), [], "the current turn is never its own gap");
  acknowledge(session, "d4");
  assert.deepEqual(missedTurns(session, "d5"), []);
});

test("the prompt not yet in the transcript, or the acknowledged turn compacted away", () => {
  const session = `s-${Math.random()}`;
  rememberTranscript(session, [...turn("a"), ...turn("b")]);
  acknowledge(session, "a");
  assert.deepEqual(missedTurns(session, "c").map((t) => t.logicalTurnId), ["b"]);
  acknowledge(session, "gone");
  assert.deepEqual(missedTurns(session, "c"), []);
});

test("a commit recovers at most MAX_RECOVERED_TURNS turns, the newest", () => {
  const session = `s-${Math.random()}`;
  const ids = Array.from({ length: MAX_RECOVERED_TURNS + 5 }, (_, i) => `t${i}`);
  rememberTranscript(session, [...turn("acked"), ...ids.flatMap((id) => turn(id))]);
  acknowledge(session, "acked");
  assert.deepEqual(missedTurns(session, "now").map((t) => t.logicalTurnId), ids.slice(-MAX_RECOVERED_TURNS));
});
