// A Node.js host calling a live AssemblyService through the generated TypeScript stubs.
// Usage: tsx assemble_call.ts <host:port>; prints the response as JSON on stdout.
import { credentials } from "@grpc/grpc-js";
import { AssembleRequest, AssemblyServiceClient } from "../../../gen/ts/contextengine/v1/assembly.js";
import { MessageRole } from "../../../gen/ts/contextengine/v1/common.js";

const target = process.argv[2];
const client = new AssemblyServiceClient(target, credentials.createInsecure());
const request = AssembleRequest.fromPartial({
  identity: { accountId: "acme", userId: "node-user", agentId: "main", sessionId: "node-session-1" },
  tokenBudget: 4000,
  model: "gpt-4o",
  messages: [
    { id: "u1", role: MessageRole.MESSAGE_ROLE_USER, content: [{ text: { text: "Which database did we pick for project X?" } }] },
  ],
});
client.assemble(request, (error, response) => {
  client.close();
  if (error) {
    console.error(`${error.code} ${error.details}`);
    process.exit(1);
  }
  console.log(JSON.stringify(response));
});
