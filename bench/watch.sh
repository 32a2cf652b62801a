#!/usr/bin/env bash
# WATCH contention: many clients, few keys, WATCH/GET/MULTI/SET/EXEC retry loops, against
# Debian's Redis and Abacus side by side (bench/watch.py: wall time, aborted EXECs, exact
# final counters).
#
#   bench/watch.sh                       20 clients, 4 keys, 1000 increments each, 3 rounds
#   WATCH_ARGS="--clients 50" bench/watch.sh
#   ABACUS_ARGS="--threads 1" bench/watch.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
start_pair
printf 'on %s cores, %s GiB, %s; abacus args: %s\n' \
  "$(nproc)" "$(free -g | awk '/Mem:/ {print $2}')" "$(date -u +%F)" "${ABACUS_ARGS:-default}"
python3 "$ROOT/bench/watch.py" --redis-port "$RPORT" --abacus-port "$APORT" ${WATCH_ARGS:-}
