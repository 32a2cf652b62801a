#!/usr/bin/env bash
# Issue 3's small-key memory figure over the real server: 10 million keys of about 10 bytes
# (`key:0` .. `key:9999999`) with 16-byte values, loaded by `DEBUG POPULATE 10000000 key 16`
# into Redis and Abacus side by side (no persistence). Reports RSS growth per key right after
# the load (freed table segments still resident) and SETTLE seconds later (jemalloc's
# background threads return freed pages within its 10-second decay; Redis's jemalloc too),
# and INFO's used_memory growth per key. Target (issue 3): at most 40 B per key of RSS; Redis
# measured 109 on this kind of machine.
#
#   bench/keys10m.sh                 10M keys, SETTLE=12
#   N=1000000 bench/keys10m.sh       quicker
set -euo pipefail
source "$(dirname "$0")/lib.sh"
N=${N:-10000000}
SETTLE=${SETTLE:-12}

# Redis 7 refuses DEBUG unless enabled; Abacus allows it on loopback by default.
RPORT=$(free_port); start_redis "$RPORT" --enable-debug-command local
APORT=$(free_port); start_abacus "$APORT" --appendonly no --save "" ${ABACUS_ARGS:-}

# mem PORT -> "used_memory rss_kb"
mem() {
  local pid u
  pid=$(pid_of_port "$1")
  u=$(redis-cli -p "$1" info memory | tr -d '\r' | awk -F: '/^used_memory:/ {print $2}')
  echo "$u $(rss_kb "$pid")"
}

declare -A row
for target in redis abacus; do
  port=$RPORT; [ "$target" = abacus ] && port=$APORT
  read -r u0 r0 <<<"$(mem "$port")"
  t0=$(date +%s.%N)
  redis-cli -p "$port" debug populate "$N" key 16 >/dev/null
  t1=$(date +%s.%N)
  read -r _ r1 <<<"$(mem "$port")"
  sleep "$SETTLE"
  read -r u2 r2 <<<"$(mem "$port")"
  keys=$(redis-cli -p "$port" dbsize)
  row[$target]=$(python3 -c "
k=$keys
print(f'{k:>10} {($t1-$t0):8.1f} {($r1-$r0)*1024/k:12.1f} {($r2-$r0)*1024/k:12.1f} {($u2-$u0)/k:12.1f}')")
done

printf '\n10M small keys on %s cores, %s GiB, %s: DEBUG POPULATE %s key 16, settle %ss\n' \
  "$(nproc)" "$(free -g | awk '/Mem:/ {print $2}')" "$(date +%F)" "$N" "$SETTLE"
printf '%-8s %10s %8s %12s %12s %12s\n' server keys load_s B/key_RSS B/key_settled B/key_used
for target in redis abacus; do printf '%-8s %s\n' "$target" "${row[$target]}"; done
python3 -c "
r=[float(x) for x in '${row[redis]}'.split()]; a=[float(x) for x in '${row[abacus]}'.split()]
print(f'Abacus/Redis memory per key: right after {a[2]/r[2]:.2f}x, settled {a[3]/r[3]:.2f}x; Abacus settled {a[3]:.1f} B/key (target <= 40)')"
