#!/usr/bin/env bash
# User-space instructions per request of the Abacus server under callgrind, for the W3
# commands. Unlike ops/s, the count does not depend on what else runs on the machine, so it
# shows a per-request saving (or a regression) that throughput noise on a shared 2-core
# machine hides. It leaves out the kernel (about half the CPU of a request) and cache misses.
#
#   bench/instr.sh                              SET and GET at -P 1 and -P 16, default config
#   ABACUS_ARGS="--threads 1" bench/instr.sh
#   CLIENTS=1 bench/instr.sh                   one connection: stable per-request counts
#   ABACUS_BIN=/path/to/other/abacus bench/instr.sh    compare two builds
#   FUNC=abacus_engine::exec::run_group CLIENTS=1 bench/instr.sh
#                                               also the instructions per request inside one
#                                               function (inclusive): the shard's work alone,
#                                               without the event loop's, which on a loaded
#                                               machine moves by a few percent between runs
#   TESTS="lpush rpush lpop rpop lrange_100 zadd zpopmin" REDIS=1 bench/instr.sh
#                                               other redis-benchmark tests, and redis-server
#                                               (no persistence) under callgrind beside Abacus
#
# Each cell: start Abacus under `valgrind --tool=callgrind` with instrumentation off, load
# 20,000 random keys, switch instrumentation on for N requests of
# `redis-benchmark -t TEST -r 100000 -c 50 -P P`, and divide the instructions counted by N.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
N=${N:-20000}
ABACUS_ARGS=${ABACUS_ARGS:-}
command -v valgrind >/dev/null || { echo "valgrind is required" >&2; exit 1; }
[ -x "$ABACUS_BIN" ] || (cd "$ROOT" && cargo build --release -q -p abacus)

TESTS=${TESTS:-SET GET}
# Connections of the measured run (W3's 50). CLIENTS=1: each read brings exactly the
# requests of one pipeline, so the per-read work's share per request does not move between
# runs (at -P 1 with 50 clients it does, by tens of percent under callgrind).
CLIENTS=${CLIENTS:-50}
REDIS=${REDIS:-}
FUNC=${FUNC:-}

# instr TEST P [redis]: prints instructions per request.
instr() {
  local test=$1 p=$2 server=${3:-abacus} port dir pid total
  port=$(free_port); dir="$BENCH_TMP/cg-$port"; mkdir -p "$dir"
  if [ "$server" = redis ]; then
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$dir/cg.out" \
      "$REDIS_SERVER" --port "$port" --dir "$dir" --save "" --appendonly no >"$dir/log" 2>&1 &
  else
    # shellcheck disable=SC2086
    valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$dir/cg.out" \
      "$ABACUS_BIN" serve --port "$port" --dir "$dir" $ABACUS_ARGS >"$dir/log" 2>&1 &
  fi
  pid=$!
  wait_ping "$port"
  redis-benchmark -p "$port" -t set -r 100000 -n 20000 -c 50 -P "$p" -q >/dev/null 2>&1
  # Warm-up of the test itself (fills the list LRANGE reads, grows the key it pushes to).
  redis-benchmark -p "$port" -t "$test" -r 100000 -n 5000 -c 50 -P "$p" -q >/dev/null 2>&1
  callgrind_control -i on "$pid" >/dev/null 2>&1
  redis-benchmark -p "$port" -t "$test" -r 100000 -n "$N" -c "$CLIENTS" -P "$p" -q >/dev/null 2>&1
  callgrind_control -i off "$pid" >/dev/null 2>&1
  callgrind_control -d "$pid" >/dev/null 2>&1
  kill "$pid"; wait "$pid" 2>/dev/null || true
  total=$(cat "$dir"/cg.out* | awk '/^totals:/ {s += $2} END {print s + 0}')
  if [ -n "$FUNC" ] && [ "$server" = abacus ]; then
    local inside=0 f n
    for f in "$dir"/cg.out*; do
      n=$(callgrind_annotate --inclusive=yes "$f" 2>/dev/null | awk -v fn=":$FUNC [" 'index($0, fn) { gsub(",", "", $1); s += $1 } END { print s + 0 }')
      inside=$((inside + n))
    done
    echo "$((total / N)) $((inside / N))"
  else
    echo $((total / N))
  fi
}

printf '\nUser-space instructions per request (callgrind), %s; N=%s, abacus args: %s\n' \
  "$(date -u +%F)" "$N" "${ABACUS_ARGS:-default}"
if [ -n "$REDIS" ]; then
  printf '%-10s %-11s %12s %12s %8s\n' pipeline test abacus redis ratio
elif [ -n "$FUNC" ]; then
  printf '%-10s %-11s %12s %12s\n' pipeline test instr/req "in $FUNC"
else
  printf '%-10s %-11s %12s\n' pipeline test instr/req
fi
for P in 1 16; do
  for t in $TESTS; do
    a=$(instr "${t,,}" "$P")
    if [ -n "$FUNC" ] && [ -z "$REDIS" ]; then
      # shellcheck disable=SC2086
      printf '%-10s %-11s %12s %12s\n' "-P $P" "$t" $a
      continue
    fi
    if [ -n "$REDIS" ]; then
      r=$(instr "${t,,}" "$P" redis)
      printf '%-10s %-11s %12s %12s %8s\n' "-P $P" "$t" "$a" "$r" "$(awk -v a="$a" -v r="$r" 'BEGIN { printf "%.2f", a / r }')"
    else
      printf '%-10s %-11s %12s\n' "-P $P" "$t" "$a"
    fi
  done
done
