#!/usr/bin/env bash
# W3: redis-benchmark -t set,get -r 1000000 -c 50 at -P 1 and -P 16 against Debian's Redis and
# Abacus, side by side on this machine, alternating between the two every round so drift
# hits both equally. Prints ops/s (median of the rounds), the Abacus/Redis ratio, each
# server's CPU per request and the client's CPU share.
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

# cpu_ticks PID: user + system clock ticks the process has used so far
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
RPID=$(pid_of_port "$RPORT"); APID=$(pid_of_port "$APORT")
TICK=$(getconf CLK_TCK)

# Besides requests/s, each run records the server's CPU per request and the client's CPU
# share (redis-benchmark is one thread: near 100% it, not the server, sets the pace, and a
# server that needs less CPU per request cannot show it in requests/s). One test per run,
# so that the CPU figures belong to one command.
declare -A results cpu client
for P in 1 16; do
  for round in $(seq 1 "$ROUNDS"); do
    for target in redis abacus; do
      port=$RPORT; pid=$RPID; [ "$target" = abacus ] && { port=$APORT; pid=$APID; }
      for t in set get; do
        s0=$(cpu_ticks "$pid"); c0=$(awk '{print $14 + $15}' /proc/self/stat)
        TIMEFORMAT='%U %S %R'
        { time redis-benchmark -p "$port" -t "$t" -r 1000000 -n "$N" -c 50 -P "$P" -q --csv > "$BENCH_TMP/out.csv"; } 2> "$BENCH_TMP/time.txt"
        s1=$(cpu_ticks "$pid")
        test=$(awk -F, 'NR==2 {gsub(/"/,"",$1); print $1}' "$BENCH_TMP/out.csv")
        rps=$(awk -F, 'NR==2 {gsub(/"/,"",$2); print $2}' "$BENCH_TMP/out.csv")
        results[$target,$P,$test]+="$rps "
        cpu[$target,$P,$test]+="$(echo "($s1 - $s0) * 1000000 / $TICK / $N" | bc -l) "
        client[$target,$P,$test]+="$(awk '{print ($1 + $2) * 100 / $3}' "$BENCH_TMP/time.txt") "
      done
    done
  done
done

printf '\nW3 on %s cores, %s GiB, %s; N=%s, rounds=%s, abacus args: %s\n' \
  "$(nproc)" "$(free -g | awk '/Mem:/ {print $2}')" "$(date -u +%F)" "$N" "$ROUNDS" "${ABACUS_ARGS:-default}"
printf '%-10s %-5s %14s %14s %8s %12s %12s %11s %11s\n' pipeline test redis_ops/s abacus_ops/s ratio \
  redis_us/req abacus_us/req client%_r client%_a
for P in 1 16; do
  for t in SET GET; do
    r=$(median ${results[redis,$P,$t]}); a=$(median ${results[abacus,$P,$t]})
    printf '%-10s %-5s %14.0f %14.0f %8.2f %12.2f %12.2f %11.0f %11.0f\n' "-P $P" "$t" "$r" "$a" "$(echo "$a / $r" | bc -l)" \
      "$(median ${cpu[redis,$P,$t]})" "$(median ${cpu[abacus,$P,$t]})" "$(median ${client[redis,$P,$t]})" "$(median ${client[abacus,$P,$t]})"
  done
done
printf 'us/req: server CPU (user + system) per request; client%%: redis-benchmark CPU / elapsed time\n'
