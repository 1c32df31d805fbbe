#!/bin/sh
# Run inside `unshare --net` by crates/cuca-cli/tests/agents.rs: one agent recorded through
# `cuca run` in front of the scripted upstream, then replayed with the upstream stopped, all
# on the namespace's loopback (the only interface it has).
#
# Usage: record_replay.sh OUT SESSION -- CLIENT [ARG…], with CUCA the cuca binary. Writes in
# OUT: sessions/ (the recording), upstream.log (each request's path), record.out/.err/.status
# and replay.out/.err/.status (the client's stdout, cuca's and the client's stderr, the exit
# status of `cuca run`).
set -u
out=$1
session=$2
shift 3
here=$(cd "$(dirname "$0")" && pwd)
ip link set lo up || exit 90
# The upstream prints its address once it listens: read through a fifo, no polling.
mkfifo "$out/upstream.fifo" || exit 91
python3 "$here/scripted_upstream.py" 0 > "$out/upstream.fifo" 2> "$out/upstream.log" &
upstream=$!
read -r line < "$out/upstream.fifo"
url=${line#listening on }
"$CUCA" run --mode record --upstream "$url" --dir "$out/sessions" --session "$session" -- "$@" \
  > "$out/record.out" 2> "$out/record.err" < /dev/null
echo $? > "$out/record.status"
kill "$upstream"
wait "$upstream" 2>/dev/null
"$CUCA" run --mode replay --dir "$out/sessions" --session "$session" -- "$@" \
  > "$out/replay.out" 2> "$out/replay.err" < /dev/null
echo $? > "$out/replay.status"
