#!/usr/bin/env bash
# A/B of two abacus binaries on the W1 load at one tenth (21.2M pipelined 16-byte APPENDs onto
# 7.8M random keys, -c 50 -P 100), both servers up at once and the rounds alternated so the
# machine's drift hits both alike. Prints each round's requests/s and the server's CPU time
# per request (from /proc), the steadier figure on a shared machine.
#
#   bench/ab.sh OLD_BINARY NEW_BINARY [server args...]
#   ROUNDS=5 N=5000000 bench/ab.sh /tmp/abacus-old target/release/abacus --appendonly no --save ''
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROUNDS=${ROUNDS:-3}
N=${N:-21200000}
A=$1 B=$2; shift 2

ABACUS_BIN=$A; PA=$(free_port); start_abacus "$PA" "$@"; PIDA=$(pid_of_port "$PA")
ABACUS_BIN=$B; PB=$(free_port); start_abacus "$PB" "$@"; PIDB=$(pid_of_port "$PB")
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
printf 'A = %s\nB = %s\nserver args: %s\n' "$A" "$B" "$*"
for r in $(seq 1 "$ROUNDS"); do
  for x in "A $PA $PIDA" "B $PB $PIDB"; do
    set -- $x
    redis-cli -p "$2" flushall >/dev/null
    t0=$(ticks "$3")
    rps=$(redis-benchmark -p "$2" -r 7800000 -n "$N" -c 50 -P 100 -q --csv append key:__rand_int__ 0123456789abcdef |
      awk -F, 'NR > 1 {gsub(/"/, "", $2); print $2}')
    t1=$(ticks "$3")
    printf '%s round %d: %10.0f requests/s, server CPU %.3f us/request\n' "$1" "$r" "$rps" \
      "$(echo "($t1 - $t0) * 1000000 / $(getconf CLK_TCK) / $N" | bc -l)"
  done
done
