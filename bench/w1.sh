#!/usr/bin/env bash
# W1 over the network: pipelined 16-byte APPENDs onto random keys against Debian's Redis and
# Abacus side by side (both without persistence). Reports appends/s and memory per key (RSS
# growth over the run / keys created). Targets (issue 3): Abacus memory per key at most 0.4x
# Redis's, throughput at least 1.5x.
#
#   bench/w1.sh                              defaults: one tenth of W1, N=21200000 appends onto
#                                            KEYS=7800000 random keys, ROUNDS=1
#   N=2000000 KEYS=780000 bench/w1.sh        quicker
#   ROUNDS=3 bench/w1.sh                     throughput median over rounds (each from empty)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
N=${N:-21200000}
KEYS=${KEYS:-7800000}
ROUNDS=${ROUNDS:-1}
ABACUS_ARGS=${ABACUS_ARGS:-}

start_pair
pid_of() { redis-cli -p "$1" info server | awk -F: '/^process_id/ {print $2}' | tr -d '\r'; }

declare -A rps mem keys
for round in $(seq 1 "$ROUNDS"); do
  for target in redis abacus; do
    port=$RPORT; [ "$target" = abacus ] && port=$APORT
    redis-cli -p "$port" flushall >/dev/null
    sleep 1 # let freed memory go back (jemalloc background purge)
    pid=$(pid_of "$port")
    before=$(rss_kb "$pid")
    r=$(redis-benchmark -p "$port" -n "$N" -r "$KEYS" -c 50 -P 100 -q --csv \
      append key:__rand_int__ 0123456789abcdef | awk -F, 'NR > 1 {gsub(/"/, "", $2); print $2}')
    rps[$target]+="$r "
    if [ "$round" = 1 ]; then
      after=$(rss_kb "$pid")
      keys[$target]=$(redis-cli -p "$port" dbsize)
      mem[$target]=$(echo "($after - $before) * 1024 / ${keys[$target]}" | bc -l)
    fi
  done
done

printf '\nW1 over the network on %s cores, %s GiB, %s: %s appends of 16 B onto %s random keys, -c 50 -P 100, rounds=%s, abacus args: %s\n' \
  "$(nproc)" "$(free -g | awk '/Mem:/ {print $2}')" "$(date -u +%F)" "$N" "$KEYS" "$ROUNDS" "${ABACUS_ARGS:-default}"
printf '%-8s %14s %12s %16s\n' server appends/s keys bytes/key_RSS
for t in redis abacus; do
  # shellcheck disable=SC2086
  printf '%-8s %14.0f %12s %16.1f\n' "$t" "$(median ${rps[$t]})" "${keys[$t]}" "${mem[$t]}"
done
# shellcheck disable=SC2086
printf 'Abacus/Redis: throughput %.2fx (target >= 1.5x), memory per key %.2fx (target <= 0.4x)\n' \
  "$(echo "$(median ${rps[abacus]}) / $(median ${rps[redis]})" | bc -l)" "$(echo "${mem[abacus]} / ${mem[redis]}" | bc -l)"
