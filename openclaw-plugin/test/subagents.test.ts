import assert from "node:assert/strict";
import { test } from "node:test";

import { link, linkOf, noteAnswer, unlink } from "../src/subagent-links.js";
import { PACKET_CHARS, renderPacket } from "../src/subagents.js";

test("the packet names the parent, keeps the parent's words and the request in progress", () => {
  const packet = renderPacket(
    "agent:main:direct:alice",
    [
      { role: "user", content: "The staging cluster runs in eu-west-3." },
      { role: "assistant", content: [{ type: "text", text: "Noted." }, { type: "toolCall", id: "c", name: "t", arguments: {} }] },
      { role: "assistant", content: [{ type: "toolCall", id: "d", name: "t", arguments: {} }] },
    ],
    "Spawn a helper to check staging.",
  );
  assert.equal(
    packet?.split("\n").slice(1).join("\n"),
    "user: The staging cluster runs in eu-west-3.\nassistant: Noted.\nuser (the request in progress): Spawn a helper to check staging.",
  );
  assert.match(packet ?? "", /parent session agent:main:direct:alice/);
  assert.equal(renderPacket("p", [{ role: "assistant", content: [] }], " "), undefined, "nothing to show: no packet");
});

test("the packet is bounded, its newest part kept", () => {
  const old = { role: "user", content: `OLD ${"a".repeat(PACKET_CHARS)}` };
  const packet = renderPacket("p", [old, { role: "user", content: "NEWEST" }], "") ?? "";
  assert.ok(packet.length <= PACKET_CHARS + 200, String(packet.length));
  assert.ok(packet.endsWith("user: NEWEST") && !packet.includes("OLD"));
});

test("a linked child's newest answer is kept; an unlinked session's is not", () => {
  link("child", { parentSessionKey: "parent", parentSessionId: "p1" });
  noteAnswer("child", [
    { role: "user", content: "task" },
    { role: "assistant", content: [{ type: "text", text: "first" }] },
    { role: "assistant", content: [{ type: "text", text: "Result: 42 widgets." }] },
  ]);
  noteAnswer("child", [{ role: "assistant", content: [{ type: "toolCall", id: "x", name: "t", arguments: {} }] }]);
  assert.equal(linkOf("child")?.answer, "Result: 42 widgets.", "a turn without text keeps the answer before it");
  noteAnswer("stranger", [{ role: "assistant", content: "x" }]);
  assert.equal(linkOf("stranger"), undefined);
  unlink("child");
});
