// One Responses tool loop with the npm `openai` SDK, for crates/cuca-cli/tests/agents.rs.
// Usage: node drive_openai.mjs responses-create|responses-stream [BASE_URL] (…/s/SESSION/v1;
// without it the SDK reads OPENAI_BASE_URL, which `cuca run` sets), with NODE_PATH at the node_modules .ci/run installs. Prints one JSON object on stdout:
// {"tool_calls": [[name, arguments], …], "text": the final answer}.
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_PATH.split(":")[0] + "/");
const OpenAI = require("openai");

const [, , mode, baseURL] = process.argv;
const client = new OpenAI({ baseURL, apiKey: "sk-test-agents", maxRetries: 0 });
const schema = {
  type: "object",
  properties: { word: { type: "string", description: "The word to look up." } },
  required: ["word"],
  additionalProperties: false,
};
const tools = [{ type: "function", name: "lookup_word", description: "Looks a word up.", parameters: schema, strict: true }];
const items = [{ role: "user", content: "Look up the word cuca with the tool, then say what it returned." }];
const calls = [];

for (let round = 0; round < 4; round++) {
  const request = { model: "gpt-4.1-mini", input: items, tools, store: false };
  let response;
  if (mode === "responses-stream") {
    const stream = await client.responses.create({ ...request, stream: true });
    for await (const event of stream) {
      if (event.type === "response.completed") response = event.response;
    }
    if (!response) throw new Error("the stream ended without response.completed");
  } else {
    response = await client.responses.create(request);
  }
  const functionCalls = response.output.filter((item) => item.type === "function_call");
  if (functionCalls.length === 0) {
    const text = response.output
      .filter((item) => item.type === "message")
      .flatMap((item) => item.content)
      .filter((part) => part.type === "output_text")
      .map((part) => part.text)
      .join("");
    console.log(JSON.stringify({ tool_calls: calls, text }));
    process.exit(0);
  }
  for (const call of functionCalls) {
    calls.push([call.name, JSON.parse(call.arguments)]);
    items.push({ type: "function_call", call_id: call.call_id, name: call.name, arguments: call.arguments });
    items.push({ type: "function_call_output", call_id: call.call_id, output: "cuca-tool-ok" });
  }
}
throw new Error("no final answer after four calls");
