"""One tool loop with an official Python SDK, for crates/cuca-cli/tests/agents.rs.

Usage: drive_sdk.py CASE [BASE_URL], CASE one of anthropic-create, anthropic-stream,
responses-create, responses-stream, agents, agents-two-runners, langchain. BASE_URL is what the SDK is given: the proxy's
`http://127.0.0.1:P/s/SESSION` for anthropic (the SDK adds `/v1/messages`), `…/s/SESSION/v1`
for openai and the Agents SDK; without it each SDK reads its own variable
(`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`), which `cuca run` sets. The model asks for the tool `lookup_word`; the script runs it
(it returns "cuca-tool-ok"), sends the result back and prints one JSON object on stdout:
{"tool_calls": [[name, arguments], …], "text": the final answer}.
"""

import asyncio
import json
import sys

RESULT = "cuca-tool-ok"
PROMPT = "Look up the word cuca with the tool, then say what it returned."
KEY = "sk-test-agents"
SCHEMA = {
    "type": "object",
    "properties": {"word": {"type": "string", "description": "The word to look up."}},
    "required": ["word"],
    "additionalProperties": False,
}


def anthropic_loop(base_url, stream):
    import anthropic

    client = anthropic.Anthropic(base_url=base_url, api_key=KEY, max_retries=0)
    tools = [{"name": "lookup_word", "description": "Looks a word up.", "input_schema": SCHEMA}]
    messages = [{"role": "user", "content": PROMPT}]
    calls = []
    for _ in range(4):
        arguments = dict(model="claude-sonnet-4-5", max_tokens=256, tools=tools, messages=messages,
                         thinking={"type": "enabled", "budget_tokens": 128})
        if stream:
            with client.messages.stream(**arguments) as events:
                for _event in events:
                    pass
                message = events.get_final_message()
        else:
            message = client.messages.create(**arguments)
        uses = [block for block in message.content if block.type == "tool_use"]
        if not uses:
            thinking = [block for block in message.content if block.type == "thinking"]
            assert all(block.signature for block in thinking), "a thinking block without its signature"
            return calls, "".join(block.text for block in message.content if block.type == "text")
        # The assistant turn goes back as it came, thinking block and signature included:
        # Anthropic refuses a thinking block replayed without its signature.
        messages.append({"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in message.content]})
        results = []
        for use in uses:
            calls.append([use.name, use.input])
            results.append({"type": "tool_result", "tool_use_id": use.id, "content": RESULT})
        messages.append({"role": "user", "content": results})
    raise SystemExit("no final answer after four calls")


def responses_loop(base_url, stream):
    import openai

    client = openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0)
    tools = [{"type": "function", "name": "lookup_word", "description": "Looks a word up.",
              "parameters": SCHEMA, "strict": True}]
    items = [{"role": "user", "content": PROMPT}]
    calls = []
    for _ in range(4):
        arguments = dict(model="gpt-4.1-mini", input=items, tools=tools, store=False)
        if stream:
            response = None
            for event in client.responses.create(stream=True, **arguments):
                if event.type == "response.completed":
                    response = event.response
            assert response is not None, "the stream ended without response.completed"
        else:
            response = client.responses.create(**arguments)
        function_calls = [item for item in response.output if item.type == "function_call"]
        if not function_calls:
            return calls, response.output_text
        for call in function_calls:
            calls.append([call.name, json.loads(call.arguments)])
            items.append({"type": "function_call", "call_id": call.call_id, "name": call.name,
                          "arguments": call.arguments})
            items.append({"type": "function_call_output", "call_id": call.call_id, "output": RESULT})
    raise SystemExit("no final answer after four calls")


def agents_loop(base_url):
    import os

    if base_url:
        os.environ["OPENAI_BASE_URL"] = base_url
    os.environ["OPENAI_API_KEY"] = KEY
    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    from agents import Agent, Runner, function_tool

    calls = []

    @function_tool
    def lookup_word(word: str) -> str:
        """Looks a word up.

        Args:
            word: The word to look up.
        """
        calls.append(["lookup_word", {"word": word}])
        return RESULT

    agent = Agent(name="cuca", instructions="You look words up.", tools=[lookup_word])
    result = asyncio.run(Runner.run(agent, PROMPT))
    return calls, result.final_output


def two_runners(base_url):
    """Two Agents SDK runners on one client (Chat Completions model), run at once
    with asyncio.gather. Each runner's tool returns its own word, so a replay that served one
    runner the other's answer shows in the final outputs."""
    import os

    import openai

    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool

    client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0)
    model = OpenAIChatCompletionsModel(model="gpt-4.1-mini", openai_client=client)
    calls = []

    def runner(name):
        @function_tool(name_override="lookup_word")
        def lookup_word(word: str) -> str:
            """Looks a word up.

            Args:
                word: The word to look up.
            """
            calls.append([f"lookup_word ({name})", {"word": word}])
            return f"{RESULT}-{name}"

        agent = Agent(name=name, instructions=f"You are {name}; you look words up.", model=model,
                      tools=[lookup_word])
        return Runner.run(agent, PROMPT)

    async def both():
        return await asyncio.gather(runner("ada"), runner("bob"))

    results = asyncio.run(both())
    return sorted(calls), [result.final_output for result in results]


def langchain_app(base_url):
    """LangChain's `invoke`, then `stream`, then a `bind_tools` loop on one `ChatOpenAI`."""
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(base_url=base_url, api_key=KEY, model="gpt-4.1-mini", max_retries=0)
    hello = [HumanMessage("Say hello.")]
    out = {"invoke": chat.invoke(hello).content,
           "stream": "".join(chunk.content for chunk in chat.stream(hello))}

    @tool
    def lookup_word(word: str) -> str:
        """Looks a word up."""
        return RESULT

    with_tools = chat.bind_tools([lookup_word])
    messages = [HumanMessage(PROMPT)]
    calls = []
    for _ in range(4):
        answer = with_tools.invoke(messages)
        if not answer.tool_calls:
            out["tool_loop"] = answer.content
            return calls, out
        messages.append(answer)
        for call in answer.tool_calls:
            calls.append([call["name"], call["args"]])
            messages.append(ToolMessage(lookup_word.invoke(call["args"]), tool_call_id=call["id"]))
    raise SystemExit("no final answer after four calls")


def main():
    case, base_url = sys.argv[1], (sys.argv[2:] or [None])[0]
    if case == "anthropic-create":
        calls, text = anthropic_loop(base_url, stream=False)
    elif case == "anthropic-stream":
        calls, text = anthropic_loop(base_url, stream=True)
    elif case == "responses-create":
        calls, text = responses_loop(base_url, stream=False)
    elif case == "responses-stream":
        calls, text = responses_loop(base_url, stream=True)
    elif case == "agents":
        calls, text = agents_loop(base_url)
    elif case == "agents-two-runners":
        calls, text = two_runners(base_url)
    elif case == "langchain":
        calls, text = langchain_app(base_url)
    else:
        raise SystemExit(f"unknown case {case}")
    print(json.dumps({"tool_calls": calls, "text": text}))


if __name__ == "__main__":
    main()
