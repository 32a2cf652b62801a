#!/usr/bin/env bash
# Start a throwaway PostgreSQL cluster with the `hll` extension for the
# differential test (crates/hll/tests/postgres_diff.rs).
#
# Usage: pg-start.sh [PORT]
#   stdout: the connection URL only (postgresql://postgres@127.0.0.1:PORT/postgres)
#   stderr: progress and the data directory, to be passed to pg-stop.sh DIR
# Example:
#   url=$(crates/hll/scripts/pg-start.sh 54329)
#   ABACUS_PG_URL=$url cargo test -p abacus-hll --test postgres_diff
#   crates/hll/scripts/pg-stop.sh /tmp/abacus-pg.54329
#
# Needs postgresql-15 and postgresql-15-hll (Debian: apt-get install
# postgresql-15-hll). initdb refuses to run as root, so when run as root the
# cluster belongs to the `postgres` user (created if missing).
set -euo pipefail

PGBIN=${PGBIN:-}
if [ -z "$PGBIN" ]; then
    for d in /usr/lib/postgresql/15/bin $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$d/initdb" ]; then PGBIN=$d; break; fi
    done
fi
[ -n "$PGBIN" ] && [ -x "$PGBIN/initdb" ] || { echo "pg-start: initdb not found (set PGBIN)" >&2; exit 1; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
PORT=${1:-}
if [ -z "$PORT" ]; then
    for p in $(seq 54329 54399); do
        if port_free "$p" && [ ! -e "/tmp/abacus-pg.$p" ]; then PORT=$p; break; fi
    done
fi
[ -n "$PORT" ] || { echo "pg-start: no free port found" >&2; exit 1; }
port_free "$PORT" || { echo "pg-start: port $PORT is in use" >&2; exit 1; }

DIR=/tmp/abacus-pg.$PORT
[ -e "$DIR" ] && { echo "pg-start: $DIR exists (stop it with pg-stop.sh $DIR)" >&2; exit 1; }
mkdir -p "$DIR"

# Run a command as the cluster owner: ourselves, or `postgres` when root.
if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home-dir "$DIR" --shell /bin/sh postgres
    chown postgres: "$DIR"
    as_owner() { runuser -u postgres -- "$@"; }
else
    as_owner() { "$@"; }
fi

echo "pg-start: initdb into $DIR/data" >&2
as_owner "$PGBIN/initdb" -D "$DIR/data" -U postgres -A trust --no-sync >"$DIR/initdb.log" 2>&1 \
    || { cat "$DIR/initdb.log" >&2; exit 1; }
as_owner "$PGBIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w \
    -o "-c listen_addresses=127.0.0.1 -p $PORT -k $DIR -c fsync=off" start >&2 \
    || { cat "$DIR/server.log" >&2; exit 1; }

URL="postgresql://postgres@127.0.0.1:$PORT/postgres"
"$PGBIN/psql" -X -q -v ON_ERROR_STOP=1 "$URL" -c 'CREATE EXTENSION IF NOT EXISTS hll' >&2
echo "$URL" >"$DIR/url"
echo "pg-start: running; stop with: $(dirname "$0")/pg-stop.sh $DIR" >&2
echo "$URL"
