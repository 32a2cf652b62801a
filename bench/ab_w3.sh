#!/usr/bin/env bash
# A/B of two abacus binaries on W3 (redis-benchmark -t set,get -r 1000000 -c 50 at -P 1 and
# -P 16), both servers up at once and the rounds alternated so the machine's drift hits both
# alike: the before/after check of a change that must not slow the request path. Prints
# each round's requests/s and the server's CPU time per request (from /proc, the steadier
# figure on a shared machine), then the medians and B/A.
#
#   bench/ab_w3.sh OLD_BINARY NEW_BINARY [server args...]
#   ROUNDS=5 N=2000000 bench/ab_w3.sh /tmp/abacus-old target/release/abacus
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROUNDS=${ROUNDS:-3}
N=${N:-1000000}
A=$1 B=$2; shift 2

ABACUS_BIN=$A; PA=$(free_port); start_abacus "$PA" --appendonly no --save '' "$@"; PIDA=$(pid_of_port "$PA")
ABACUS_BIN=$B; PB=$(free_port); start_abacus "$PB" --appendonly no --save '' "$@"; PIDB=$(pid_of_port "$PB")
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
printf 'A = %s\nB = %s\nserver args: %s\n' "$A" "$B" "$*"
declare -A rps cpu
for P in 1 16; do
  for r in $(seq 1 "$ROUNDS"); do
    for x in "A $PA $PIDA" "B $PB $PIDB"; do
      set -- $x
      for t in set get; do
        t0=$(ticks "$3")
        v=$(redis-benchmark -p "$2" -t "$t" -r 1000000 -n "$N" -c 50 -P "$P" -q --csv | awk -F, 'NR > 1 {gsub(/"/, "", $2); print $2}')
        t1=$(ticks "$3")
        c=$(echo "($t1 - $t0) * 1000000 / $(getconf CLK_TCK) / $N" | bc -l)
        printf '%s -P %-2s %s round %d: %10.0f requests/s, server CPU %.3f us/request\n' "$1" "$P" "$t" "$r" "$v" "$c"
        rps[$1,$P,$t]+="$v "; cpu[$1,$P,$t]+="$c "
      done
    done
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
echo
printf '%-10s %12s %12s %8s %14s %14s\n' test A_rps B_rps B/A A_cpu_us B_cpu_us
for P in 1 16; do
  for t in set get; do
    ra=$(echo "${rps[A,$P,$t]}" | median); rb=$(echo "${rps[B,$P,$t]}" | median)
    ca=$(echo "${cpu[A,$P,$t]}" | median); cb=$(echo "${cpu[B,$P,$t]}" | median)
    printf '%-10s %12.0f %12.0f %8.3f %14.3f %14.3f\n' "$t-P$P" "$ra" "$rb" "$(echo "$rb / $ra" | bc -l)" "$ca" "$cb"
  done
done
