#!/usr/bin/env bash
# W3: redis-benchmark -t set,get -r 1000000 -c 50 at -P 1 and -P 16 against Debian's Redis and
# Abacus, side by side on this machine, alternating between the two every round so drift
# hits both equally. Prints ops/s (median of the rounds) and the Abacus/Redis ratio.
#
#   bench/w3.sh                       defaults: N=2000000 requests, ROUNDS=3
#   N=500000 ROUNDS=1 bench/w3.sh     quicker
#   ABACUS_ARGS="--threads 1" bench/w3.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
N=${N:-2000000}
ROUNDS=${ROUNDS:-3}
ABACUS_ARGS=${ABACUS_ARGS:-}

start_pair

declare -A results
for P in 1 16; do
  for round in $(seq 1 "$ROUNDS"); do
    for target in redis abacus; do
      port=$RPORT; [ "$target" = abacus ] && port=$APORT
      while IFS=, read -r test rps _; do
        test=${test//\"/}; rps=${rps//\"/}
        [ "$test" = test ] && continue
        results[$target,$P,$test]+="$rps "
      done < <(redis-benchmark -p "$port" -t set,get -r 1000000 -n "$N" -c 50 -P "$P" -q --csv)
    done
  done
done

printf '\nW3 on %s cores, %s GiB, %s; N=%s, rounds=%s, abacus args: %s\n' \
  "$(nproc)" "$(free -g | awk '/Mem:/ {print $2}')" "$(date -u +%F)" "$N" "$ROUNDS" "${ABACUS_ARGS:-default}"
printf '%-10s %-5s %14s %14s %8s\n' pipeline test redis_ops/s abacus_ops/s ratio
for P in 1 16; do
  for t in SET GET; do
    r=$(median ${results[redis,$P,$t]}); a=$(median ${results[abacus,$P,$t]})
    printf '%-10s %-5s %14.0f %14.0f %8.2f\n' "-P $P" "$t" "$r" "$a" "$(echo "$a / $r" | bc -l)"
  done
done
