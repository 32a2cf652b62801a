#!/usr/bin/env bash
# Cluster throughput: three Abacus primaries against three redis-server 7.0 primaries, each
# set made into a cluster with `redis-cli --cluster create`, then
# `redis-benchmark --cluster -t set,get -P 16` against each, rounds alternated. Prints each
# round's requests/s and the servers' CPU time per request (the three nodes' user+system
# time from /proc: on this 2-core machine the six servers and the client share two cores,
# so CPU per request is the figure that carries over to a machine with a core per node),
# then the medians and Abacus/Redis.
#
#   bench/cluster.sh
#   ROUNDS=5 N=2000000 P=16 bench/cluster.sh
#
# Resharding and failover times: bench/cluster_ops.sh.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
ROUNDS=${ROUNDS:-3}
N=${N:-1000000}
P=${P:-16}

# Three client ports whose bus ports (+10000) are free too.
ports() {
  local out=() p
  while [ ${#out[@]} -lt 3 ]; do
    p=$((20000 + RANDOM % 10000))
    if python3 -c "import socket,sys; [socket.socket().bind(('127.0.0.1', q)) for q in ($p, $p + 10000)]" 2>/dev/null; then
      out+=("$p")
    fi
  done
  echo "${out[@]}"
}

make_cluster() {
  local addrs=() p
  for p in "$@"; do addrs+=("127.0.0.1:$p"); done
  redis-cli --cluster create "${addrs[@]}" --cluster-yes >/dev/null
  for p in "$@"; do
    for _ in $(seq 1 200); do
      redis-cli -p "$p" cluster info | grep -q cluster_state:ok && break
      sleep 0.1
    done
  done
}

read -r A1 A2 A3 <<<"$(ports)"
for p in $A1 $A2 $A3; do start_abacus "$p" --appendonly no --save '' --cluster-enabled yes; done
read -r R1 R2 R3 <<<"$(ports)"
for p in $R1 $R2 $R3; do start_redis "$p" --cluster-enabled yes; done
make_cluster "$A1" "$A2" "$A3"
make_cluster "$R1" "$R2" "$R3"

ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$(pid_of_port "$p")/stat"))); done; echo "$t"; }
declare -A rps cpu
printf 'cluster throughput, redis-benchmark --cluster -P %s -c 50 -r 1000000, N=%s, %s\n' "$P" "$N" "$(date -u '+%F %H:%M UTC')"
for r in $(seq 1 "$ROUNDS"); do
  for side in abacus redis; do
    if [ "$side" = abacus ]; then set -- "$A1" "$A2" "$A3"; else set -- "$R1" "$R2" "$R3"; fi
    for t in set get; do
      t0=$(ticks "$@")
      v=$(redis-benchmark --cluster -p "$1" -t "$t" -r 1000000 -n "$N" -c 50 -P "$P" -q --csv 2>/dev/null | awk -F, 'NR > 1 {gsub(/"/, "", $2); print $2}' | tail -1)
      t1=$(ticks "$@")
      c=$(echo "($t1 - $t0) * 1000000 / $(getconf CLK_TCK) / $N" | bc -l)
      printf '%-6s %s round %d: %10.0f requests/s, servers'"'"' CPU %.3f us/request\n' "$side" "$t" "$r" "$v" "$c"
      rps[$side-$t]="${rps[$side-$t]:-} $v"
      cpu[$side-$t]="${cpu[$side-$t]:-} $c"
    done
  done
done
printf '\n%-6s %12s %12s %8s %12s %12s\n' test abacus_rps redis_rps ratio abacus_cpu redis_cpu
for t in set get; do
  # shellcheck disable=SC2086
  ar=$(median ${rps[abacus-$t]}); rr=$(median ${rps[redis-$t]}); ac=$(median ${cpu[abacus-$t]}); rc=$(median ${cpu[redis-$t]})
  printf '%-6s %12.0f %12.0f %8.3f %12.3f %12.3f\n' "$t" "$ar" "$rr" "$(echo "$ar / $rr" | bc -l)" "$ac" "$rc"
done
