import assert from "node:assert/strict";
import { test } from "node:test";

import {
  acknowledge,
  MAX_RECOVERED_TURNS,
  missedTurns,
  rememberTranscript,
  runOfCommit,
  turnOpenedBy,
} from "../src/acknowledged.js";
import type { HostMessage } from "../src/messages.js";

/** One host turn of run `run`, as OpenClaw 2026.9 keeps it in its transcript. */
function turn(run: string, tools = 0): HostMessage[] {
  const messages: HostMessage[] = [{ role: "user", content: `question ${run}`, idempotencyKey: `${run}:user` }];
  for (let i = 0; i < tools; i++) {
    messages.push({ role: "assistant", content: [{ type: "toolCall", id: `${run}-c${i}`, name: "t", arguments: {} }] });
    messages.push({ role: "toolResult", toolCallId: `${run}-c${i}`, toolName: "t", content: [{ type: "text", text: "r" }] });
  }
  messages.push({ role: "assistant", content: [{ type: "text", text: `answer ${run}` }] });
  return messages;
}

test("a keyed user message opens its run; other messages open none", () => {
  assert.equal(turnOpenedBy({ role: "user", content: "x", idempotencyKey: "run-7:user" }), "run-7");
  assert.equal(turnOpenedBy({ role: "user", content: "x" }), undefined);
  assert.equal(turnOpenedBy({ role: "user", content: "x", idempotencyKey: ":user" }), undefined);
  assert.equal(turnOpenedBy({ role: "assistant", content: [], idempotencyKey: "run-7:user" }), undefined);
});

test("a commit's run is its admission's key, not its advancement key (OpenClaw's logicalTurnId is another id)", () => {
  // as openclaw@2026.9.6 sends it: logicalTurnId/advancementKey and the run id differ
  const admission = { logicalTurnId: "lt-d2", idempotencyKey: "run-d2:user", role: "user" };
  assert.equal(runOfCommit(admission, turn("run-d2")), "run-d2");
  assert.equal(runOfCommit({ logicalTurnId: "lt-d2" }, turn("run-d2")), "run-d2", "else the admitted user message's");
  assert.equal(runOfCommit({ logicalTurnId: "lt-d2" }, [{ role: "user", content: "x" }]), undefined);
});

test("the turns between the acknowledged run and the current one come back whole, in order", () => {
  const session = `s-${Math.random()}`;
  rememberTranscript(session, [...turn("d1"), ...turn("d2"), ...turn("d3", 2), ...turn("d3b"), ...turn("d4")]);
  assert.deepEqual(missedTurns(session, "d4"), [], "nothing is acknowledged yet: nothing is guessed");
  acknowledge(session, runOfCommit({ logicalTurnId: "lt-d2", idempotencyKey: "d2:user" }, turn("d2")) ?? "");
  const missed = missedTurns(session, "d4");
  assert.deepEqual(missed.map((t) => t.runId), ["d3", "d3b"]);
  assert.deepEqual(missed[0].messages, turn("d3", 2));
  assert.deepEqual(missed[1].messages, turn("d3b"));
  assert.deepEqual(missedTurns(session, "d3"), [], "the current turn is never its own gap");
  acknowledge(session, "d4");
  assert.deepEqual(missedTurns(session, "d5"), []);
});

test("what the engine added to the transcript (assemble's second call gets its own output) is no turn's part", () => {
  const session = `s-${Math.random()}`;
  const summary: HostMessage = { role: "user", content: [{ type: "text", text: "[Session History Summary]" }], contextengine_injected: true };
  const recall: HostMessage = { role: "toolResult", toolCallId: "r", toolName: "memory_recall_auto", content: [], contextengine_injected: true };
  rememberTranscript(session, [summary, ...turn("a"), ...turn("b"), recall]);
  acknowledge(session, "a");
  assert.deepEqual(missedTurns(session, "c"), [{ runId: "b", messages: turn("b") }]);
});

test("the prompt not yet in the transcript, or the acknowledged run compacted away", () => {
  const session = `s-${Math.random()}`;
  rememberTranscript(session, [...turn("a"), ...turn("b")]);
  acknowledge(session, "a");
  assert.deepEqual(missedTurns(session, "c").map((t) => t.runId), ["b"]);
  assert.deepEqual(missedTurns(session, undefined).map((t) => t.runId), ["b"], "a commit without a run key");
  acknowledge(session, "gone");
  assert.deepEqual(missedTurns(session, "c"), []);
});

test("a commit recovers at most MAX_RECOVERED_TURNS turns, the newest", () => {
  const session = `s-${Math.random()}`;
  const ids = Array.from({ length: MAX_RECOVERED_TURNS + 5 }, (_, i) => `t${i}`);
  rememberTranscript(session, [...turn("acked"), ...ids.flatMap((id) => turn(id))]);
  acknowledge(session, "acked");
  assert.deepEqual(missedTurns(session, "now").map((t) => t.runId), ids.slice(-MAX_RECOVERED_TURNS));
});
