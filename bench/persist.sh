#!/usr/bin/env bash
# Durability benchmarks, Abacus and Redis side by side (issue: durability).
#
#   bench/persist.sh                    everything, KEYS=10000000 for the snapshot part
#   PARTS=throughput N=300000 bench/persist.sh
#   PARTS=snapshot KEYS=1000000 bench/persist.sh
#
# throughput: redis-benchmark SET (W3: -r 1000000 -c 50, -P 16 and -P 1) and APPEND
#   (W1-style: 16-byte appends onto random keys, -P 100) against Abacus without persistence,
#   Abacus with the log (appendfsync everysec; target >= 90% of no persistence), and with
#   appendfsync always, next to Redis with appendonly yes and the same fsync policy.
# snapshot: KEYS keys from DEBUG POPULATE; SAVE time, load time on restart (spawn to first
#   PONG; target: Abacus loads >= 1.5x faster), and peak memory during a background snapshot
#   under a full SET load over the same keys (Redis: BGSAVE, parent + forked child PSS).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
N=${N:-1000000}
KEYS=${KEYS:-10000000}
PARTS=${PARTS:-throughput snapshot}
NOPERSIST=(--appendonly no --save '')

# bench_rps PORT ARGS... -> requests/s of one redis-benchmark run (first test in the CSV)
bench_rps() {
  local port=$1; shift
  redis-benchmark -p "$port" -q --csv "$@" | awk -F, 'NR==2 {gsub(/"/,"",$2); print $2}'
}

stop_port() {
  redis-cli -p "$1" shutdown nosave >/dev/null 2>&1 || true
  sleep 0.3
}

ratio() { echo "$1 / $2" | bc -l; }

if [[ " $PARTS " == *" throughput "* ]]; then
  printf '\nThroughput on %s cores, %s, N=%s (requests/s)\n' "$(nproc)" "$(date -u +%F)" "$N"
  printf '%-34s %12s %12s %12s %12s\n' workload abacus_none abacus_every redis_every ratio_ev/none
  declare -A R
  for mode in none everysec always; do
    AP=$(free_port)
    case $mode in
      none) start_abacus "$AP" "${NOPERSIST[@]}" ;;
      *) start_abacus "$AP" --appendonly yes --appendfsync "$mode" --save '' ;;
    esac
    RP=""
    if [ "$mode" != none ]; then
      RP=$(free_port); start_redis "$RP" --appendonly yes --appendfsync "$mode"
    fi
    for w in set16 set1 append; do
      case $w in
        set16) args=(-t set -r 1000000 -n "$N" -c 50 -P 16) ;;
        set1) args=(-t set -r 1000000 -n "$((N / 4))" -c 50 -P 1) ;;
        append) args=(-r 7800000 -n "$N" -c 50 -P 100 append key:__rand_int__ 0123456789abcdef) ;;
      esac
      [ "$mode" = always ] && [ "$w" = set1 ] && args=(-t set -r 1000000 -n 50000 -c 50 -P 1)
      R[abacus,$mode,$w]=$(bench_rps "$AP" "${args[@]}")
      [ -n "$RP" ] && R[redis,$mode,$w]=$(bench_rps "$RP" "${args[@]}")
      redis-cli -p "$AP" flushall >/dev/null
      [ -n "$RP" ] && redis-cli -p "$RP" flushall >/dev/null
    done
    stop_port "$AP"; [ -n "$RP" ] && stop_port "$RP"
  done
  for w in set16 set1 append; do
    printf '%-34s %12.0f %12.0f %12.0f %12.2f\n' "$w (everysec)" "${R[abacus,none,$w]}" "${R[abacus,everysec,$w]}" \
      "${R[redis,everysec,$w]}" "$(ratio "${R[abacus,everysec,$w]}" "${R[abacus,none,$w]}")"
  done
  printf '%-34s %12s %12s %12s %12s\n' workload '' abacus_always redis_always abacus/redis
  for w in set16 set1 append; do
    printf '%-34s %12s %12.0f %12.0f %12.2f\n' "$w (always)" '' "${R[abacus,always,$w]}" "${R[redis,always,$w]}" \
      "$(ratio "${R[abacus,always,$w]}" "${R[redis,always,$w]}")"
  done
  printf 'ratio_ev/none: Abacus with appendfsync everysec vs Abacus without persistence (target >= 0.90)\n'
