#!/usr/bin/env python3
"""A three-step agent for crates/cuca-cli/tests/fork_runs.rs: three Chat Completions calls
to $OPENAI_BASE_URL with model "a", each carrying the conversation so far, then its last
answer written to answer.txt in the working directory. With VARIANT set, the second and third
steps say it too. Standard library only.
"""

import json
import os
import urllib.request

base = os.environ["OPENAI_BASE_URL"]
messages = [{"role": "system", "content": "You do three steps."}]
answer = ""
for step in (1, 2, 3):
    # VARIANT changes every step after the first: a changed run that diverges at call 2.
    variant = os.environ.get("VARIANT", "") if step > 1 else ""
    content = f"step {step} {variant}" if variant else f"step {step}"
    messages.append({"role": "user", "content": content})
    request = urllib.request.Request(
        f"{base}/chat/completions",
        data=json.dumps({"model": "a", "messages": messages}).encode(),
        headers={"content-type": "application/json", "authorization": "Bearer sk-test"},
    )
    with urllib.request.urlopen(request) as response:
        answer = json.load(response)["choices"][0]["message"]["content"]
    messages.append({"role": "assistant", "content": answer})
with open("answer.txt", "w") as out:
    out.write(answer + "\n")
