#!/usr/bin/env bash
# DUMP / RESTORE of large values (an 8 MB string, lists, sets, hashes and sorted sets of 1M
# elements), Debian's Redis and Abacus side by side: time of each (best of 3), payload
# sizes, Abacus/Redis ratios, and a cross-restore check. The client is bench/dump.py.
#
#   bench/dump.sh        (about a minute)
set -euo pipefail
source "$(dirname "$0")/lib.sh"

RPORT=$(free_port); start_redis "$RPORT"
APORT=$(free_port); start_abacus "$APORT" --appendonly no --save ""

printf 'DUMP/RESTORE on %s cores, %s; %s\n' "$(nproc)" "$(date -u +%F)" \
  "$("$REDIS_SERVER" --version | awk '{print $1, $3}')"
python3 "$ROOT/bench/dump.py" --redis-port "$RPORT" --abacus-port "$APORT"
