#!/bin/sh
# Run inside `unshare --net` by crates/cuca-cli/tests/agents.rs: one agent recorded through
# `cuca run` in front of the scripted upstream, then replayed with the upstream stopped, all
# on the namespace's loopback (the only interface it has).
#
# Usage: record_replay.sh OUT SESSION -- CLIENT [ARG…], with CUCA the cuca binary; with
# LLAMA_SERVER and LLAMA_MODEL set, the upstream is a real llama-server instead. Writes in
# OUT: sessions/ (the recording), upstream.log (each request's path), record.out/.err/.status
# and replay.out/.err/.status (the client's stdout, cuca's and the client's stderr, the exit
# status of `cuca run`). With DIVERGE_FROM and DIVERGE_TO set, a third run replays the client
# with the argument DIVERGE_FROM replaced by DIVERGE_TO, a run the recording does not hold:
# diverge.out/.err/.status as above. replay.ms and diverge.ms: how long each replay took.
# With SWAP_MODEL set (the scripted upstream only), the upstream writes each request body into
# OUT/bodies, and after the record a run in fork mode sends the calls from the second on to
# SWAP_MODEL: swap.out/.err/.status, and swap.before (the bodies sent before it); then the
# same again (swap2.out/.err/.status), swap.again holding the bodies sent before and after.
# With FORK_STATUS set (the scripted upstream only), the bodies are written too, and after the
# record a run in fork mode with CUCA_TEST_STATUS=FORK_STATUS (the edit script's first tool
# result changes): fork.out/.err/.status, fork.before (the bodies sent before it), and
# record.work and fork.work (each file of the working directory with its SHA-256, after the
# record and after the fork). With REPLAY_IN_PLACE set, the replay is `--in-place`.
set -u
out=$1
session=$2
shift 3
here=$(cd "$(dirname "$0")" && pwd)
ip link set lo up || exit 90
if [ -n "${LLAMA_SERVER:-}" ]; then
  # A real llama-server (LLAMA_SERVER, the binary; LLAMA_MODEL, its GGUF) on the namespace's
  # own loopback, so a fixed port is free; a context large enough for a coding agent's prompt;
  # a cap on the answer (Codex asks for none); with LLAMA_EOS_BIAS, the end-of-text token (2)
  # favoured by that much so a random-weight model ends its answer after a few tokens with
  # `end_turn`, not at the cap (Claude Code calls an answer cut at its ceiling an API error).
  "$LLAMA_SERVER" -m "$LLAMA_MODEL" --alias cuca-tiny-random --host 127.0.0.1 --port 18080 \
    -c "${LLAMA_CTX:-65536}" --override-kv "llama.context_length=int:${LLAMA_CTX:-65536}" \
    -n "${LLAMA_N_PREDICT:-64}" ${LLAMA_EOS_BIAS:+--logit-bias "2+$LLAMA_EOS_BIAS"} \
    -np 1 --jinja > "$out/upstream.log" 2>&1 &
  upstream=$!
  url=http://127.0.0.1:18080
  tries=0
  until curl -sf "$url/health" > /dev/null; do
    tries=$((tries + 1))
    [ "$tries" -gt 600 ] && { echo "llama-server did not become healthy" >&2; exit 92; }
    kill -0 "$upstream" 2>/dev/null || { echo "llama-server exited" >&2; exit 93; }
    sleep 0.1
  done
else
  # The upstream prints its address once it listens: read through a fifo, no polling.
  mkfifo "$out/upstream.fifo" || exit 91
  dump=${SWAP_MODEL:-${FORK_STATUS:-}}
  python3 "$here/scripted_upstream.py" 0 ${dump:+--dump "$out/bodies"} \
    > "$out/upstream.fifo" 2> "$out/upstream.log" &
  upstream=$!
  read -r line < "$out/upstream.fifo"
  url=${line#listening on }
fi
"$CUCA" run --mode record --upstream "$url" --dir "$out/sessions" --session "$session" -- "$@" \
  > "$out/record.out" 2> "$out/record.err" < /dev/null
echo $? > "$out/record.status"
if [ -n "${SWAP_MODEL:-}" ]; then
  # The same run in fork mode onto SWAP_MODEL from its second call: swap.before holds how
  # many bodies the upstream had been sent until then.
  ls "$out/bodies" | wc -l > "$out/swap.before"
  "$CUCA" run --mode fork --from 2 --model "$SWAP_MODEL" --upstream "$url" \
    --dir "$out/sessions" --session "$session" -- "$@" \
    > "$out/swap.out" 2> "$out/swap.err" < /dev/null
  echo $? > "$out/swap.status"
  # Once more, from a new process: swap.again holds the bodies sent before and after it.
  ls "$out/bodies" | wc -l > "$out/swap.again"
  "$CUCA" run --mode fork --from 2 --model "$SWAP_MODEL" --upstream "$url" \
    --dir "$out/sessions" --session "$session" -- "$@" \
    > "$out/swap2.out" 2> "$out/swap2.err" < /dev/null
  echo $? > "$out/swap2.status"
  ls "$out/bodies" | wc -l >> "$out/swap.again"
fi
if [ -n "${FORK_STATUS:-}" ]; then
  find . -type f -exec sha256sum {} + | sort > "$out/record.work"
  ls "$out/bodies" | wc -l > "$out/fork.before"
  CUCA_TEST_STATUS=$FORK_STATUS "$CUCA" run --mode fork --upstream "$url" \
    --dir "$out/sessions" --session "$session" -- "$@" \
    > "$out/fork.out" 2> "$out/fork.err" < /dev/null
  echo $? > "$out/fork.status"
  find . -type f -exec sha256sum {} + | sort > "$out/fork.work"
fi
kill "$upstream"
wait "$upstream" 2>/dev/null
started=$(date +%s%N)
"$CUCA" run --mode replay ${REPLAY_IN_PLACE:+--in-place} --dir "$out/sessions" \
  --session "$session" -- "$@" > "$out/replay.out" 2> "$out/replay.err" < /dev/null
echo $? > "$out/replay.status"
echo $(( ($(date +%s%N) - started) / 1000000 )) > "$out/replay.ms"
if [ -n "${DIVERGE_FROM:-}" ]; then
  for arg do
    shift
    if [ "$arg" = "$DIVERGE_FROM" ]; then set -- "$@" "$DIVERGE_TO"; else set -- "$@" "$arg"; fi
  done
  started=$(date +%s%N)
  "$CUCA" run --mode replay --dir "$out/sessions" --session "$session" -- "$@" \
    > "$out/diverge.out" 2> "$out/diverge.err" < /dev/null
  echo $? > "$out/diverge.status"
  echo $(( ($(date +%s%N) - started) / 1000000 )) > "$out/diverge.ms"
fi
