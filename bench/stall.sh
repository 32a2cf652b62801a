#!/usr/bin/env bash
# Growth stalls seen by a client: while redis-benchmark grows the keyspace with N random SETs
# (default 20 million, -r 100000000, pipelined), a second client sends a PING every
# millisecond and records its round trip (bench/pinger.py). Reports, for Redis and Abacus run
# one after the other on this machine, the PING round-trip max, p99.9, p99 and median, the
# SET throughput and the final key count. Target (issue 3): Abacus max < 50 ms.
#
#   bench/stall.sh                      N=20000000, P=16, C=50
#   N=5000000 bench/stall.sh            quicker
#   ABACUS_ARGS="--threads 1" bench/stall.sh
#
# No assertion: on a shared 2-core machine the figures are noisy, so read them side by side.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
N=${N:-20000000}
P=${P:-16}
C=${C:-50}

start_pair

# The pinger runs at real-time priority when allowed (PINGER_RT=0 disables), so that on a
# busy machine its own descheduling (the late_ms column) does not pass for server stalls.
RT=""
if [ "${PINGER_RT:-1}" = 1 ] && chrt -f 10 true 2>/dev/null; then RT="chrt -f 10"; fi

pct() { # pct FILE FRACTION: the FRACTION quantile of the numbers in FILE (skips comments)
  grep -v '^#' "$1" | sort -n | awk -v q="$2" '{a[NR]=$1} END {i=int(NR*q); if (i<1) i=1; if (i>NR) i=NR; print a[i]}'
}

run() { # run NAME PORT
  local name=$1 port=$2 out="$BENCH_TMP/$1.rtt"
  $RT python3 "$ROOT/bench/pinger.py" "$port" "$out" &
  local pinger=$!
  sleep 0.5
  local t0 t1 rps
  t0=$(date +%s.%N)
  rps=$(redis-benchmark -p "$port" -t set -r 100000000 -n "$N" -P "$P" -c "$C" -q --csv \
        | awk -F, '/SET/ {gsub(/"/, "", $2); print $2}')
  t1=$(date +%s.%N)
  sleep 0.5
  kill -TERM "$pinger"; wait "$pinger" || true
  local keys mem
  keys=$(redis-cli -p "$port" dbsize)
  mem=$(redis-cli -p "$port" info memory | awk -F: '/^used_memory:/ {gsub(/\r/, "", $2); print $2}')
  printf '%-7s %10s %8.0f %8.1f %9d %7d %9.2f %9.2f %9.2f %9.2f %9.2f\n' "$name" "$keys" "$((mem / 1048576))" \
    "$(echo "$t1 - $t0" | bc -l)" "${rps%.*}" "$(grep -vc '^#' "$out")" \
    "$(echo "$(pct "$out" 0.5) / 1000" | bc -l)" "$(echo "$(pct "$out" 0.99) / 1000" | bc -l)" \
    "$(echo "$(pct "$out" 0.999) / 1000" | bc -l)" "$(echo "$(pct "$out" 1.0) / 1000" | bc -l)" \
    "$(echo "$(awk '/late_us_max/ {print $3}' "$out") / 1000" | bc -l)"
}

printf '\nGrowth stall on %s cores, %s GiB, %s: N=%s SETs -r 100000000 -P %s -c %s; abacus args: %s; pinger: %s\n' \
  "$(nproc)" "$(free -g | awk '/Mem:/ {print $2}')" "$(date -u +%F)" "$N" "$P" "$C" "${ABACUS_ARGS:-default}" "${RT:-normal priority}"
printf '%-7s %10s %8s %8s %9s %7s %9s %9s %9s %9s %9s\n' server keys used_MiB secs set/s pings p50_ms p99_ms p99.9_ms max_ms late_ms
run redis "$RPORT"
run abacus "$APORT"
