#!/usr/bin/env python3
"""A scripted Chat Completions server that answers as the model each request names
(crates/cuca-cli/tests/model_swap.rs): the answer to a request for model M carrying N user
messages is "M-answer-N", so which model served which call shows in the agent's output; a
last user message "step N WORDS" adds " (WORDS)".

Usage: per_model_upstream.py LOG. Listens on a free loopback port and prints
`listening on http://127.0.0.1:PORT` once it does; appends one line "MODEL N" to LOG per
call it answers, so a test counts the calls that reached it and the model each was sent to.
Standard library only.
"""

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = sys.argv[1]
_lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(length))
        model = body.get("model", "")
        n = sum(1 for m in body.get("messages", []) if m.get("role") == "user")
        with _lock:
            with open(LOG, "a") as log:
                log.write(f"{model} {n}\n")
        text = f"{model}-answer-{n}"
        # A variant of the agent (three_calls.py with VARIANT set) is answered in its own
        # words, so each caller can check that the answer it got is its own.
        users = [m for m in body.get("messages", []) if m.get("role") == "user"]
        words = str(users[-1].get("content", "")).split(" ", 2) if users else []
        if len(words) == 3:
            text += f" ({words[2]})"
        answer = {
            "id": f"chatcmpl-{model}-{n}",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10 * n, "completion_tokens": 3, "total_tokens": 10 * n + 3},
        }
        out = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
