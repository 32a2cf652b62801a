#!/usr/bin/env bash
# W7 waterfall: INSTRUMENTS x FIELDS x 5 sources of daily random-walk values over DAYS days
# (each source covering a different 50-95% of the days), loaded into Abacus (the commands
# written as RESP and sent through `redis-cli --pipe`) and into a throwaway PostgreSQL (COPY
# into (instrument, field, source, day, value), index on (instrument, field, day, source));
# then the same ~200,000-point waterfall request (N instruments x FIELDS fields x 1 day, then
# N/10 instruments x 10 days) timed as one TS.WATERFALL call (to the reply's last byte on a raw
# socket) against PostgreSQL's DISTINCT ON query (psql's \timing), answers compared. Prints
# a Markdown table and INFO timeseries (bytes per sample), including a regular 1-second
# counter series. (Redis has no waterfall; its module has no such command, so the
# comparison point is PostgreSQL, as the issue asks.)
#
#   INSTRUMENTS=1000 DAYS=100 ROUNDS=5 bench/w7.sh
#   INSTRUMENTS=5000 DAYS=16 bench/w7.sh        # the issue's 200,000-point request, 1M series
#   INSTRUMENTS=10000 DAYS=730 bench/w7.sh      # the issue's full scale (~1 billion samples:
#                                               # more memory and disk than a 24 GiB machine)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

AB_PORT=$(free_port)
PG_PORT=$(free_port)
PG_DIR="$BENCH_TMP/pg"
chmod 755 "$BENCH_TMP"
mkdir -p "$PG_DIR"; touch "$PG_DIR.log"; chown postgres "$PG_DIR.log" 2>/dev/null || true
chown postgres "$PG_DIR" 2>/dev/null || true
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }
PG_USER=$(if [ "$(id -u)" = 0 ]; then echo postgres; else id -un; fi)
as_pg initdb -D "$PG_DIR" -A trust -U "$PG_USER" >/dev/null
as_pg pg_ctl -D "$PG_DIR" -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -c shared_buffers=1GB -c work_mem=256MB -c max_parallel_workers_per_gather=2" -l "$PG_DIR.log" start >/dev/null
stop_pg() { as_pg pg_ctl -D "$PG_DIR" stop -m fast >/dev/null 2>&1 || true; }
trap 'stop_pg; bench_cleanup' EXIT

"$ABACUS_BIN" serve --port "$AB_PORT" --dir "$BENCH_TMP" --appendonly no --save '' ${ABACUS_ARGS:-} >"$BENCH_TMP/abacus.log" 2>&1 &
AB_PID=$!
BENCH_PIDS+=($AB_PID)
wait_ping "$AB_PORT"

echo "W7 on $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), binary $ABACUS_BIN (checkout at $(git -C "$ROOT" rev-parse --short HEAD))"
PY=${PYTHON:-python3}
AB_PID=$AB_PID "$PY" "$ROOT/bench/w7.py" "$AB_PORT" "$PG_PORT" "$PG_USER"
