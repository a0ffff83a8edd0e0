/** Who a call is for: the configured tenant, the host's agent and session. */
import type { Identity } from "../gen/contextengine/v1/common.js";
import type { PluginConfig } from "./config.js";

const AGENT_KEY = /^agent:([A-Za-z0-9_.@-]{1,64}):/;

/**
 * The identity of a host session. The agent comes from the session key (`agent:<id>:...`) when
 * it names one, else from the config's `agentId`: every call of a session derives the same one,
 * so assembly reads the stream capture writes.
 */
export function identityFor(config: PluginConfig, sessionId: string, sessionKey?: string): Identity {
  const agent = sessionKey ? AGENT_KEY.exec(sessionKey)?.[1] : undefined;
  return {
    accountId: config.accountId,
    userId: config.userId,
    agentId: agent ?? config.agentId,
    sessionId,
    sessionKey: sessionKey ?? "",
  };
}
