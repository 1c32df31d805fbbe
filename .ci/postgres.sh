#!/usr/bin/env bash
# A throwaway PostgreSQL server for cuca-store-postgres's tests, from the machine's binaries.
#
#   bash .ci/postgres.sh start [ENV_FILE]   initialise (once), start, wait until ready, create
#                                           the database, print CUCA_PG_URL and, given a file,
#                                           write `export CUCA_PG_URL=…` into it for the caller
#                                           to source
#   bash .ci/postgres.sh stop               fast shutdown; the data directory is kept
#   bash .ci/postgres.sh clean              stop, then delete the data directory
#   bash .ci/postgres.sh url                print the URL of the server this script manages
#
# Knobs (environment): CUCA_PG_DIR (default /tmp/cuca-pg), CUCA_PG_PORT (default 54329),
# CUCA_PG_DB (default cuca), CUCA_PG_USER (the OS user when run as root, default cuca-pg).
#
# The server listens on 127.0.0.1 only, with trust auth: it is for tests on this machine and
# must never be reachable from elsewhere. PostgreSQL refuses to run as root, so as root the
# script creates (once) a system user and runs every server command as that user.
set -euo pipefail

dir=${CUCA_PG_DIR:-/tmp/cuca-pg}
port=${CUCA_PG_PORT:-54329}
db=${CUCA_PG_DB:-cuca}
os_user=${CUCA_PG_USER:-cuca-pg}
data="$dir/data"
log="$dir/server.log"
url="postgres://postgres@127.0.0.1:$port/$db"

die() { echo "postgres.sh: $*" >&2; exit 1; }

# The binaries: /usr/local/bin first (that is where this machine links them), then the
# newest Debian/Ubuntu layout, then whatever pg_config names.
find_bindir() {
  if [ -x /usr/local/bin/initdb ] && [ -x /usr/local/bin/pg_ctl ]; then
    echo /usr/local/bin; return
  fi
  local candidate
  for candidate in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$candidate/initdb" ] && [ -x "$candidate/pg_ctl" ]; then echo "$candidate"; return; fi
  done
  if command -v pg_config >/dev/null 2>&1; then
    candidate=$(pg_config --bindir)
    if [ -x "$candidate/initdb" ]; then echo "$candidate"; return; fi
  fi
  die "no PostgreSQL server binaries found (looked in /usr/local/bin, /usr/lib/postgresql/*/bin, pg_config --bindir); install the postgresql package"
}

# A machine without the server binaries gets Debian's package (CI runs as root; the machine
# image normally has PostgreSQL 15 already, so this is the fallback, not the path).
if ! (find_bindir >/dev/null 2>&1) && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "postgres.sh: no server binaries; installing Debian's postgresql package" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null \
    || die "apt-get install postgresql failed"
fi
bindir=$(find_bindir)
# pg_isready and psql may live beside the server binaries or only on PATH.
tool() {
  if [ -x "$bindir/$1" ]; then echo "$bindir/$1"
  elif [ -x "$(dirname "$(readlink -f "$bindir/initdb")")/$1" ]; then echo "$(dirname "$(readlink -f "$bindir/initdb")")/$1"
  elif command -v "$1" >/dev/null 2>&1; then command -v "$1"
  else die "$1 not found beside $bindir/initdb or on PATH"; fi
}

# Runs a command as the server's OS user (ourselves unless we are root).
as_pg() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u "$os_user" -- "$@"; else "$@"; fi
}

ensure_user() {
  [ "$(id -u)" -eq 0 ] || return 0
  if ! id -u "$os_user" >/dev/null 2>&1; then
    useradd --system --no-create-home --shell /usr/sbin/nologin "$os_user" \
      || die "could not create the system user $os_user"
  fi
}

running() { [ -f "$data/PG_VERSION" ] && as_pg "$bindir/pg_ctl" -D "$data" status >/dev/null 2>&1; }

start() {
  local env_file=${1:-}
  ensure_user
  mkdir -p "$dir"
  if [ "$(id -u)" -eq 0 ]; then chown "$os_user" "$dir"; fi
  chmod 700 "$dir"
  if [ ! -f "$data/PG_VERSION" ]; then
    echo "postgres.sh: initialising $data with $bindir/initdb"
    as_pg "$bindir/initdb" -D "$data" -U postgres --auth=trust --encoding=UTF8 --locale=C \
      --no-sync >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
  fi
  if running; then
    echo "postgres.sh: already running from $data"
  else
    echo "postgres.sh: starting on 127.0.0.1:$port (log $log)"
    # -k puts the Unix socket in our own directory, so /var/run/postgresql need not exist.
    as_pg "$bindir/pg_ctl" -D "$data" -l "$log" -w -t 60 \
      -o "-p $port -k $dir -c listen_addresses=127.0.0.1" start \
      || { tail -n 30 "$log" >&2 || true; die "pg_ctl start failed (is port $port taken?)"; }
  fi
  local isready psql tries=0
  isready=$(tool pg_isready)
  psql=$(tool psql)
  until "$isready" -q -h 127.0.0.1 -p "$port" -U postgres; do
    tries=$((tries + 1))
    [ "$tries" -lt 60 ] || { tail -n 30 "$log" >&2 || true; die "server on port $port not ready after 30 s"; }
    sleep 0.5
  done
  if [ "$("$psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'")" != 1 ]; then
    "$psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -qc "CREATE DATABASE \"$db\"" \
      || die "could not create database $db"
  fi
  # Prove the URL works before handing it out.
  [ "$("$psql" "$url" -tAc 'SELECT 1')" = 1 ] || die "cannot query $url"
  if [ -n "$env_file" ]; then
    printf 'export CUCA_PG_URL=%q\n' "$url" >"$env_file"
  fi
  echo "export CUCA_PG_URL=$url"
}

stop() {
  if running; then
    as_pg "$bindir/pg_ctl" -D "$data" -m fast -w -t 60 stop || die "pg_ctl stop failed"
  else
    echo "postgres.sh: not running"
  fi
}

case "${1:-}" in
  start) start "${2:-}" ;;
  stop) stop ;;
  clean) stop; rm -rf "$dir" ;;
  url) echo "$url" ;;
  *) die "usage: $0 start [ENV_FILE] | stop | clean | url" ;;
esac
