#!/usr/bin/env bash
# Cluster operations, Abacus against redis-server 7.0 in the same run, six nodes per system
# (three primaries, one replica each, `redis-cli --cluster create --cluster-replicas 1`,
# cluster-node-timeout 5000, no persistence):
#  (a) reshard: K keys spread evenly over the 16,384 slots (hash tags, K/16384 per slot,
#      loaded with `redis-cli --pipe`), then the time of
#      `redis-cli --cluster reshard --cluster-from ID --cluster-to ID --cluster-slots 4096
#      --cluster-yes` from one primary to another; it moves about K*4096/16384 keys (printed,
#      counted from the source primary's DBSIZE before and after);
#  (b) failover: kill -9 of a primary, then the time until a client's SET of a key in that
#      primary's slots succeeds again (`redis-cli -c` through another primary, every 50 ms).
# Prints a table with both systems and Abacus/Redis.
#
#   bench/cluster_ops.sh                 # K=10,000,000 keys (the issue's size)
#   KEYS=1000000 bench/cluster_ops.sh    # smaller load
#   FAILOVERS=3 bench/cluster_ops.sh     # failover measured on 3 fresh clusters per system
set -euo pipefail
source "$(dirname "$0")/lib.sh"
K=${KEYS:-10000000}
SLOTS=${SLOTS:-4096}
NODE_TIMEOUT=${NODE_TIMEOUT:-5000}
FAILOVERS=${FAILOVERS:-1}

# Six client ports whose bus ports (+10000) are free too.
ports6() {
  local out=() p
  while [ ${#out[@]} -lt 6 ]; do
    p=$((20000 + RANDOM % 10000))
    case " ${out[*]:-} " in *" $p "*) continue ;; esac
    if python3 -c "import socket,sys; [socket.socket().bind(('127.0.0.1', q)) for q in ($p, $p + 10000)]" 2>/dev/null; then
      out+=("$p")
    fi
  done
  echo "${out[@]}"
}

# start_system abacus|redis: six nodes on fresh ports, made into a cluster; sets NODES.
start_system() {
  local side=$1 p addrs=()
  read -r -a NODES <<<"$(ports6)"
  for p in "${NODES[@]}"; do
    if [ "$side" = abacus ]; then
      start_abacus "$p" --appendonly no --save '' --cluster-enabled yes --cluster-node-timeout "$NODE_TIMEOUT"
    else
      start_redis "$p" --cluster-enabled yes --cluster-node-timeout "$NODE_TIMEOUT"
    fi
    addrs+=("127.0.0.1:$p")
  done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >/dev/null
  for p in "${NODES[@]}"; do
    for _ in $(seq 1 300); do
      redis-cli -p "$p" cluster info | grep -q cluster_state:ok && break
      sleep 0.1
    done
  done
  # Wait for every replica's first sync (Redis delays a diskless sync by 5 s); a replica
  # killed mid-sync cannot fail over.
  local info
  for p in "${NODES[@]}"; do
    for _ in $(seq 1 600); do
      info=$(redis-cli -p "$p" info replication | tr -d '\r')
      case "$info" in *role:slave*master_link_status:up*|*role:master*) break ;; esac
      sleep 0.1
    done
  done
}

# Primaries of the cluster that NODES[0] is in: "port id" lines, ordered by first slot.
primaries() {
  redis-cli -p "${NODES[0]}" cluster nodes | tr -d '\r' |
    awk '$3 ~ /master/ && $3 !~ /fail/ && $9 != "" {split($2, a, "[:@]"); split($9, s, "-"); print s[1], a[2], $1}' |
    sort -n | awk '{print $2, $3}'
}

# A hash tag for each slot (tags.txt: slot tag), computed once.
python3 - "$BENCH_TMP/tags.txt" <<'PY'
import sys
def crc16(b):
    c = 0
    for x in b:
        c ^= x << 8
        for _ in range(8):
            c = ((c << 1) ^ 0x1021) if c & 0x8000 else (c << 1)
            c &= 0xFFFF
    return c
tags, i = {}, 0
while len(tags) < 16384:
    t = str(i).encode(); s = crc16(t) % 16384
    tags.setdefault(s, t.decode()); i += 1
with open(sys.argv[1], "w") as f:
    for s in range(16384): f.write(f"{s} {tags[s]}\n")
PY

# load PORT: SET of keys {tag(s)}:i (slot s = i mod 16384) for the slots PORT serves.
load() {
  local port=$1
  redis-cli -p "$port" cluster nodes | tr -d '\r' | awk '/myself/ {for (i = 9; i <= NF; i++) print $i}' >"$BENCH_TMP/ranges-$port"
  python3 - "$K" "$BENCH_TMP/tags.txt" "$BENCH_TMP/ranges-$port" <<'PY' | redis-cli -p "$port" --pipe >/dev/null
import sys
k = int(sys.argv[1])
tags = dict(l.split() for l in open(sys.argv[2]))
out = sys.stdout.buffer
for r in open(sys.argv[3]).read().split():
    if r.startswith("["): continue
    a, _, b = r.partition("-"); b = b or a
    for s in range(int(a), int(b) + 1):
        tag = tags[str(s)]
        buf = []
        for i in range(s, k, 16384):
            key = "{%s}:%d" % (tag, i)
            buf.append("*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$10\r\nvalue%05d\r\n" % (len(key), key, i % 100000))
        out.write("".join(buf).encode())
PY
}

