#!/usr/bin/env bash
# W7's requests measured as the server's CPU time, for before/after comparisons of the time
# series layout on a shared machine (where wall times mostly measure the other load):
# generates W7's data once (bench/w7cpu_gen.py; INSTRUMENTS x 40 fields x 5 sources x DAYS),
# then for each binary in BINS (default: target/release/abacus), in turn, twice: starts it,
# loads the data with `redis-cli --pipe`, and runs bench/w7cpu_query.py (median server CPU
# ms of ROUNDS calls of the one-day waterfall, the ten-day one, TS.MGET, TS.QUERYINDEX; reply
# md5s, which must agree between binaries). No Redis side: Redis has no time series (the
# RedisTimeSeries module is not installed here) and no waterfall; bench/w7.sh compares with
# PostgreSQL.
#
#   INSTRUMENTS=1000 DAYS=32 ROUNDS=7 BINS="/tmp/abacus.before target/release/abacus" bench/w7cpu.sh
#   ONLY=wf1 INSTRUMENTS=5000 DAYS=16 ABACUS_ARGS="--huge-pages yes" bench/w7cpu.sh   # W7's 1M series
set -euo pipefail
source "$(dirname "$0")/lib.sh"
PY=${PYTHON:-python3}
export INSTRUMENTS=${INSTRUMENTS:-1000} DAYS=${DAYS:-32} ROUNDS=${ROUNDS:-7}
"$PY" "$ROOT/bench/w7cpu_gen.py" "$BENCH_TMP/data.resp"
echo "W7 CPU on $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ), load $(cut -d' ' -f1-3 /proc/loadavg); $INSTRUMENTS instruments x 40 x 5 x $DAYS days"
for pass in 1 2; do
  for bin in ${BINS:-$ABACUS_BIN}; do
    port=$(free_port)
    "$bin" serve --port "$port" --dir "$BENCH_TMP" --appendonly no --save '' ${ABACUS_ARGS:-} >"$BENCH_TMP/abacus.log" 2>&1 &
    pid=$!
    BENCH_PIDS+=($pid)
    wait_ping "$port"
    redis-cli -p "$port" --pipe <"$BENCH_TMP/data.resp" | grep -q "errors: 0" || { echo "load failed" >&2; exit 1; }
    echo "== pass $pass: $bin"
    "$PY" "$ROOT/bench/w7cpu_query.py" "$port" "$pid"
    kill "$pid"; wait "$pid" 2>/dev/null || true
  done
done
