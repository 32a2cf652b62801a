#!/usr/bin/env bash
# Migration from Redis: the full sync of a Redis 7.0 primary into an Abacus replica (RDB
# read whole, checked, loaded under every shard), beside the same full sync into a Redis
# replica, on this machine, with Redis's both transfer modes (repl-diskless-sync yes/no).
#
# The primary holds KEYS string keys (DEBUG POPULATE KEYS key 16) plus COLL collections of
# each of hash, set, sorted set and list with 100 members each; a fresh replica is attached
# and the clock runs until its INFO replication says the link is up and no sync is in
# progress. Printed: seconds per replica and mode, and Abacus/Redis (lower is faster).
#
#   bench/migrate.sh                      KEYS=2000000 COLL=20000
#   KEYS=200000 COLL=2000 bench/migrate.sh   quicker
set -euo pipefail
source "$(dirname "$0")/lib.sh"
KEYS=${KEYS:-2000000}
COLL=${COLL:-20000}

RPORT=$(free_port); start_redis "$RPORT" --enable-debug-command local --repl-diskless-sync-delay 0

field() { redis-cli -p "$1" info replication | tr -d '\r' | awk -F: -v f="$2" '$1 == f {print $2}'; }
wait_synced() {
  for _ in $(seq 1 60000); do
    if [ "$(field "$1" master_link_status)" = up ] && [ "$(field "$1" master_sync_in_progress)" = 0 ]; then
      return 0
    fi
    sleep 0.01
  done
  echo "replica on $1 did not finish its sync" >&2
  return 1
}

redis-cli -p "$RPORT" debug populate "$KEYS" key 16 >/dev/null
python3 - "$RPORT" "$COLL" <<'PY'
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
def cmd(*a):
    out = b"*%d\r\n" % len(a)
    for x in a:
        x = str(x).encode()
        out += b"$%d\r\n%s\r\n" % (len(x), x)
    return out
s = socket.create_connection(("127.0.0.1", port))
batch = []
for i in range(n):
    members = [str(j) for j in range(100)]
    batch.append(cmd("HSET", "h:%d" % i, *[x for j in range(100) for x in ("f%d" % j, "v%d" % j)]))
    batch.append(cmd("SADD", "s:%d" % i, *["m%d" % j for j in range(100)]))
    batch.append(cmd("ZADD", "z:%d" % i, *[x for j in range(100) for x in (j * 1.5, "m%d" % j)]))
    batch.append(cmd("RPUSH", "l:%d" % i, *members))
    if len(batch) >= 400 or i == n - 1:
        s.sendall(b"".join(batch))
        want = len(batch)
        buf = b""
        while buf.count(b"\r\n") < want:
            buf += s.recv(1 << 20)
        batch = []
PY
total=$(redis-cli -p "$RPORT" dbsize)
printf '\nMigration full sync on %s cores, %s GiB, %s; %s keys (%s strings of 16 bytes, %s each of hash/set/zset/list with 100 members)\n' \
  "$(nproc)" "$(free -g | awk '/Mem:/ {print $2}')" "$(date -u +%F)" "$total" "$KEYS" "$COLL"

for mode in yes no; do
  redis-cli -p "$RPORT" config set repl-diskless-sync "$mode" >/dev/null
  for kind in redis abacus; do
    port=$(free_port)
    if [ "$kind" = redis ]; then start_redis "$port"; else start_abacus "$port" --appendonly no --save ""; fi
    t0=$(date +%s.%N)
    redis-cli -p "$port" replicaof 127.0.0.1 "$RPORT" >/dev/null
    wait_synced "$port"
    t1=$(date +%s.%N)
    got=$(redis-cli -p "$port" dbsize)
    secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
    printf '  diskless=%-3s %-6s replica: %6.2f s (%s keys)\n' "$mode" "$kind" "$secs" "$got"
    eval "t_${kind}_${mode}=$secs"
    redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  done
  r=$(eval echo "\$t_redis_${mode}"); a=$(eval echo "\$t_abacus_${mode}")
  printf '  diskless=%-3s Abacus/Redis time: %.2fx\n' "$mode" "$(awk -v a="$a" -v r="$r" 'BEGIN {print a / r}')"
done
