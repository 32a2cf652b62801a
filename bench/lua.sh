#!/usr/bin/env bash
# Scripts (issue 51): EVALSHA of a small script (GET + INCR + EXPIRE on one key) and of a
# 3-key script whose keys fall on different shards, with redis-benchmark at -P 1 and -P 16,
# against Debian's Redis and Abacus side by side, rounds alternated; then the memory of a
# script cache of 10,000 scripts on each. Prints ops/s (median), Abacus/Redis, and each
# server's CPU per request.
#
#   bench/lua.sh                      defaults: N=300000 requests, ROUNDS=3
#   N=100000 ROUNDS=1 bench/lua.sh    quicker
set -euo pipefail
source "$(dirname "$0")/lib.sh"
N=${N:-300000}
ROUNDS=${ROUNDS:-3}
ABACUS_ARGS=${ABACUS_ARGS:-}

start_pair
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
RPID=$(pid_of_port "$RPORT"); APID=$(pid_of_port "$APORT")
TICK=$(getconf CLK_TCK)

ONE="local v = redis.call('get', KEYS[1]); redis.call('incr', KEYS[1]); redis.call('expire', KEYS[1], 1000); return v"
THREE="redis.call('incr', KEYS[1]); redis.call('incr', KEYS[2]); return redis.call('incr', KEYS[3])"
declare -A sha
for port in "$RPORT" "$APORT"; do
  sha[one]=$(redis-cli -p "$port" script load "$ONE")
  sha[three]=$(redis-cli -p "$port" script load "$THREE")
done

declare -A results cpu
for P in 1 16; do
  for round in $(seq 1 "$ROUNDS"); do
    for target in redis abacus; do
      port=$RPORT; pid=$RPID; [ "$target" = abacus ] && { port=$APORT; pid=$APID; }
      for s in one three; do
        if [ "$s" = one ]; then keys=(1 "k:__rand_int__"); else keys=(3 "a:__rand_int__" "b:__rand_int__" "c:__rand_int__"); fi
        s0=$(cpu_ticks "$pid")
        rps=$(redis-benchmark -p "$port" -n "$N" -c 50 -P "$P" -r 100000 -q --csv evalsha "${sha[$s]}" "${keys[@]}" | awk -F, 'NR==2 {gsub(/"/,"",$2); print $2}')
        s1=$(cpu_ticks "$pid")
        results[$target,$P,$s]+="$rps "
        cpu[$target,$P,$s]+="$(echo "($s1 - $s0) * 1000000 / $TICK / $N" | bc -l) "
      done
    done
  done
done

# A cache of 10,000 distinct scripts: used_memory after minus before.
cache_bytes() {
  local port=$1 before after
  redis-cli -p "$port" script flush >/dev/null
  before=$(redis-cli -p "$port" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r')
  python3 - "$port" <<'PY'
import socket, sys
port = int(sys.argv[1])
s = socket.create_connection(("127.0.0.1", port))
buf = bytearray()
for i in range(10000):
    body = ("return {KEYS[1], ARGV[1], %d, 'script number %d'}" % (i, i)).encode()
    buf += b"*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n$%d\r\n%s\r\n" % (len(body), body)
s.sendall(buf)
need, got = 10000, 0
data = b""
while got < need:
    data += s.recv(1 << 16)
    got = data.count(b"\r\n") // 2
PY
  after=$(redis-cli -p "$port" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r')
  echo $((after - before))
}
rcache=$(cache_bytes "$RPORT"); acache=$(cache_bytes "$APORT")

printf '\nScripts on %s cores, %s GiB, %s; N=%s, rounds=%s, abacus args: %s\n' \
  "$(nproc)" "$(free -g | awk '/Mem:/ {print $2}')" "$(date -u +%F)" "$N" "$ROUNDS" "${ABACUS_ARGS:-default}"
printf '%-10s %-22s %14s %14s %8s %12s %12s\n' pipeline script redis_ops/s abacus_ops/s ratio redis_us/req abacus_us/req
for P in 1 16; do
  for s in one three; do
    label="GET+INCR+EXPIRE 1 key"; [ "$s" = three ] && label="3 INCRs, 3 shards"
    r=$(median ${results[redis,$P,$s]}); a=$(median ${results[abacus,$P,$s]})
    printf '%-10s %-22s %14.0f %14.0f %8.2f %12.2f %12.2f\n' "-P $P" "$label" "$r" "$a" "$(echo "$a / $r" | bc -l)" \
      "$(median ${cpu[redis,$P,$s]})" "$(median ${cpu[abacus,$P,$s]})"
  done
done
printf 'script cache of 10,000 scripts: redis %s bytes, abacus %s bytes (used_memory after - before)\n' "$rcache" "$acache"
