#!/usr/bin/env bash
# Memory accounting (issue 3): does INFO's used_memory follow the process's RSS growth?
# For each load, a fresh `abacus serve` (no persistence) is measured before the load and
# SETTLE seconds after it (jemalloc's background threads return freed pages within its
# 10-second dirty decay), and the two deltas are compared. Target: within a few percent.
#
#   bench/accounting.sh              the three loads below
#   SETTLE=1 bench/accounting.sh     right after the load (freed pages not yet returned)
#
# No assertion: the figures are read and recorded in docs/PERFORMANCE.md.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
SETTLE=${SETTLE:-12}

# memory PORT -> "used_memory used_memory_rss"
memory() {
  redis-cli -p "$1" info memory | tr -d '\r' | awk -F: '/^used_memory:/ {u=$2} /^used_memory_rss:/ {r=$2} END {print u, r}'
}

# measure NAME COMMAND... (COMMAND runs with $PORT set to a fresh server's port)
measure() {
  local name=$1; shift
  PORT=$(free_port)
  start_abacus "$PORT" --appendonly no --save ""
  local pid=${BENCH_PIDS[-1]}
  read -r u0 r0 <<<"$(memory "$PORT")"
  "$@" >/dev/null
  sleep "$SETTLE"
  read -r u1 r1 <<<"$(memory "$PORT")"
  python3 - "$name" "$u0" "$r0" "$u1" "$r1" <<'EOF'
import sys
name, (u0, r0, u1, r1) = sys.argv[1], map(int, sys.argv[2:])
du, dr = u1 - u0, r1 - r0
print(f"{name:<46} used_memory +{du/1e6:7.1f} MB  RSS +{dr/1e6:7.1f} MB  used/RSS {du/dr:.3f}")
EOF
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

populate() { redis-cli -p "$PORT" debug populate "$@"; }
appends() { redis-benchmark -p "$PORT" -q -P 100 -n 3000000 -r 1000000 append key:__rand_int__ 0123456789abcdef; }

measure "DEBUG POPULATE 1000000 (values value:N)" populate 1000000
measure "DEBUG POPULATE 1000000 k 100 (100-B values)" populate 1000000 k 100
measure "3M APPENDs of 16 B onto 1M random keys" appends
