"""Drives cuca proxy with the real `openai` Python SDK (pinned in .ci/run).

Usage: drive.py record|replay PROXY_URL. Prints one JSON object of what the SDK saw; the Rust
test (tests/sdk.rs) starts the upstream and the proxy, runs this, and asserts on the output.
Nothing here asserts: the SDK's own parsing is what is under test, and its results are
reported as they came back.
"""

import json
import sys
from concurrent.futures import ThreadPoolExecutor

import urllib.error
import urllib.request

import openai

KEY = "sk-sdk-secret-91f2"
SYSTEM = {"role": "system", "content": "You are terse."}
FIRST = {"role": "user", "content": "The vault is in Lisbon. Reply with: noted"}
SECOND = [SYSTEM, FIRST, {"role": "assistant", "content": "noted"},
          {"role": "user", "content": "Where is the vault? Answer in one word."}]


def client(proxy, session):
    return openai.OpenAI(base_url=f"{proxy}/s/{session}/v1", api_key=KEY, max_retries=0)


def streamed(proxy, session, messages, max_tokens=12, usage=True):
    """One streamed call: the text, the reasoning, the finish reason, usage, headers."""
    extra = {"stream_options": {"include_usage": True}} if usage else {}
    raw = client(proxy, session).chat.completions.with_raw_response.create(
        model="tiny", messages=messages, stream=True, max_tokens=max_tokens, temperature=0,
        **extra)
    out = {"text": "", "reasoning": "", "finish": None, "usage": None, "chunks": 0,
           "session": raw.headers.get("x-cuca-session"), "point": raw.headers.get("x-cuca-point")}
    for chunk in raw.parse():
        out["chunks"] += 1
        if chunk.usage is not None:
            out["usage"] = [chunk.usage.prompt_tokens, chunk.usage.completion_tokens]
        for choice in chunk.choices:
            delta = choice.delta
            out["text"] += delta.content or ""
            out["reasoning"] += getattr(delta, "reasoning_content", None) or ""
            if choice.finish_reason:
                out["finish"] = choice.finish_reason
    return out


def whole(proxy, session, messages, max_tokens):
    """One non-streamed call."""
    answer = client(proxy, session).chat.completions.create(
        model="tiny", messages=messages, stream=False, max_tokens=max_tokens, temperature=0)
    message = answer.choices[0].message
    return {"text": message.content, "reasoning": getattr(message, "reasoning_content", None),
            "finish": answer.choices[0].finish_reason, "model": answer.model,
            "usage": [answer.usage.prompt_tokens, answer.usage.completion_tokens]}


def error_of(call):
    try:
        call()
    except openai.APIStatusError as error:
        body = error.body if isinstance(error.body, dict) else {}
        return {"class": type(error).__name__, "status": error.status_code,
                "type": body.get("type"), "code": body.get("code"),
                "param": body.get("param"), "message": body.get("message")}
    return {"class": None}


def conversations(proxy, prefix):
    """The calls both phases make, keyed by what they are."""
    return {
        "basic": streamed(proxy, f"{prefix}-basic", [SYSTEM, FIRST]),
        "second": streamed(proxy, f"{prefix}-basic", SECOND),
        "whole": whole(proxy, f"{prefix}-whole", [SYSTEM, FIRST], 12),
        "reasoning": streamed(proxy, f"{prefix}-reason",
                              [{"role": "user", "content": SECOND[3]["content"]}], 24),
        "whole_reasoning": whole(proxy, f"{prefix}-wreason",
                                 [{"role": "user", "content": SECOND[3]["content"]}], 24),
        "no_usage": streamed(proxy, f"{prefix}-hi", [{"role": "user", "content": "Say hi"}],
                             8, usage=False),
    }


def sixteen(proxy, prefix):
    with ThreadPoolExecutor(16) as pool:
        calls = [pool.submit(streamed, proxy, f"{prefix}-c{i}", [SYSTEM, FIRST]) for i in range(16)]
        return [call.result() for call in calls]


def gap(proxy, prefix):
    """Twenty synchronous streams read the way most code reads them: a plain for loop, which
    stops at `[DONE]` and closes the response, racing the end of the upstream's body."""
    return [streamed(proxy, f"{prefix}-gap{i}", [SYSTEM, FIRST]) for i in range(20)]


def record(proxy):
    out = conversations(proxy, "sdk")
    out["gap"] = gap(proxy, "sdk")
    with open(sys.argv[3], encoding="utf-8") as f:
        overflow = json.load(f)["messages"]
    out["overflow"] = error_of(lambda: client(proxy, "sdk-errors").chat.completions.create(
        model="tiny", messages=overflow, stream=True, max_tokens=8))
    # The SDK always writes valid JSON, so a truncated body is sent with the standard
    # library's HTTP client, with the headers the SDK would send.
    bad = urllib.request.Request(f"{proxy}/s/sdk-errors/v1/chat/completions",
                                 data=b'{"model":"tiny","stream":true,\n', method="POST",
                                 headers={"Authorization": f"Bearer {KEY}",
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(bad) as response:
            out["bad_json"] = {"status": response.status, "body": json.load(response)}
    except urllib.error.HTTPError as error:
        out["bad_json"] = {"status": error.code, "body": json.load(error)}
    # A caller that hangs up mid-stream: read one chunk, close the stream.
    stream = client(proxy, "sdk-hang").chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "HANG"}], stream=True)
    first = next(iter(stream))
    stream.close()
    out["hang_first_chunk_id"] = first.id
    out["models"] = [m.id for m in client(proxy, "sdk-basic").models.list()]
    out["sixteen"] = sixteen(proxy, "sdk")
    return out


def replay(proxy):
    out = conversations(proxy, "sdk")
    out["gap"] = gap(proxy, "sdk")
    out["sixteen"] = sixteen(proxy, "sdk")
    changed = [SYSTEM, {"role": "user", "content": "The vault is in Porto. Reply with: noted"}]
    out["changed"] = error_of(lambda: streamed(proxy, "sdk-basic", changed))
    out["unknown"] = error_of(lambda: streamed(proxy, "sdk-nobody", [SYSTEM, FIRST]))
    third = SECOND + [{"role": "assistant", "content": "Lisbon"},
                      {"role": "user", "content": "And the key?"}]
    out["past_end"] = error_of(lambda: streamed(proxy, "sdk-basic", third))
    return out


if __name__ == "__main__":
    phase, proxy = sys.argv[1], sys.argv[2]
    result = record(proxy) if phase == "record" else replay(proxy)
    print(json.dumps({"openai": openai.__version__, **result}))
