/**
 * Who a call is for: the tenant (account, user), the host's agent and session.
 *
 * The user is the channel's sender where the host's session key names one. OpenClaw gives each
 * direct-message peer a session of its own when `session.dmScope` says so: `per-peer`
 * (`agent:<agent>:direct:<peer>`, the peer possibly an `identityLinks` name), `per-channel-peer`
 * (`agent:<agent>:<channel>:direct:<peer>`) or `per-account-channel-peer`
 * (`agent:<agent>:<channel>:<account>:direct:<peer>`); the user is then the peer, qualified the
 * way the host isolates it (`<peer>`, `<channel>.<peer>`, `<channel>.<account>.<peer>`). A
 * session several people share (`dmScope: "main"`, groups, the CLI) has one stream, so it stays
 * the config's `engine.userId`; a subagent's session is its parent's user. Every call of a
 * session derives the same identity, so assembly reads the stream capture writes.
 */
import { createHash } from "node:crypto";

import type { Identity } from "../gen/contextengine/v1/common.js";
import type { PluginConfig } from "./config.js";
import { parentSessionKeyOf } from "./subagent-links.js";

const AGENT_KEY = /^agent:([A-Za-z0-9_.@-]{1,64}):/;
const DIRECT_PEER = /^agent:[^:]+:(?:([^:]+):(?:([^:]+):)?)?direct:(.+)$/;
/** What the engine accepts as a user id, less `@` (at most one is allowed; not worth a rule). */
const SAFE = /[^A-Za-z0-9_.-]/g;
const MAX_USER_CHARS = 200;

/** `raw` as a valid user id: unchanged when it is one, else made safe and suffixed with its hash. */
function userIdOf(raw: string): string {
  const safe = raw.replace(SAFE, "_");
  if (safe === raw && raw.length <= MAX_USER_CHARS && !/^\.{1,2}$/.test(raw)) return raw;
  const hash = createHash("sha256").update(raw).digest("hex").slice(0, 12);
  return `${safe.slice(0, MAX_USER_CHARS - hash.length - 1)}-${hash}`;
}

/** The direct-message peer a session key names, as a user id (undefined: none, or shared). */
export function senderOf(sessionKey: string | undefined): string | undefined {
  const match = sessionKey ? DIRECT_PEER.exec(sessionKey) : null;
  if (!match) return undefined;
  const [, channel, account, peer] = match;
  return userIdOf([channel, account, peer].filter((p) => p !== undefined).join("."));
}

/** The identity of a host session (see the module comment). */
export function identityFor(config: PluginConfig, sessionId: string, sessionKey?: string): Identity {
  const agent = sessionKey ? AGENT_KEY.exec(sessionKey)?.[1] : undefined;
  const owner = parentSessionKeyOf(sessionKey) ?? sessionKey;
  return {
    accountId: config.accountId,
    userId: senderOf(owner) ?? config.userId,
    agentId: agent ?? config.agentId,
    sessionId,
    sessionKey: sessionKey ?? "",
  };
}
