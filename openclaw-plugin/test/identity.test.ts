import assert from "node:assert/strict";
import { test } from "node:test";

import { parseConfig } from "../src/config.js";
import { identityFor, senderOf } from "../src/identity.js";
import { link, unlink } from "../src/subagent-links.js";

test("the sender of a direct-message session is its user, qualified as the host isolates it", () => {
  assert.equal(senderOf("agent:main:direct:alice"), "alice", "per-peer (an identityLinks name or a raw id)");
  assert.equal(senderOf("agent:main:telegram:direct:123456789"), "telegram.123456789", "per-channel-peer");
  assert.equal(senderOf("agent:main:telegram:bot2:direct:123456789"), "telegram.bot2.123456789", "per-account-channel-peer");
});

test("a session several people share, or none names, has no sender", () => {
  for (const key of ["agent:main:main", "agent:main:telegram:group:-100123", "agent:main:e2e-a", "agent:main:subagent:x", undefined]) {
    assert.equal(senderOf(key), undefined, String(key));
  }
});

test("a peer id the engine would refuse becomes a valid user id, distinct per peer", () => {
  const whatsapp = senderOf("agent:main:whatsapp:direct:+4917612345678");
  const matrix = senderOf("agent:main:matrix:direct:@bob:example.org");
  for (const id of [whatsapp, matrix]) assert.match(id ?? "", /^[A-Za-z0-9_.-]{1,200}$/);
  assert.notEqual(senderOf("agent:main:whatsapp:direct:+49176"), senderOf("agent:main:whatsapp:direct:_49176"));
  assert.equal((senderOf(`agent:main:direct:${"x".repeat(400)}`) ?? "").length, 200);
});

test("identity: the sender where there is one, the config's user otherwise; a subagent is its parent's user", () => {
  const config = parseConfig({ agentId: "fallback", engine: { userId: "owner" } });
  assert.deepEqual(identityFor(config, "s1", "agent:ops:telegram:direct:42"), {
    accountId: "default",
    userId: "telegram.42",
    agentId: "ops",
    sessionId: "s1",
    sessionKey: "agent:ops:telegram:direct:42",
  });
  assert.equal(identityFor(config, "s2", "agent:ops:main").userId, "owner");
  assert.equal(identityFor(config, "s3").agentId, "fallback");
  link("agent:ops:subagent:c1", { parentSessionKey: "agent:ops:telegram:direct:42" });
  link("agent:ops:subagent:c2", { parentSessionKey: "agent:ops:subagent:c1" });
  try {
    assert.equal(identityFor(config, "c2", "agent:ops:subagent:c2").userId, "telegram.42", "a child of a child too");
  } finally {
    unlink("agent:ops:subagent:c1");
    unlink("agent:ops:subagent:c2");
  }
  assert.equal(identityFor(config, "c2", "agent:ops:subagent:c2").userId, "owner");
});
