"""Apps that hold several conversations on one client and one base URL, driven
with the real `openai` SDK and LangChain's `ChatOpenAI` (pinned in .ci/run).

Usage: conversations.py SCENARIO PHASE PROXY_URL, SCENARIO one of app, gather, langchain,
PHASE record or replay. Prints one JSON object of what the SDK saw: each call's text and the
`X-Cuca-Session` it was answered from, or the error it got. Nothing here asserts: the Rust test
(tests/conversations.rs) starts the upstream and the proxy, runs this, and asserts.
"""

import asyncio
import inspect
import json
import sys

import openai

KEY = "sk-conv-secret-5d1e"
SYSTEM = {"role": "system", "content": "You are terse."}
GATHER = ["Name a colour.", "Name a planet.", "Name a fish.", "Name a tree."]


def ask(client, question):
    """One whole call with `question` after the system prompt: its text and session."""
    try:
        raw = client.chat.completions.with_raw_response.create(
            model="tiny", messages=[SYSTEM, {"role": "user", "content": question}])
    except openai.APIStatusError as error:
        return {"status": error.status_code, "error": str(error)}
    answer = raw.parse()
    return {"status": 200, "text": answer.choices[0].message.content,
            "session": raw.headers.get("x-cuca-session")}


def app(proxy, phase):
    """The issue's app: one client, one base URL, two unrelated questions, one system prompt."""
    client = openai.OpenAI(base_url=f"{proxy}/s/app/v1", api_key=KEY, max_retries=0)
    return {"calls": [ask(client, "Name a colour."), ask(client, "Name a planet.")]}


async def streamed(client, question):
    """One streamed call: its text and session, or the error it got."""
    try:
        raw = await client.chat.completions.with_raw_response.create(
            model="tiny", messages=[SYSTEM, {"role": "user", "content": question}],
            stream=True, extra_headers={"x-test-delay-ms": "5"})
    except openai.APIStatusError as error:
        return {"question": question, "status": error.status_code, "error": str(error)}
    text = ""
    stream = raw.parse()
    # Awaitable in some releases of the SDK, the stream itself in others.
    if inspect.isawaitable(stream):
        stream = await stream
    async for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
    return {"question": question, "status": 200, "text": text,
            "session": raw.headers.get("x-cuca-session")}


async def gather(proxy, phase):
    """`asyncio.gather` of four streamed calls with different questions on one AsyncOpenAI.
    Replayed, the questions are asked in the reverse order, one at a time, then all four at
    once again."""
    client = openai.AsyncOpenAI(base_url=f"{proxy}/s/gather/v1", api_key=KEY, max_retries=0)
    if phase == "record":
        return {"calls": list(await asyncio.gather(*(streamed(client, q) for q in GATHER)))}
    one_by_one = [await streamed(client, q) for q in reversed(GATHER)]
    again = list(await asyncio.gather(*(streamed(client, q) for q in GATHER)))
    return {"reversed": one_by_one, "again": again}


def langchain(proxy, phase):
    """One ChatOpenAI: `invoke`, then `stream` of the same question, then a follow-up, then an
    unrelated question: the LangChain app replayed whole."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    from langchain_openai import ChatOpenAI
    import langchain_openai

    chat = ChatOpenAI(base_url=f"{proxy}/s/lc/v1", api_key=KEY, model="tiny", max_retries=0,
                      include_response_headers=True)
    system = SystemMessage(SYSTEM["content"])
    question = [system, HumanMessage("Name a colour.")]
    out = {"langchain_openai": langchain_openai.__version__ if hasattr(langchain_openai, "__version__") else None}

    def call(name, run):
        try:
            out[name] = run()
        except openai.APIStatusError as error:
            out[name] = {"status": error.status_code, "error": str(error)}

    def invoke(messages):
        answer = chat.invoke(messages)
        return {"status": 200, "text": answer.content,
                "session": answer.response_metadata.get("headers", {}).get("x-cuca-session")}

    def stream(messages):
        text, session = "", None
        for chunk in chat.stream(messages):
            text += chunk.content
            headers = chunk.response_metadata.get("headers")
            if headers and session is None:
                session = headers.get("x-cuca-session")
        return {"status": 200, "text": text, "session": session}

    call("invoke", lambda: invoke(question))
    call("stream", lambda: stream(question))
    streamed_text = out["stream"].get("text", "")
    follow_up = question + [AIMessage(streamed_text), HumanMessage("Name another colour.")]
    call("follow_up", lambda: invoke(follow_up))
    call("planet", lambda: invoke([system, HumanMessage("Name a planet.")]))
    return out


if __name__ == "__main__":
    scenario, phase, proxy = sys.argv[1], sys.argv[2], sys.argv[3]
    if scenario == "app":
        result = app(proxy, phase)
    elif scenario == "gather":
        result = asyncio.run(gather(proxy, phase))
    else:
        result = langchain(proxy, phase)
    print(json.dumps({"openai": openai.__version__, **result}))
