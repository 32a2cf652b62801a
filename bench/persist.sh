#!/usr/bin/env bash
# Durability benchmarks, Abacus and Redis side by side (issue: durability).
#
#   bench/persist.sh                    everything, KEYS=10000000 for the snapshot part
#   PARTS=throughput N=300000 ROUNDS=3 bench/persist.sh
#   PARTS=snapshot KEYS=1000000 bench/persist.sh
#   PARTS=w1 bench/persist.sh          the W1 load at one tenth, everysec vs none vs Redis
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
ROUNDS=${ROUNDS:-3}
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

# cpu_ticks PID: user + system clock ticks the process has used so far
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# workload_args W N: the redis-benchmark arguments of workload W
workload_args() {
  case $1 in
    set16) echo "-t set -r 1000000 -n $2 -c 50 -P 16" ;;
    set1) echo "-t set -r 1000000 -n $(($2 / 4)) -c 50 -P 1" ;;
    set1-always) echo "-t set -r 1000000 -n 50000 -c 50 -P 1" ;;
    append) echo "-r 7800000 -n $2 -c 50 -P 100 append key:__rand_int__ 0123456789abcdef" ;;
    w1) echo "-r 7800000 -n 21200000 -c 50 -P 100 append key:__rand_int__ 0123456789abcdef" ;;
  esac
}

# measure NAME PORT W: one run of workload W on an emptied server; appends its requests/s to
# R[NAME,W] and the server's CPU microseconds per request to C[NAME,W].
measure() {
  local name=$1 port=$2 w=$3 pid t0 t1 rps n
  redis-cli -p "$port" flushall >/dev/null
  pid=$(pid_of_port "$port")
  # shellcheck disable=SC2046
  n=$(workload_args "$w" "$N" | awk '{for (i = 1; i < NF; i++) if ($i == "-n") print $(i + 1)}')
  t0=$(cpu_ticks "$pid")
  # shellcheck disable=SC2046
  rps=$(bench_rps "$port" $(workload_args "$w" "$N"))
  t1=$(cpu_ticks "$pid")
  R[$name,$w]+="$rps "
  C[$name,$w]+="$(echo "($t1 - $t0) * 1000000 / $(getconf CLK_TCK) / $n" | bc -l) "
}

if [[ " $PARTS " == *" throughput "* ]]; then
  # All servers of a comparison run at once (idle while another is measured) and the rounds
  # alternate between them, so the machine's drift hits every one alike; each cell is the
  # median over ROUNDS. The CPU columns (server CPU per request, from /proc) are a second,
  # less load-sensitive view of what the log costs.
  declare -A R C
  AN=$(free_port); start_abacus "$AN" "${NOPERSIST[@]}"
  AE=$(free_port); start_abacus "$AE" --appendonly yes --appendfsync everysec --save ''
  RE=$(free_port); start_redis "$RE" --appendonly yes --appendfsync everysec
  for w in set16 set1 append; do
    for _ in $(seq 1 "$ROUNDS"); do
      measure none "$AN" "$w"; measure every "$AE" "$w"; measure redis-every "$RE" "$w"
    done
  done
  stop_port "$AN"; stop_port "$AE"; stop_port "$RE"
  AA=$(free_port); start_abacus "$AA" --appendonly yes --appendfsync always --save ''
  RA=$(free_port); start_redis "$RA" --appendonly yes --appendfsync always
  for w in set16 set1-always append; do
    for _ in $(seq 1 "$ROUNDS"); do
      measure always "$AA" "$w"; measure redis-always "$RA" "$w"
    done
  done
  stop_port "$AA"; stop_port "$RA"

  printf '\nThroughput on %s cores, %s, N=%s, median of %s alternating rounds (requests/s; server CPU us/request)\n' \
    "$(nproc)" "$(date -u +%F)" "$N" "$ROUNDS"
  printf '%-16s %12s %12s %12s %9s %9s %9s %10s\n' workload abacus_none abacus_every redis_every 'cpu_none' 'cpu_every' 'cpu_redis' 'every/none'
  for w in set16 set1 append; do
    # shellcheck disable=SC2086
    printf '%-16s %12.0f %12.0f %12.0f %9.2f %9.2f %9.2f %10.2f\n' "$w" "$(median ${R[none,$w]})" "$(median ${R[every,$w]})" \
      "$(median ${R[redis-every,$w]})" "$(median ${C[none,$w]})" "$(median ${C[every,$w]})" "$(median ${C[redis-every,$w]})" \
      "$(ratio "$(median ${R[every,$w]})" "$(median ${R[none,$w]})")"
  done
  printf 'every/none: Abacus with appendfsync everysec vs Abacus without persistence (target >= 0.90)\n'
  for w in set16 set1 append; do
    printf 'rounds %-8s none %s| everysec %s\n' "$w" "${R[none,$w]}" "${R[every,$w]}"
  done
  printf '%-16s %12s %12s %9s %9s %12s\n' workload abacus_always redis_always 'cpu_abacus' 'cpu_redis' abacus/redis
  for w in set16 set1-always append; do
    # shellcheck disable=SC2086
    printf '%-16s %12.0f %12.0f %9.2f %9.2f %12.2f\n' "$w" "$(median ${R[always,$w]})" "$(median ${R[redis-always,$w]})" \
      "$(median ${C[always,$w]})" "$(median ${C[redis-always,$w]})" \
      "$(ratio "$(median ${R[always,$w]})" "$(median ${R[redis-always,$w]})")"
  done
fi

if [[ " $PARTS " == *" w1 "* ]]; then
  # The W1 load at one tenth (21.2M 16-byte appends onto 7.8M random keys, -P 100) from an
  # empty server: long enough for automatic compaction to follow the dataset's growth.
  declare -A R C
  AN=$(free_port); start_abacus "$AN" "${NOPERSIST[@]}"
  AE=$(free_port); start_abacus "$AE" --appendonly yes --appendfsync everysec --save ''
  RE=$(free_port); start_redis "$RE" --appendonly yes --appendfsync everysec
  for _ in $(seq 1 "$ROUNDS"); do
    measure none "$AN" w1; measure every "$AE" w1; measure redis-every "$RE" w1
  done
  compactions=$(grep -c "Background saving started" "$BENCH_TMP/abacus-$AE.log" || true)
  stop_port "$AN"; stop_port "$AE"; stop_port "$RE"
  printf '\nW1 at one tenth on %s cores, %s, median of %s rounds (requests/s; server CPU us/request)\n' "$(nproc)" "$(date -u +%F)" "$ROUNDS"
  printf '%-16s %12s %12s %12s %9s %9s %9s %10s\n' workload abacus_none abacus_every redis_every 'cpu_none' 'cpu_every' 'cpu_redis' 'every/none'
  # shellcheck disable=SC2086
  printf '%-16s %12.0f %12.0f %12.0f %9.2f %9.2f %9.2f %10.2f\n' w1 "$(median ${R[none,w1]})" "$(median ${R[every,w1]})" \
    "$(median ${R[redis-every,w1]})" "$(median ${C[none,w1]})" "$(median ${C[every,w1]})" "$(median ${C[redis-every,w1]})" \
    "$(ratio "$(median ${R[every,w1]})" "$(median ${R[none,w1]})")"
  printf 'automatic compactions during the everysec runs: %s\n' "$compactions"
  printf 'rounds, requests/s: none %s| everysec %s| redis %s\n' "${R[none,w1]}" "${R[every,w1]}" "${R[redis-every,w1]}"
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
