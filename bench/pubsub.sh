#!/usr/bin/env bash
# Pub/sub fan-out: one publisher, 1,000 subscribers (one connection each) on one channel,
# messages delivered per second, against Debian's Redis and Abacus side by side
# (bench/pubsub.py: the clients; both servers start without persistence).
#
#   bench/pubsub.sh                              1000 subscribers, 1500 messages, 3 rounds
#   PUBSUB_ARGS="--messages 20000" bench/pubsub.sh
#   ABACUS_ARGS="--threads 1" bench/pubsub.sh
set -euo pipefail
source "$(dirname "$0")/lib.sh"
start_pair
printf 'on %s cores, %s GiB, %s; abacus args: %s\n' \
  "$(nproc)" "$(free -g | awk '/Mem:/ {print $2}')" "$(date -u +%F)" "${ABACUS_ARGS:-default}"
python3 "$ROOT/bench/pubsub.py" --redis-port "$RPORT" --abacus-port "$APORT" ${PUBSUB_ARGS:-}
