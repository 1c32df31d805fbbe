#!/usr/bin/env python3
"""A scripted model server for the agents' proof (crates/cuca-cli/tests/agents.rs).

A random-weight model never calls a tool, so this server plays a model that does, in each
wire format an agent speaks, shaped as the real providers answer (OpenAI Chat Completions and
Responses, Anthropic Messages; streamed as server-sent events and not):

* while the request holds no tool result and offers tools, it calls one tool: Claude Code's
  `Bash` with {"command": "echo cuca-tool-ok"}, Codex's shell tool (`exec_command`,
  `shell_command` or `shell`) with arguments in the shape its schema asks, else the first
  function tool, its required arguments filled from its schema;
* once the request holds a tool result, it answers text quoting it: "The tool returned: …",
  so a recorded and replayed tool loop shows in the agent's final output;
* with no tools and no result, it answers "Hello from the scripted upstream.".

A conversation whose request carries EDIT_SCRIPT (in the prompt) follows another script, the
edit script, one step per tool result the request holds, so an agent's edit tool and a failing
command land in its workspace and shell (crates/cuca-cli/tests/agents_workspace.rs):

* no result yet: Claude Code runs STATUS_COMMAND through `Bash`, then `Read`s notes.txt (the
  absolute path in the working directory its prompt names, as its schema asks: it refuses an
  `Edit` of a file not read in the conversation); Codex runs `cat notes.txt` and
  STATUS_COMMAND through its shell tool;
* then the edit: Claude Code's `Edit` of notes.txt, Codex's `apply_patch` (its freeform tool);
* then FAIL_COMMAND through the shell tool: it prints notes.txt and fails with exit status 3
  and a line on stderr;
* then text quoting the last result.

STATUS_COMMAND prints `$CUCA_TEST_STATUS` (default `recorded`): a run with the variable set
gets another result for the first tool call, so a fork of the recording goes live at the
second call, before the edit, and the model is sent the file as the restored copy holds it.

An Anthropic answer starts with a thinking block, with its `signature`, when the request
enables thinking; a Responses answer starts with a reasoning item (its summary and
`encrypted_content`) when the request asks for `reasoning.encrypted_content`.

Also: `POST /v1/messages/count_tokens`, `GET /v1/models` (OpenAI's list, or Anthropic's when
the request carries `anthropic-version`), `HEAD /` and `GET /` (200). Paths may carry a query
string (`/v1/messages?beta=true`) and need not start with `/v1` (`/messages` is the same).

Usage: scripted_upstream.py PORT [--dump DIR]. PORT 0 picks a free port; the line
`listening on http://127.0.0.1:PORT` is printed on stdout once it listens. Each request's
method and path is logged to stderr; with --dump, each request body is written to DIR.
Standard library only.
"""

import itertools
import json
import os
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOOL_COMMAND = "echo cuca-tool-ok"
# What an Anthropic answer to a request with cache breakpoints reports (the figures a real one
# sent Claude Code): crates/cuca-cli/tests/agents.rs finds every kind in the session.
CACHE_USAGE = {"cache_creation_input_tokens": 1201, "cache_read_input_tokens": 3401,
               "cache_creation": {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 201}}
EDIT_SCRIPT = "cuca-edit-script"
STATUS_COMMAND = 'echo "status: ${CUCA_TEST_STATUS:-recorded}"'
FAIL_COMMAND = "{ cat notes.txt; echo cuca-check-failed; } >&2; exit 3"
NOTES = "notes.txt"
OLD_LINE = "line two\n"
NEW_LINES = "line two, edited\nline three\n"
APPLY_PATCH = ("*** Begin Patch\n*** Update File: notes.txt\n@@\n line one\n-line two\n"
               "+line two, edited\n+line three\n*** End Patch\n")
HELLO = "Hello from the scripted upstream."
SIGNATURE = "EqQBCkYIBxgCKkCuca+scripted+signature+of+the+thinking+block+AAAAAAAAAAAAAAAA=="
ENCRYPTED_REASONING = "gAAAAABcuca-scripted-encrypted-reasoning-content=="

_counter = itertools.count(1)
_counter_lock = threading.Lock()
DUMP_DIR = None


def dumps(value):
    """JSON as the providers send it: compact, no spaces."""
    return json.dumps(value, separators=(",", ":"))


def next_id(prefix, width=24):
    with _counter_lock:
        n = next(_counter)
    return f"{prefix}{n:0{width}d}"


