#!/usr/bin/env bash
# HyperLogLog adds: pipelined PFADD against Debian's Redis and Abacus side by side, plus
# Abacus's HLL.ADD (postgresql-hll sketches), with redis-benchmark (-c 50 -P 100). Rounds
# alternate between the servers so drift hits both equally; each run starts from an empty
# database. Prints ops/s (median of the rounds) and the ratios to Redis's PFADD.
#
# Three workloads, because an add's cost depends on what dominates it:
#   one-key      `pfadd hll <rand>`: one hot counter, one element per command; bound by
#                per-command overhead, and in Abacus by the single shard owning the key.
#   one-key-x10  ten elements per command on the same key: bound by the adds themselves
#                (reported in commands/s; elements/s is ten times that).
#   10k-keys     `pfadd hll:<rand> <rand>` over 10,000 keys (each sees ~200 distinct
#                elements per run, so most adds change a register): many counters, spread
#                over Abacus's shards.
# Elements are random integers below 10^8 (one-key) or 10^4 (10k-keys) in decimal text.
#
#   bench/hll.sh                      defaults: N=2000000 commands, ROUNDS=3
#   N=500000 ROUNDS=1 bench/hll.sh    quicker
#   ABACUS_ARGS="--threads 1" bench/hll.sh
#   P=1 N=200000 WORKLOADS=one-key bench/hll.sh    unpipelined, one workload
set -euo pipefail
source "$(dirname "$0")/lib.sh"
N=${N:-2000000}
ROUNDS=${ROUNDS:-3}
ABACUS_ARGS=${ABACUS_ARGS:-}
P=${P:-100}

start_pair

R10='__rand_int__ __rand_int__ __rand_int__ __rand_int__ __rand_int__ __rand_int__ __rand_int__ __rand_int__ __rand_int__ __rand_int__'
workload_r() { case $1 in 10k-keys) echo 10000 ;; *) echo 100000000 ;; esac; }
# workload_args WORKLOAD COMMAND: the command line redis-benchmark sends.
workload_args() {
  case $1 in
    one-key) echo "$2 hll __rand_int__" ;;
    one-key-x10) echo "$2 hll $R10" ;;
    10k-keys) echo "$2 hll:__rand_int__ __rand_int__" ;;
  esac
}

# run PORT WORKLOAD COMMAND: prints requests per second.
run() {
  local port=$1 w=$2 cmd=$3
  redis-cli -p "$port" flushall >/dev/null
  # shellcheck disable=SC2046
  redis-benchmark -p "$port" -n "$N" -c 50 -P "$P" -r "$(workload_r "$w")" -q --csv \
    $(workload_args "$w" "$cmd") | awk -F, 'NR > 1 {gsub(/"/, "", $2); print $2}'
}

WORKLOADS=${WORKLOADS:-"one-key one-key-x10 10k-keys"}
declare -A results
for round in $(seq 1 "$ROUNDS"); do
  for w in $WORKLOADS; do
    results[redis,$w]+="$(run "$RPORT" "$w" pfadd) "
    results[abacus,$w]+="$(run "$APORT" "$w" pfadd) "
    results[abacus-hll,$w]+="$(run "$APORT" "$w" hll.add) "
  done
done

printf '\nHLL adds on %s cores, %s GiB, %s; N=%s, -c 50 -P %s, rounds=%s, abacus args: %s\n' \
  "$(nproc)" "$(free -g | awk '/Mem:/ {print $2}')" "$(date -u +%F)" "$N" "$P" "$ROUNDS" "${ABACUS_ARGS:-default}"
printf '%-12s %14s %14s %7s %16s %7s\n' workload redis_PFADD/s abacus_PFADD/s ratio abacus_HLL.ADD/s ratio
for w in $WORKLOADS; do
  r=$(median ${results[redis,$w]}); a=$(median ${results[abacus,$w]}); h=$(median ${results[abacus-hll,$w]})
  printf '%-12s %14.0f %14.0f %7.2f %16.0f %7.2f\n' "$w" "$r" "$a" "$(echo "$a / $r" | bc -l)" \
    "$h" "$(echo "$h / $r" | bc -l)"
done
# Each round's own ratios (same round, so the same machine conditions for both servers).
printf '\nPer-round ratios to Redis PFADD (round 1 first)\n'
for w in $WORKLOADS; do
  read -ra rs <<<"${results[redis,$w]}"; read -ra as <<<"${results[abacus,$w]}"; read -ra hs <<<"${results[abacus-hll,$w]}"
  pf=""; hl=""
  for i in "${!rs[@]}"; do
    pf+="$(printf '%.2f ' "$(echo "${as[$i]} / ${rs[$i]}" | bc -l)")"
    hl+="$(printf '%.2f ' "$(echo "${hs[$i]} / ${rs[$i]}" | bc -l)")"
  done
  printf '%-12s PFADD: %s| HLL.ADD: %s\n' "$w" "$pf" "$hl"
done