fi

# pss_kb PID...: summed proportional set size (fork's shared pages counted once)
pss_kb() {
  local t=0
  for p in "$@"; do
    v=$(awk '/^Pss:/ {print $2}' "/proc/$p/smaps_rollup" 2>/dev/null || echo 0)
    t=$((t + ${v:-0}))
  done
  echo "$t"
}

if [[ " $PARTS " == *" snapshot "* ]]; then
  printf '\nSnapshots of %s keys (DEBUG POPULATE), %s cores, %s\n' "$KEYS" "$(nproc)" "$(date -u +%F)"
  declare -A S
  for target in redis abacus; do
    port=$(free_port)
    if [ "$target" = redis ]; then
      start_redis "$port" --enable-debug-command local --dbfilename dump.rdb
      dir="$BENCH_TMP/redis-$port"
    else
      start_abacus "$port" "${NOPERSIST[@]}"
      dir="$BENCH_TMP/abacus-$port"
    fi
    redis-cli -p "$port" debug populate "$KEYS" >/dev/null
    t0=$(date +%s.%N); redis-cli -p "$port" save >/dev/null; t1=$(date +%s.%N)
    S[$target,save]=$(echo "$t1 - $t0" | bc -l)
    S[$target,bytes]=$(du -sb "$dir" | awk '{print $1}')
    # Load time: from spawn to the first PONG.
    stop_port "$port"
    t0=$(date +%s.%N)
    if [ "$target" = redis ]; then
      start_redis "$port" --dbfilename dump.rdb --enable-debug-command local
    else
      start_abacus "$port" "${NOPERSIST[@]}"
    fi
    t1=$(date +%s.%N)
    S[$target,load]=$(echo "$t1 - $t0" | bc -l)
    S[$target,keys]=$(redis-cli -p "$port" dbsize)
    pid=$(redis-cli -p "$port" info server | awk -F: '/^process_id/ {print $2}' | tr -d '\r')
    # Peak memory during a background snapshot under a full write load on the same keys.
    redis-benchmark -p "$port" -t set -r "$KEYS" -n 100000000 -c 50 -P 16 -q >/dev/null 2>&1 &
    load=$!
    sleep 2
    base_load=$(pss_kb "$pid")
    redis-cli -p "$port" bgsave >/dev/null
    peak=$base_load
    sleep 0.05
    while redis-cli -p "$port" info persistence | grep -q 'rdb_bgsave_in_progress:1'; do
      kids=$(pgrep -P "$pid" || true)
      cur=$(pss_kb "$pid" $kids)
      [ "$cur" -gt "$peak" ] && peak=$cur
      sleep 0.05
    done
    kill "$load" 2>/dev/null || true; wait "$load" 2>/dev/null || true
    S[$target,peak]=$peak; S[$target,base_load]=$base_load
    stop_port "$port"
  done
  printf '%-10s %10s %10s %12s %10s %14s %14s %8s\n' server keys save_s file_MB load_s pss_load_MB pss_peak_MB peak/base
  for t in redis abacus; do
    printf '%-10s %10s %10.2f %12.1f %10.2f %14.0f %14.0f %8.2f\n' "$t" "${S[$t,keys]}" "${S[$t,save]}" \
      "$(echo "${S[$t,bytes]} / 1048576" | bc -l)" "${S[$t,load]}" "$(echo "${S[$t,base_load]} / 1024" | bc -l)" \
      "$(echo "${S[$t,peak]} / 1024" | bc -l)" "$(ratio "${S[$t,peak]}" "${S[$t,base_load]}")"
  done
  printf 'load: Abacus %.2fx faster than Redis (target >= 1.5x); save: %.2fx\n' \
    "$(ratio "${S[redis,load]}" "${S[abacus,load]}")" "$(ratio "${S[redis,save]}" "${S[abacus,save]}")"
fi
