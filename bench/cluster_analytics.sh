#!/usr/bin/env bash
# Analytics across the cluster (issue 50): the same time series in one Abacus node and in a
# cluster of three Abacus primaries with a replica each; the W7-style one-day waterfall,
# a 30-day TS.MRANGE of one field and TS.MGET asked of one primary of the cluster against
# the single node (median latency, and the servers' CPU per query summed over every node),
# then the same waterfall while another primary is stopped (SIGSTOP): a standby read,
# answered by that primary's replica after `cluster-standby-deadline`.
#
#   bench/cluster_analytics.sh
#   INSTRUMENTS=4000 DAYS=30 ROUNDS=9 bench/cluster_analytics.sh
#
# Redis has no TS.* without the module (and the module needs RedisGears across a cluster):
# the comparison is one Abacus node against the cluster.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ports() {
  local out=() p
  while [ ${#out[@]} -lt "$1" ]; do
    p=$((20000 + RANDOM % 10000))
    if python3 -c "import socket,sys; [socket.socket().bind(('127.0.0.1', q)) for q in ($p, $p + 10000)]" 2>/dev/null; then
      out+=("$p")
    fi
  done
  echo "${out[@]}"
}

read -r -a NODES <<<"$(ports 6)"
for p in "${NODES[@]}"; do start_abacus "$p" --appendonly no --save '' --cluster-enabled yes --threads 1; done
addrs=(); for p in "${NODES[@]}"; do addrs+=("127.0.0.1:$p"); done
redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >/dev/null
for p in "${NODES[@]}"; do
  for _ in $(seq 1 300); do redis-cli -p "$p" cluster info | grep -q cluster_state:ok && break; sleep 0.1; done
done
SINGLE=$(free_port); start_abacus "$SINGLE" --appendonly no --save '' --threads 2
"$ROOT/.venv-tests/bin/python" "$ROOT/bench/cluster_analytics.py" "$SINGLE" "${NODES[@]}"
