"""Drives one `cuca proxy` of the fleet test with the real `openai` package.

    drive.py PROXY_URL PREFIX N_SESSIONS N_CALLS [shared]

Runs N_SESSIONS sessions at once (`{PREFIX}-s{i}`, one thread each), each N_CALLS streamed
calls that carry the conversation so far, and prints one JSON object: every session's
answers, in the order they were streamed. With `shared`, every thread talks to the proxy's
plain base URL (its default session) instead, as agents that never name a session do: the
names are then only the conversations' words.
"""
import json
import sys
import threading

import openai

proxy, prefix, n_sessions, n_calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
shared = sys.argv[5:] == ["shared"]
answers = {}
errors = []


def session(index):
    name = f"{prefix}-s{index}"
    base_url = f"{proxy}/v1" if shared else f"{proxy}/s/{name}/v1"
    client = openai.OpenAI(base_url=base_url, api_key="sk-fleet", max_retries=0)
    messages = [{"role": "system", "content": "You are the fleet test."}]
    got = []
    try:
        for call in range(n_calls):
            messages.append({"role": "user", "content": f"{name} call {call}"})
            stream = client.chat.completions.create(model="fleet", messages=messages, stream=True)
            text = "".join(
                chunk.choices[0].delta.content or ""
                for chunk in stream
                if chunk.choices
            )
            got.append(text)
            messages.append({"role": "assistant", "content": text})
    except Exception as error:  # the test prints it and fails
        errors.append(f"{name}: {error!r}")
    answers[name] = got


threads = [threading.Thread(target=session, args=(i,)) for i in range(n_sessions)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps({"answers": answers, "errors": errors}))
