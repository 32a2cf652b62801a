#!/usr/bin/env bash
# Lists and sorted sets (issue 25): Debian's Redis and Abacus side by side on this machine.
#
# 1. redis-benchmark -t lpush,rpush,lpop,rpop,lrange_100,zadd,zpopmin -c 50 at -P 1 and
#    -P 16, alternating servers every round (median of the rounds, Abacus/Redis ratio).
# 2. Memory per element: a 1,000,000-entry list of small integers (RPUSH 0..999999) and a
#    1,000,000-member sorted set (members "m:<i>", random scores), each built by one
#    pipelined client; INFO memory used_memory before and after, per element, and the ratio.
# 3. ZRANGEBYSCORE of 100 members out of ZSET_BIG (10,000,000) members with scores 0..N-1:
#    `ZRANGEBYSCORE big <random> +inf LIMIT 0 100` by redis-benchmark, -c 50 -P 1, requests/s.
#
# Pub/sub fan-out has its own script: bench/pubsub.sh.
#
#   bench/types.sh                          defaults: N=1000000 ROUNDS=3 ZSET_BIG=10000000
#   N=200000 ROUNDS=1 ZSET_BIG=1000000 bench/types.sh     quicker
set -euo pipefail
source "$(dirname "$0")/lib.sh"
N=${N:-1000000}
ROUNDS=${ROUNDS:-3}
ZSET_BIG=${ZSET_BIG:-10000000}
TESTS=lpush,rpush,lpop,rpop,lrange_100,zadd,zpopmin

start_pair
echo "redis $(redis-server --version | awk '{print $3}') on $RPORT, abacus on $APORT; N=$N rounds=$ROUNDS"

declare -A results
for P in 1 16; do
  for round in $(seq 1 "$ROUNDS"); do
    for target in redis abacus; do
      port=$RPORT; [ "$target" = abacus ] && port=$APORT
      redis-cli -p "$port" flushall >/dev/null
      redis-benchmark -p "$port" -t "$TESTS" -r 100000 -n "$N" -c 50 -P "$P" -q --csv > "$BENCH_TMP/out.csv"
      while IFS=, read -r test rps _; do
        test=${test//\"/}; rps=${rps//\"/}
        [ "$test" = test ] && continue
        results[$target,$P,$test]+="$rps "
      done < "$BENCH_TMP/out.csv"
    done
  done
done

printf '\nredis-benchmark on %s cores, %s GiB, %s\n' "$(nproc)" "$(free -g | awk '/Mem:/ {print $2}')" "$(date -u +%F)"
printf '%-10s %-40s %14s %14s %8s\n' pipeline test redis_ops/s abacus_ops/s ratio
for P in 1 16; do
  for key in "${!results[@]}"; do
    IFS=, read -r target p test <<<"$key"
    [ "$target" = redis ] && [ "$p" = "$P" ] || continue
    r=$(median ${results[redis,$P,$test]}); a=$(median ${results[abacus,$P,$test]})
    printf '%-10s %-40s %14.0f %14.0f %8.2f\n' "-P $P" "$test" "$r" "$a" "$(echo "$a / $r" | bc -l)"
  done | sort -k3
done

BENCH_DIR="$ROOT/bench" python3 - "$RPORT" "$APORT" "$ZSET_BIG" <<'PY'
import os, random, sys

rport, aport, big = map(int, sys.argv[1:])
sys.path.insert(0, os.environ["BENCH_DIR"])
from resp import Conn, command  # bench/resp.py

def used(c):
    info = c.call(("INFO", "memory"))[0].decode()
    return int(next(l.split(":")[1] for l in info.split("\r\n") if l.startswith("used_memory:")))

def fill(c, commands, depth=64):
    """Sends the commands pipelined, `depth` in flight, and reads every reply."""
    inflight = 0
    for cmd in commands:
        c.send(command(*cmd))
        inflight += 1
        if inflight >= depth:
            c.reply()
            inflight -= 1
    for _ in range(inflight):
        c.reply()

ELEMENTS = 1_000_000
PER_CMD = 1000
rng = random.Random(7)
scores = [rng.random() * 1e6 for _ in range(ELEMENTS)]
per = {}
for name, port in (("redis", rport), ("abacus", aport)):
    c = Conn(port)
    c.call(("FLUSHALL",))
    base = used(c)
    fill(c, (("RPUSH", "list", *range(i, i + PER_CMD)) for i in range(0, ELEMENTS, PER_CMD)))
    list_bytes = (used(c) - base) / ELEMENTS
    c.call(("DEL", "list"))
    base = used(c)
    def zadds():
        for i in range(0, ELEMENTS, PER_CMD):
            args = ["ZADD", "zset"]
            for j in range(i, i + PER_CMD):
                args += [repr(scores[j]), "m:%d" % j]
            yield args
    fill(c, zadds())
    zset_bytes = (used(c) - base) / ELEMENTS
    c.call(("DEL", "zset"))
    per[name] = (list_bytes, zset_bytes)

print("\nmemory per element (INFO used_memory delta / 1,000,000)")
print("%-44s %10s %10s %8s" % ("structure", "redis", "abacus", "ratio"))
for i, what in enumerate(("list of small integers (RPUSH 0..999999)", "sorted set (m:<i>, random scores)")):
    r, a = per["redis"][i], per["abacus"][i]
    print("%-44s %10.1f %10.1f %8.2f" % (what, r, a, a / r))

# The big sorted set for ZRANGEBYSCORE: scores 0..big-1.
for port in (rport, aport):
    c = Conn(port)
    c.call(("FLUSHALL",))
    def big_adds():
        for i in range(0, big, PER_CMD):
            args = ["ZADD", "big"]
            for j in range(i, min(i + PER_CMD, big)):
                args += [j, "member:%d" % j]
            yield args
    fill(c, big_adds())
    print("port %d: big has %s members" % (port, c.call(("ZCARD", "big"))[0].decode()))
PY

echo
printf 'ZRANGEBYSCORE big <random> +inf LIMIT 0 100 out of %s members, -c 50 -P 1\n' "$ZSET_BIG"
declare -A zr
for round in $(seq 1 "$ROUNDS"); do
  for target in redis abacus; do
    port=$RPORT; [ "$target" = abacus ] && port=$APORT
    rps=$(redis-benchmark -p "$port" -r "$((ZSET_BIG - 100))" -n 200000 -c 50 -P 1 -q --csv \
      ZRANGEBYSCORE big __rand_int__ +inf LIMIT 0 100 | awk -F, 'NR==2 {gsub(/"/,"",$2); print $2}')
    zr[$target]+="$rps "
  done
done
r=$(median ${zr[redis]}); a=$(median ${zr[abacus]})
printf '%14s %14s %8s\n' redis_ops/s abacus_ops/s ratio
printf '%14.0f %14.0f %8.2f\n' "$r" "$a" "$(echo "$a / $r" | bc -l)"