def tokens_of(value):
    """A stable stand-in for a token count: a quarter of the JSON's length."""
    return max(1, len(dumps(value)) // 4)


def text_of_content(content):
    """The text of a tool result's content: a string, or a list of text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                parts.append(str(part.get("text", part.get("output", ""))))
            else:
                parts.append(str(part))
        return "".join(parts)
    return dumps(content)


# ---- the script: which tool to call, and what a tool result says -----------------------

COMMAND_NAMES = ("command", "cmd")
SHELL_TOOLS = ("Bash", "exec_command", "shell_command", "shell", "container.exec")


def fill(name, schema):
    """A value for a required property, from its schema: the command for a command."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if name in COMMAND_NAMES:
        if kind == "array":
            return ["bash", "-lc", TOOL_COMMAND]
        return TOOL_COMMAND
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.0
    if kind == "boolean":
        return False
    if kind == "array":
        return []
    if kind == "object":
        return {}
    enum = schema.get("enum") if isinstance(schema, dict) else None
    if enum:
        return enum[0]
    return "cuca"


def arguments_for(parameters):
    """The arguments object for a function tool: every required property filled, and the
    command property (even if optional) given the scripted command."""
    parameters = parameters if isinstance(parameters, dict) else {}
    properties = parameters.get("properties") or {}
    required = parameters.get("required") or []
    arguments = {}
    for name in list(required) + [n for n in COMMAND_NAMES if n in properties]:
        if name not in arguments:
            arguments[name] = fill(name, properties.get(name, {}))
    return arguments


def choose_tool(tools):
    """(name, parameters) of the tool to call among `(name, parameters)` pairs: a shell
    tool first, in the order of SHELL_TOOLS, else the first one."""
    if not tools:
        return None
    by_name = {name: parameters for name, parameters in tools}
    for name in SHELL_TOOLS:
        if name in by_name:
            return name, by_name[name]
    return tools[0]


def answer_text(result):
    return f"The tool returned: {result.strip()}"


# ---- the edit script -------------------------------------------------------------------

WORKING_DIRECTORY = re.compile(r"(?:Primary working directory|Working directory): ([^\s\\\"]+)")


def edit_script(body):
    """Whether the request's conversation follows the edit script: its prompt names it."""
    return EDIT_SCRIPT in dumps(body.get("messages") or body.get("input") or [])


def claude_edit_step(body, n_results, last_result):
    """The edit script's step for Claude Code: the tool calls `[(name, input)]`, or text."""
    found = WORKING_DIRECTORY.search(dumps(body))
    notes = os.path.join(found.group(1), NOTES) if found else NOTES
    if n_results == 0:
        return [("Bash", {"command": STATUS_COMMAND, "description": "Print the status"})], None
    if n_results == 1:
        return [("Read", {"file_path": notes})], None
    if n_results == 2:
        return [("Edit", {"file_path": notes, "old_string": OLD_LINE, "new_string": NEW_LINES})], None
    if n_results == 3:
        return [("Bash", {"command": FAIL_COMMAND, "description": "Run the check"})], None
    return [], answer_text(last_result)


def codex_edit_step(n_results, last_result):
    """The edit script's step for Codex: `[(kind, name, arguments or input)]`, or text."""
    if n_results == 0:
        return [("function", "exec_command", {"cmd": f"cat {NOTES}; {STATUS_COMMAND}"})], None
    if n_results == 1:
        return [("custom", "apply_patch", APPLY_PATCH)], None
    if n_results == 2:
        return [("function", "exec_command", {"cmd": FAIL_COMMAND})], None
    return [], answer_text(last_result)


# ---- HTTP -------------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "cuca-scripted-upstream"
    sys_version = ""

    def log_message(self, format, *args):  # noqa: A002 - the stdlib's name
        pass

    # -- plumbing --

    def route(self):
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.startswith("/v1/"):
            path = path[3:]
        return path

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send_json(self, status, value, anthropic=False):
        body = dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.request_id_header(anthropic)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def request_id_header(self, anthropic):
        if anthropic:
            self.send_header("request-id", next_id("req_01", 22))
        else:
            self.send_header("x-request-id", next_id("req_", 32))
            self.send_header("openai-processing-ms", "1")

    def start_sse(self, anthropic=False):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.request_id_header(anthropic)
        self.end_headers()

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def event(self, name, value):
        """One server-sent event, named as Anthropic and the Responses API name theirs."""
        self.chunk(f"event: {name}\ndata: {dumps(value)}\n\n".encode())

    def data(self, value):
        """One Chat Completions event: data only."""
        payload = value if isinstance(value, str) else dumps(value)
        self.chunk(f"data: {payload}\n\n".encode())

    def end_sse(self):
        self.chunk(b"")  # the zero-length chunk ends the chunked body

    # -- methods --

    def do_HEAD(self):
        print(f"HEAD {self.path}", file=sys.stderr, flush=True)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        print(f"GET {self.path}", file=sys.stderr, flush=True)
        path = self.route()
        anthropic = "anthropic-version" in self.headers
        if path in ("", "/"):
            body = b"OK"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif path == "/models" and anthropic:
            self.send_json(200, {
                "data": [{"type": "model", "id": "cuca-scripted",
                          "display_name": "cuca scripted", "created_at": "2026-01-01T00:00:00Z"}],
                "has_more": False, "first_id": "cuca-scripted", "last_id": "cuca-scripted",
            }, anthropic=True)
        elif path == "/models":
            self.send_json(200, {"object": "list", "data": [
                {"id": "cuca-scripted", "object": "model", "created": 1767225600, "owned_by": "cuca"}]})
        else:
            self.not_found(anthropic)

    def do_POST(self):
        print(f"POST {self.path}", file=sys.stderr, flush=True)
        raw = self.read_body()
        if DUMP_DIR:
            name = next_id("", 4) + self.route().replace("/", "_") + ".json"
            with open(os.path.join(DUMP_DIR, name), "wb") as out:
                out.write(raw)
        path = self.route()
        anthropic = path.startswith("/messages")
        try:
            body = json.loads(raw or b"{}")
        except ValueError as error:
            self.bad_request(anthropic, f"the body is not JSON: {error}")
            return
        if path == "/chat/completions":
            self.chat_completions(body)
        elif path == "/messages":
            self.messages(body)
        elif path == "/messages/count_tokens":
            self.send_json(200, {"input_tokens": tokens_of(body)}, anthropic=True)
        elif path == "/responses":
            self.responses_api(body)
        else:
            self.not_found(anthropic)

    def not_found(self, anthropic):
        message = f"no route for {self.command} {self.path}"
        if anthropic:
            self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": message}}, True)
        else:
            self.send_json(404, {"error": {"message": message, "type": "invalid_request_error",
                                           "param": None, "code": "unknown_url"}})

    def bad_request(self, anthropic, message):
        if anthropic:
            self.send_json(400, {"type": "error", "error": {"type": "invalid_request_error", "message": message}}, True)
        else:
            self.send_json(400, {"error": {"message": message, "type": "invalid_request_error",
                                           "param": None, "code": None}})

    # -- OpenAI Chat Completions --

    def chat_completions(self, body):
        result = None
        for message in body.get("messages") or []:
            if message.get("role") == "tool":
                result = text_of_content(message.get("content"))
        tools = [(t["function"]["name"], t["function"].get("parameters"))
                 for t in body.get("tools") or [] if t.get("type") == "function"]
        call = choose_tool(tools) if result is None else None
        model = body.get("model", "cuca-scripted")
        ident, created = next_id("chatcmpl-", 24), int(time.time())
        prompt = tokens_of(body.get("messages"))
        if call:
            tool_call = {"id": next_id("call_", 24), "type": "function",
                         "function": {"name": call[0], "arguments": dumps(arguments_for(call[1]))}}
            message = {"role": "assistant", "content": None, "tool_calls": [tool_call], "refusal": None}
            finish, text = "tool_calls", None
        else:
            text = HELLO if result is None else answer_text(result)
            message = {"role": "assistant", "content": text, "refusal": None}
            finish = "stop"
        completion = tokens_of(message)
        usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
                 "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}}
        if not body.get("stream"):
            self.send_json(200, {"id": ident, "object": "chat.completion", "created": created, "model": model,
                                 "choices": [{"index": 0, "message": message, "logprobs": None,
                                              "finish_reason": finish}],
                                 "usage": usage, "system_fingerprint": "fp_cuca"})
            return

        def chunk(delta, finish_reason=None):
            return {"id": ident, "object": "chat.completion.chunk", "created": created, "model": model,
                    "system_fingerprint": "fp_cuca",
                    "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}

        self.start_sse()
        self.data(chunk({"role": "assistant", "content": "" if text is not None else None, "refusal": None}))
        if call:
            tool_call = message["tool_calls"][0]
            self.data(chunk({"tool_calls": [{"index": 0, "id": tool_call["id"], "type": "function",
                                             "function": {"name": tool_call["function"]["name"], "arguments": ""}}]}))
            for piece in split(tool_call["function"]["arguments"]):
                self.data(chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}))
        else:
            for piece in split(text):
                self.data(chunk({"content": piece}))
        self.data(chunk({}, finish))
        if (body.get("stream_options") or {}).get("include_usage"):
            final = chunk({})
            final["choices"] = []
            final["usage"] = usage
            self.data(final)
        self.data("[DONE]")
        self.end_sse()

    # -- Anthropic Messages --

    def messages(self, body):
        result, n_results = None, 0
        for message in body.get("messages") or []:
            content = message.get("content")
            if message.get("role") == "user" and isinstance(content, list):
                for block in content:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        result = text_of_content(block.get("content"))
                        n_results += 1
        tools = [(t["name"], t.get("input_schema")) for t in body.get("tools") or []
                 if "name" in t and t.get("type") in (None, "custom")]
        text = None
        if tools and edit_script(body):
            calls, text = claude_edit_step(body, n_results, result)
        elif result is None and tools:
            name, schema = choose_tool(tools)
            calls = [(name, arguments_for(schema))]
        else:
            calls = []
        thinking = (body.get("thinking") or {}).get("type") in ("enabled", "adaptive")
        model = body.get("model", "cuca-scripted")
        content = []
        if thinking:
            content.append({"type": "thinking", "thinking": "The script says what to do next.",
                            "signature": SIGNATURE})
        for name, given in calls:
            content.append({"type": "tool_use", "id": next_id("toolu_01", 22), "name": name,
                            "input": given})
        if calls:
            stop = "tool_use"
        else:
            if text is None:
                text = HELLO if result is None else answer_text(result)
            content.append({"type": "text", "text": text})
            stop = "end_turn"
        usage = {"input_tokens": tokens_of(body.get("messages")), "cache_creation_input_tokens": 0,
                 "cache_read_input_tokens": 0, "output_tokens": tokens_of(content),
                 "service_tier": "standard"}
        if "cache_control" in dumps(body):
            # A request with cache breakpoints (Claude Code marks its system prompt) is answered
            # with the cache usage a real answer reports: reads, and writes split by TTL.
            usage.update(CACHE_USAGE)
        message = {"id": next_id("msg_01", 22), "type": "message", "role": "assistant", "model": model,
                   "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            self.send_json(200, message, anthropic=True)
            return
        self.start_sse(anthropic=True)
        self.event("message_start", {"type": "message_start", "message": {
            **message, "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1}}})
        for index, block in enumerate(content):
            if block["type"] == "thinking":
                start = {"type": "thinking", "thinking": "", "signature": ""}
                deltas = [{"type": "thinking_delta", "thinking": p} for p in split(block["thinking"])]
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
            elif block["type"] == "tool_use":
                start = {**block, "input": {}}
                deltas = [{"type": "input_json_delta", "partial_json": p}
                          for p in [""] + split(dumps(block["input"]))]
            else:
                start = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": p} for p in split(block["text"])]
            self.event("content_block_start", {"type": "content_block_start", "index": index, "content_block": start})
            if index == 0:
                self.event("ping", {"type": "ping"})
            for delta in deltas:
                self.event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
            self.event("content_block_stop", {"type": "content_block_stop", "index": index})
        self.event("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": usage["output_tokens"]}})
        self.event("message_stop", {"type": "message_stop"})
        self.end_sse()

    # -- OpenAI Responses --

    def responses_api(self, body):
        items = body.get("input")
        items = items if isinstance(items, list) else []
        result, n_results = None, 0
        for item in items:
            if isinstance(item, dict) and item.get("type") in (
                    "function_call_output", "custom_tool_call_output", "local_shell_call_output"):
                result = text_of_content(item.get("output"))
                n_results += 1
        tools = [(t["name"], t.get("parameters")) for t in body.get("tools") or []
                 if t.get("type") == "function" and "name" in t]
        text = None
        if tools and edit_script(body):
            calls, text = codex_edit_step(n_results, result)
        elif result is None and tools:
            name, parameters = choose_tool(tools)
            calls = [("function", name, arguments_for(parameters))]
        else:
            calls = []
        reasoning = "reasoning.encrypted_content" in (body.get("include") or [])
        output = []
        if reasoning:
            output.append({"id": next_id("rs_", 32), "type": "reasoning",
                           "summary": [{"type": "summary_text", "text": "The script says what to do next."}],
                           "encrypted_content": ENCRYPTED_REASONING})
        for kind, name, given in calls:
            if kind == "custom":
                output.append({"id": next_id("ctc_", 32), "type": "custom_tool_call", "status": "completed",
                               "call_id": next_id("call_", 24), "name": name, "input": given})
            else:
                output.append({"id": next_id("fc_", 32), "type": "function_call", "status": "completed",
                               "arguments": dumps(given), "call_id": next_id("call_", 24), "name": name})
        if not calls:
            if text is None:
                text = HELLO if result is None else answer_text(result)
            output.append({"id": next_id("msg_", 32), "type": "message", "status": "completed",
                           "content": [{"type": "output_text", "annotations": [], "logprobs": [],
                                        "text": text}],
                           "role": "assistant"})
        prompt, completion = tokens_of(body.get("input")), tokens_of(output)
        response = {
            "id": next_id("resp_", 32), "object": "response", "created_at": int(time.time()),
            "status": "completed", "background": False, "error": None, "incomplete_details": None,
            "instructions": body.get("instructions"), "max_output_tokens": body.get("max_output_tokens"),
            "max_tool_calls": None, "model": body.get("model", "cuca-scripted"), "output": output,
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "previous_response_id": body.get("previous_response_id"), "prompt_cache_key": None,
            "reasoning": {"effort": (body.get("reasoning") or {}).get("effort"),
                          "summary": (body.get("reasoning") or {}).get("summary")},
            "safety_identifier": None, "service_tier": "default", "store": body.get("store", True),
            "temperature": body.get("temperature", 1.0), "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": body.get("tool_choice", "auto"), "tools": body.get("tools") or [],
            "top_logprobs": 0, "top_p": body.get("top_p", 1.0), "truncation": "disabled",
            "usage": {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": prompt + completion},
            "user": None, "metadata": body.get("metadata") or {},
        }
        if not body.get("stream"):
            self.send_json(200, response)
            return
        sequence = itertools.count()

        def event(name, **fields):
            self.event(name, {"type": name, "sequence_number": next(sequence), **fields})

        in_progress = {**response, "status": "in_progress", "output": [], "usage": None}
        self.start_sse()
        event("response.created", response=in_progress)
        event("response.in_progress", response=in_progress)
        for index, item in enumerate(output):
            at = {"item_id": item["id"], "output_index": index}
            if item["type"] == "reasoning":
                event("response.output_item.added", output_index=index,
                      item={"id": item["id"], "type": "reasoning", "summary": []})
                for part_index, part in enumerate(item["summary"]):
                    event("response.reasoning_summary_part.added", **at, summary_index=part_index,
                          part={"type": "summary_text", "text": ""})
                    for piece in split(part["text"]):
                        event("response.reasoning_summary_text.delta", **at, summary_index=part_index, delta=piece)
                    event("response.reasoning_summary_text.done", **at, summary_index=part_index, text=part["text"])
                    event("response.reasoning_summary_part.done", **at, summary_index=part_index, part=part)
            elif item["type"] == "function_call":
                event("response.output_item.added", output_index=index,
                      item={**item, "status": "in_progress", "arguments": ""})
                for piece in split(item["arguments"]):
                    event("response.function_call_arguments.delta", **at, delta=piece)
                event("response.function_call_arguments.done", **at, arguments=item["arguments"])
            elif item["type"] == "custom_tool_call":
                event("response.output_item.added", output_index=index,
                      item={**item, "status": "in_progress", "input": ""})
                for piece in split(item["input"]):
                    event("response.custom_tool_call_input.delta", **at, delta=piece)
                event("response.custom_tool_call_input.done", **at, input=item["input"])
            else:
                part = item["content"][0]
                event("response.output_item.added", output_index=index,
                      item={**item, "status": "in_progress", "content": []})
                event("response.content_part.added", **at, content_index=0,
                      part={"type": "output_text", "annotations": [], "logprobs": [], "text": ""})
                for piece in split(part["text"]):
                    event("response.output_text.delta", **at, content_index=0, delta=piece, logprobs=[])
                event("response.output_text.done", **at, content_index=0, text=part["text"], logprobs=[])
                event("response.content_part.done", **at, content_index=0, part=part)
            event("response.output_item.done", output_index=index, item=item)
        event("response.completed", response=response)
        self.end_sse()


def split(text, pieces=3):
    """`text` in up to `pieces` deltas, as a model streams it."""
    if not text:
        return [text]
    size = max(1, -(-len(text) // pieces))
    return [text[i:i + size] for i in range(0, len(text), size)]


def main():
    global DUMP_DIR
    args = sys.argv[1:]
    if "--dump" in args:
        at = args.index("--dump")
        DUMP_DIR = args[at + 1]
        os.makedirs(DUMP_DIR, exist_ok=True)
        del args[at:at + 2]
    if len(args) != 1:
        print("usage: scripted_upstream.py PORT [--dump DIR]", file=sys.stderr)
        sys.exit(2)
    server = ThreadingHTTPServer(("127.0.0.1", int(args[0])), Handler)
    server.daemon_threads = True
    print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
