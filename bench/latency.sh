#!/usr/bin/env bash
# W3 with latency tracking and the slow log on (the defaults: `latency-tracking yes`,
# `slowlog-log-slower-than 10000`, plus `latency-monitor-threshold 100`) against both off, in
# user-space instructions per request under callgrind (`bench/instr.sh`), which do not depend
# on what else runs on the machine the way ops/s do. A cell still moves by a few percent
# between runs (how many requests each read brings changes the per-request share of the
# per-read work), so the two configurations alternate for ROUNDS rounds and the table gives
# each cell's mean. Then, unless THROUGHPUT=0, both configurations' ops/s with Redis beside
# them (`bench/w3.sh`), for scale.
#
#   bench/latency.sh                          ROUNDS=3, N=20000 requests per cell
#   ROUNDS=2 THROUGHPUT=0 bench/latency.sh    callgrind only
#   CLIENTS=1 ROUNDS=2 THROUGHPUT=0 bench/latency.sh
#                                             one connection (bench/instr.sh): -P 1 cells
#                                             that do not move between runs
#   FUNC=abacus_engine::exec::run_group CLIENTS=1 ROUNDS=2 THROUGHPUT=0 bench/latency.sh
#                                             also the instructions inside the shard's run
#                                             of a group (where the feature's cost is), which
#                                             a loaded machine does not move
set -euo pipefail
HERE="$(dirname "$0")"
ROUNDS=${ROUNDS:-3}
OFF="--latency-tracking no --slowlog-log-slower-than -1 --latency-monitor-threshold 0"
ON="--latency-tracking yes --slowlog-log-slower-than 10000 --latency-monitor-threshold 100"
rows=""
inside=""
for round in $(seq 1 "$ROUNDS"); do
  for cfg in off on; do
    if [ "$cfg" = off ]; then args=$OFF; else args=$ON; fi
    out=$(ABACUS_ARGS="$args" bash "$HERE/instr.sh")
    echo "round $round, $cfg:"; echo "$out" | grep '^-P'
    rows+=$(echo "$out" | awk -v c="$cfg" '/^-P/ {print c, $2, $3, $4}')$'\n'
    inside+=$(echo "$out" | awk -v c="$cfg" '/^-P/ && NF >= 5 {print c, $2, $3, $5}')$'\n'
  done
done
table() {
printf '%-10s %-6s %12s %12s %8s\n' pipeline test off on on/off
awk '
  NF == 4 { s[$1 " " $2 " " $3] += $4; n[$1 " " $2 " " $3]++; key[$2 " " $3] = 1 }
  END {
    for (k in key) {
      split(k, a, " "); off = s["off " k] / n["off " k]; on = s["on " k] / n["on " k]
      printf "-P %-7s %-6s %12.0f %12.0f %8.3f\n", a[1], a[2], off, on, on / off
    }
  }' | sort
}
printf '\nmeans over %s rounds (off: %s; on: %s)\n' "$ROUNDS" "$OFF" "$ON"
echo "$rows" | table
if [ -n "$(echo "$inside" | tr -d '[:space:]')" ]; then
  printf '\ninstructions per request inside %s, means over %s rounds\n' "${FUNC:-}" "$ROUNDS"
  echo "$inside" | table
fi
if [ "${THROUGHPUT:-1}" = 1 ]; then
  printf '\n== W3 throughput, off\n'; ABACUS_ARGS="$OFF" N=${N_W3:-500000} ROUNDS=3 bash "$HERE/w3.sh"
  printf '\n== W3 throughput, on\n'; ABACUS_ARGS="$ON" N=${N_W3:-500000} ROUNDS=3 bash "$HERE/w3.sh"
fi
