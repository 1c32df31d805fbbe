// `Promise.all` of four streamed calls with different questions on one npm `openai` client
// (for crates/cuca-proxy/tests/conversations.rs). Usage: node conversations.mjs
// record|replay PROXY_URL, with CUCA_TEST_NODE_MODULES at the node_modules .ci/run installs.
// Prints one JSON object: each call's question, text and `X-Cuca-Session`, or its error.
// Replayed, the questions are asked in the reverse order, one at a time, then all at once.
import { createRequire } from "node:module";

const require = createRequire(process.env.CUCA_TEST_NODE_MODULES + "/");
const OpenAI = require("openai");

const [, , phase, proxy] = process.argv;
const client = new OpenAI({ baseURL: `${proxy}/s/all/v1`, apiKey: "sk-conv-secret-5d1e", maxRetries: 0 });
const QUESTIONS = ["Name a colour.", "Name a planet.", "Name a fish.", "Name a tree."];

async function streamed(question) {
  try {
    const { data, response } = await client.chat.completions
      .create(
        { model: "tiny", messages: [{ role: "system", content: "You are terse." }, { role: "user", content: question }], stream: true },
        { headers: { "x-test-delay-ms": "5" } },
      )
      .withResponse();
    let text = "";
    for await (const chunk of data) {
      for (const choice of chunk.choices) text += choice.delta?.content ?? "";
    }
    return { question, status: 200, text, session: response.headers.get("x-cuca-session") };
  } catch (error) {
    return { question, status: error.status ?? null, error: String(error) };
  }
}

let out;
if (phase === "record") {
  out = { calls: await Promise.all(QUESTIONS.map(streamed)) };
} else {
  const reversed = [];
  for (const question of [...QUESTIONS].reverse()) reversed.push(await streamed(question));
  out = { reversed, again: await Promise.all(QUESTIONS.map(streamed)) };
}
console.log(JSON.stringify(out));
