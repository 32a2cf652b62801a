#!/usr/bin/env bash
# W3 with latency tracking and the slow log on (the defaults: `latency-tracking yes`,
# `slowlog-log-slower-than 10000`, plus `latency-monitor-threshold 100`) against both off, in
# user-space instructions per request under callgrind (`bench/instr.sh`): stable on a shared
# machine, where ops/s moves by more than the 2% this comparison is about. Then the same two
# configurations' ops/s with redis-benchmark beside Redis (`bench/w3.sh`), for scale.
#
#   bench/latency.sh              N=20000 requests per cell under callgrind
#   THROUGHPUT=0 bench/latency.sh callgrind only
set -euo pipefail
HERE="$(dirname "$0")"
OFF="--latency-tracking no --slowlog-log-slower-than -1 --latency-monitor-threshold 0"
ON="--latency-tracking yes --slowlog-log-slower-than 10000 --latency-monitor-threshold 100"
printf '== off: %s\n' "$OFF"
off=$(ABACUS_ARGS="$OFF" bash "$HERE/instr.sh" | tee /dev/stderr)
printf '== on: %s\n' "$ON"
on=$(ABACUS_ARGS="$ON" bash "$HERE/instr.sh" | tee /dev/stderr)
printf '\n%-10s %-6s %12s %12s %8s\n' pipeline test off on on/off
paste <(echo "$off" | awk '/^-P/ {print $1, $2, $3, $4}') <(echo "$on" | awk '/^-P/ {print $4}') |
  while read -r _ p t a b; do
    printf '%-10s %-6s %12s %12s %8s\n' "-P $p" "$t" "$a" "$b" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b / a }')"
  done
if [ "${THROUGHPUT:-1}" = 1 ]; then
  printf '\n== W3 throughput, off\n'; ABACUS_ARGS="$OFF" N=${N_W3:-500000} ROUNDS=${ROUNDS:-3} bash "$HERE/w3.sh"
  printf '\n== W3 throughput, on\n'; ABACUS_ARGS="$ON" N=${N_W3:-500000} ROUNDS=${ROUNDS:-3} bash "$HERE/w3.sh"
fi