now() { date +%s.%N; }
declare -A T MOVED FO

reshard() {
  local side=$1 src dst sid did before after t0 t1 p
  start_system "$side"
  t0=$(now)
  while read -r p _; do load "$p"; done < <(primaries)
  t1=$(now)
  local total=0
  while read -r p _; do total=$((total + $(redis-cli -p "$p" dbsize))); done < <(primaries)
  printf '%-6s loaded %d keys in %.1f s\n' "$side" "$total" "$(echo "$t1 - $t0" | bc -l)"
  read -r src sid dst did <<<"$(primaries | head -2 | tr '\n' ' ')"
  before=$(redis-cli -p "$src" dbsize)
  t0=$(now)
  redis-cli --cluster reshard "127.0.0.1:$src" --cluster-from "$sid" --cluster-to "$did" \
    --cluster-slots "$SLOTS" --cluster-yes >"$BENCH_TMP/reshard-$side.log" 2>&1
  t1=$(now)
  after=$(redis-cli -p "$src" dbsize)
  T[$side]=$(echo "$t1 - $t0" | bc -l)
  MOVED[$side]=$((before - after))
  printf '%-6s reshard of %d slots, %d keys moved: %.2f s\n' "$side" "$SLOTS" "${MOVED[$side]}" "${T[$side]}"
  local check
  check=$(redis-cli --cluster check "127.0.0.1:$src" 2>&1 || true)
  case "$check" in
    *'All 16384 slots covered'*) ;;
    *) echo "$side: cluster check failed after reshard:" >&2; echo "$check" >&2; exit 1 ;;
  esac
}

# failover SIDE: kill -9 the first primary, time until a SET to a key of its slots succeeds.
failover() {
  local side=$1 victim vid other slot key pid t0 t1 r
  start_system "$side"
  read -r victim vid < <(primaries | head -1)
  other=$(primaries | sed -n 2p | cut -d' ' -f1)
  slot=$(redis-cli -p "$victim" cluster nodes | tr -d '\r' | awk '/myself/ {split($9, s, "-"); print s[1]}')
  key="{$(awk -v s="$slot" '$1 == s {print $2}' "$BENCH_TMP/tags.txt")}:failover"
  [ "$(redis-cli -c -p "$other" set "$key" before)" = OK ]
  pid=$(pid_of_port "$victim")
  t0=$(now)
  kill -9 "$pid"; wait "$pid" 2>/dev/null || true
  while :; do
    r=$(timeout 1 redis-cli -c -p "$other" set "$key" after 2>/dev/null || true)
    [ "$r" = OK ] && break
    if [ "$(echo "$(now) - $t0 > 120" | bc -l)" = 1 ]; then echo "$side: no failover in 120 s" >&2; exit 1; fi
    sleep 0.05
  done
  t1=$(now)
  r=$(echo "$t1 - $t0" | bc -l)
  printf '%-6s failover after kill -9: write succeeds again after %.2f s\n' "$side" "$r"
  FO[$side]="${FO[$side]:-} $r"
}

stop_system() {
  local p pid
  for p in "${NODES[@]}"; do
    pid=$(pid_of_port "$p" 2>/dev/null || true)
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  done
  sleep 1
}

printf 'cluster operations, 6 nodes per system, cluster-node-timeout %s, K=%s keys, %s slots, %s\n' \
  "$NODE_TIMEOUT" "$K" "$SLOTS" "$(date -u '+%F %H:%M UTC')"
for side in abacus redis; do reshard "$side"; stop_system; done
for _ in $(seq 1 "$FAILOVERS"); do
  for side in abacus redis; do failover "$side"; stop_system; done
done
# shellcheck disable=SC2086
fa=$(median ${FO[abacus]}); fr=$(median ${FO[redis]})
printf '\n%-28s %12s %12s %8s\n' measure abacus redis ratio
printf '%-28s %12.2f %12.2f %8.3f\n' "reshard ${SLOTS} slots (s)" "${T[abacus]}" "${T[redis]}" "$(echo "${T[abacus]} / ${T[redis]}" | bc -l)"
printf '%-28s %12d %12d\n' "keys moved" "${MOVED[abacus]}" "${MOVED[redis]}"
printf '%-28s %12.2f %12.2f %8.3f\n' "failover after kill -9 (s)" "$fa" "$fr" "$(echo "$fa / $fr" | bc -l)"
