#!/usr/bin/env bash
# W6: sets of integer IDs, Debian's Redis and Abacus side by side. Loads two sets of 10M
# draws of random integers below 100M (fixed seeds, ~9.5M distinct each) with pipelined
# SADDs of 1,000 members in canonical decimal form into both servers, then times SCARD,
# SINTERCARD, SUNIONSTORE, SDIFFSTORE and pipelined SISMEMBER throughput, and reports RSS
# per member, with Abacus/Redis ratios. The client is bench/w6.py (raw RESP over sockets:
# redis-benchmark's __rand_int__ is zero-padded, not a canonical integer).
#
#   bench/w6.sh                 the W6 table (about 3 minutes, Redis's load and algebra
#                               dominate; Redis needs ~3 GB)
#   W6_BIG=1 bench/w6.sh        also two sets of 100M draws below 1e9 in Abacus alone
#                               (SINTERCARD target < 1 s; Redis would need ~14 GB)
#   ABACUS_ARGS="--threads 1" bench/w6.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ABACUS_ARGS=${ABACUS_ARGS:-}

RPORT=$(free_port); start_redis "$RPORT"; RPID=${BENCH_PIDS[-1]}
APORT=$(free_port); start_abacus "$APORT" --appendonly no --save "" $ABACUS_ARGS; APID=${BENCH_PIDS[-1]}

printf 'W6 on %s cores, %s GiB, %s; %s; abacus args: %s\n' \
  "$(nproc)" "$(free -g | awk '/Mem:/ {print $2}')" "$(date -u +%F)" \
  "$("$REDIS_SERVER" --version | awk '{print $1, $3}')" "${ABACUS_ARGS:-default}"
python3 "$ROOT/bench/w6.py" --redis-port "$RPORT" --redis-pid "$RPID" \
  --abacus-port "$APORT" --abacus-pid "$APID" ${W6_BIG:+--big} ${W6_ARGS:-}
