"""An agent with one tool, driven with the real `openai` Python SDK (pinned in .ci/run).

Usage: tools.py PROXY_URL SESSION TOOL_RESULT. Asks for the tool, "runs" it (its result is
TOOL_RESULT), sends the result back and prints one JSON object: the final text and the session
the answer came from, or the SDK's error (status and message). Nothing here asserts: the Rust
test (tests/sdk.rs) does.
"""

import json
import sys

import openai

proxy, session, result = sys.argv[1:4]
client = openai.OpenAI(base_url=f"{proxy}/s/{session}/v1", api_key="sk-test", max_retries=0)
TOOLS = [{"type": "function", "function": {
    "name": "lookup", "description": "Finds a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
messages = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Use the TOOLS to find the vault."}]
out = {}
try:
    calls = {}
    stream = client.chat.completions.create(
        model="tiny", messages=messages, tools=TOOLS, stream=True, max_tokens=12)
    for chunk in stream:
        for choice in chunk.choices:
            for piece in choice.delta.tool_calls or []:
                call = calls.setdefault(piece.index, {"id": "", "name": "", "arguments": ""})
                call["id"] = call["id"] or (piece.id or "")
                if piece.function:
                    call["name"] += piece.function.name or ""
                    call["arguments"] += piece.function.arguments or ""
    messages.append({"role": "assistant", "content": None, "tool_calls": [
        {"id": c["id"], "type": "function",
         "function": {"name": c["name"], "arguments": c["arguments"]}}
        for c in calls.values()]})
    for c in calls.values():
        messages.append({"role": "tool", "tool_call_id": c["id"], "content": result})
    raw = client.chat.completions.with_raw_response.create(
        model="tiny", messages=messages, tools=TOOLS, max_tokens=12)
    out["session"] = raw.headers.get("x-cuca-session")
    out["text"] = raw.parse().choices[0].message.content
    out["tool_calls"] = len(calls)
except openai.APIStatusError as error:
    out["status"] = error.status_code
    out["message"] = str(error)
print(json.dumps(out))
