#!/usr/bin/env python3
"""A small agent for the strict replay tests (crates/cuca-cli/tests/strict.rs).

Usage: dialogue.py PARAMETERS_JSON PROMPT...

Holds one conversation at $OPENAI_BASE_URL: each PROMPT is a user message, sent with the
conversation so far and the fields of PARAMETERS_JSON (`{"seed": 1}`), and the answer is
appended before the next. Like many agents, it swallows an error: it prints it on stderr,
stops asking, and exits 0. Standard library only.
"""

import json
import os
import sys
import urllib.error
import urllib.request


def main():
    parameters = json.loads(sys.argv[1])
    messages = []
    for prompt in sys.argv[2:]:
        messages.append({"role": "user", "content": prompt})
        body = dict(parameters, model="m", messages=messages)
        request = urllib.request.Request(
            os.environ["OPENAI_BASE_URL"] + "/chat/completions",
            json.dumps(body).encode(),
            {"Content-Type": "application/json", "Authorization": "Bearer sk-test"},
        )
        try:
            with urllib.request.urlopen(request) as response:
                answer = json.load(response)["choices"][0]["message"]
        except urllib.error.HTTPError as error:
            print(f"swallowed {error.code}: {error.read().decode()}", file=sys.stderr)
            return 0
        print(answer["content"])
        messages.append({"role": "assistant", "content": answer["content"]})
    return 0


if __name__ == "__main__":
    sys.exit(main())
