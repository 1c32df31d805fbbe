#!/usr/bin/env python3
"""Replaying an agent loop: `cuca proxy --mode replay` against VCR.py's playback, per request.

An agent loop of N turns (each request carries the whole conversation so far: a system prompt,
then every question and answer before it, then the next question) is recorded twice against
one loopback upstream: through `cuca proxy` (record mode, into a fresh store) and into a
VCR.py cassette. Then the same loop is played back, in interleaved rounds, through
`cuca proxy --mode replay` and through VCR.py with its default matchers (method, scheme,
host, port, path, query: no body is compared; cuca compares every message and parameter).
Both are driven by the same client, `httpx.Client` (what the OpenAI and Anthropic Python SDKs
send with), so what differs is only what answers: cuca over a loopback socket, VCR.py inside
the process.

Printed, per loop size: the median time per request of the whole loop for each, the last
turn's, and VCR time / cuca time (above 1: cuca is faster). The cassette's load, done once
per playback before the first request, is shown apart. So is the floor any server shares:
the same client's round trip to a route the proxy answers at once, without a session (a GET
it answers 404), in the same rounds.

    python replay_vs_vcr.py --cuca target/release/cuca [--turns 10,100,1000] [--rounds 3]

Needs `vcrpy` (9.4.2 measured) and `httpx` in the Python that runs it; `docs/performance.md`
says what it showed.
"""

import argparse
import http.server
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import httpx
import vcr

SYSTEM = "You are terse."


def question(k):
    return f"The vault is in city {k}. Reply with: noted"


def answer(k):
    return f"noted {k}"


def loop_request(k):
    """Turn k's body: the system prompt, the k exchanges before it, and question k."""
    messages = [{"role": "system", "content": SYSTEM}]
    for i in range(k):
        messages.append({"role": "user", "content": question(i)})
        messages.append({"role": "assistant", "content": answer(i)})
    messages.append({"role": "user", "content": question(k)})
    return json.dumps({"model": "tiny", "max_tokens": 16, "messages": messages})


class Upstream(http.server.BaseHTTPRequestHandler):
    """Answers each chat completion as the loop was recorded: `noted k` for question k."""

    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        k = sum(1 for m in body["messages"] if m["role"] == "user") - 1
        answer_body = json.dumps(
            {
                "id": f"chatcmpl-{k}",
                "object": "chat.completion",
                "created": 1795972076,
                "model": "tiny",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": answer(k)},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10 + 2 * k, "completion_tokens": 2, "total_tokens": 12 + 2 * k},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer_body)))
        self.end_headers()
        self.wfile.write(answer_body)

    def log_message(self, *args):
        pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_proxy(cuca, store, mode, upstream=None):
    port = free_port()
    args = [cuca, "proxy", "--store", store, "--mode", mode, "--listen", f"127.0.0.1:{port}"]
    if upstream:
        args += ["--upstream", upstream]
    proxy = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 30
    while time.time() < deadline:
        if proxy.poll() is not None:
            sys.exit(f"cuca proxy exited: {proxy.stderr.read().decode()}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1)
            break
        except urllib.error.HTTPError:
            break
        except OSError:
            time.sleep(0.05)
    else:
        sys.exit("cuca proxy did not start listening within 30 s")
    return proxy, f"http://127.0.0.1:{port}"


def stop(proxy):
    proxy.send_signal(signal.SIGINT)
    try:
        proxy.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proxy.kill()
        sys.exit("cuca proxy did not stop within 30 s of SIGINT")


def run_loop(client, url, requests):
    """Sends the loop in order; each request's seconds. Every answer must be the recorded one."""
    times = []
    for k, body in enumerate(requests):
        started = time.perf_counter()
        response = client.post(url, content=body, headers={"content-type": "application/json"})
        data = response.content
        times.append(time.perf_counter() - started)
        if response.status_code != 200:
            sys.exit(f"turn {k} of {url}: HTTP {response.status_code}: {data[:300]!r}")
        got = json.loads(data)["choices"][0]["message"]["content"]
        if got != answer(k):
            sys.exit(f"turn {k} of {url}: answered {got!r}, recorded {answer(k)!r}")
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuca", required=True, help="the cuca binary (a release build)")
    parser.add_argument("--turns", default="10,100,1000")
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    cuca = os.path.abspath(options.cuca)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Upstream)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    upstream = f"http://127.0.0.1:{server.server_address[1]}"
    work = tempfile.mkdtemp(prefix="cuca-vcr-")
    store = os.path.join(work, "store")
    client = httpx.Client(timeout=60)
    sizes = [int(n) for n in options.turns.split(",")]

    # Record each loop once through cuca, once into a cassette.
    recorder, recording = start_proxy(cuca, store, "record", upstream)
    loops = {}
    for n in sizes:
        requests = [loop_request(k) for k in range(n)]
        loops[n] = requests
        run_loop(client, f"{recording}/s/loop{n}/v1/chat/completions", requests)
        with vcr.use_cassette(os.path.join(work, f"loop{n}.yaml"), record_mode="all"):
            run_loop(client, f"{upstream}/v1/chat/completions", requests)
    stop(recorder)

    replayer, replaying = start_proxy(cuca, store, "replay")
    print(f"{'turns':>6} | {'cuca / request':>15} | {'VCR.py / request':>16} | {'VCR / cuca':>10} | {'last turn: cuca':>15} | {'VCR.py':>9} | {'cassette load':>13} | {'floor':>8} | load avg")
    for n in sizes:
        requests = loops[n]
        cuca_times, vcr_times, cuca_last, vcr_last, loads, floors = [], [], [], [], [], []
        for round_ in range(options.rounds + 1):
            floor = []
            for _ in range(min(n, 100)):
                started = time.perf_counter()
                client.get(f"{replaying}/floor").read()
                floor.append(time.perf_counter() - started)
            floors.append(statistics.median(floor))
            # Round 0 warms both (the proxy's index of the session, Python's imports).
            url = f"{replaying}/s/loop{n}/v1/chat/completions"
            times = run_loop(client, url, requests)
            if round_:
                cuca_times.append(statistics.median(times))
                cuca_last.append(times[-1])
            started = time.perf_counter()
            with vcr.use_cassette(os.path.join(work, f"loop{n}.yaml"), record_mode="none") as cassette:
                loaded = time.perf_counter() - started
                times = run_loop(client, f"{upstream}/v1/chat/completions", requests)
                if not cassette.all_played:
                    sys.exit(f"VCR.py did not play every interaction of loop{n}")
            if round_:
                vcr_times.append(statistics.median(times))
                vcr_last.append(times[-1])
                loads.append(loaded)
        c, v = statistics.median(cuca_times), statistics.median(vcr_times)
        print(
            f"{n:>6} | {c * 1e6:>12.0f} µs | {v * 1e6:>13.0f} µs | {v / c:>9.2f}× | "
            f"{statistics.median(cuca_last) * 1e6:>12.0f} µs | {statistics.median(vcr_last) * 1e3:>6.1f} ms | "
            f"{statistics.median(loads) * 1e3:>10.0f} ms | {statistics.median(floors) * 1e6:>5.0f} µs | "
            f"{os.getloadavg()[0]:.1f}"
        )
    stop(replayer)


if __name__ == "__main__":
    main()
