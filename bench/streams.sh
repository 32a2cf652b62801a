#!/usr/bin/env bash
# Streams (issue 23): memory per entry and XADD throughput, Debian's Redis and Abacus side by
# side on this machine.
#
# 1. Memory per entry for small events (3-4 short fields), two shapes, each loaded by one
#    pipelined client with explicit IDs (INFO memory used_memory before and after):
#    - per-user streams: USERS users (default 100,000) with 20 events each on average (5 to
#      35), `channel` (8 channels), `event` (impression/click/visit, a purchase for 3% of the
#      users, with an `amount`), `campaign` (40 campaigns), events minutes to a day apart;
#    - one stream of ENTRIES events (default 1,000,000) of the same shape, 1 ms to 5 s apart.
# 2. XADD throughput: redis-benchmark `XADD user:__rand_int__ * channel google event click
#    campaign c7` over 100,000 keys, -c 50 at -P 1 and -P 16, alternating servers every round
#    (median of ROUNDS rounds, Abacus/Redis ratio).
#
#   bench/streams.sh                               defaults: USERS=100000 ENTRIES=1000000 N=1000000 ROUNDS=3
#   USERS=20000 ENTRIES=200000 N=200000 ROUNDS=1 bench/streams.sh      quicker
set -euo pipefail
source "$(dirname "$0")/lib.sh"
USERS=${USERS:-100000}
ENTRIES=${ENTRIES:-1000000}
N=${N:-1000000}
ROUNDS=${ROUNDS:-3}

start_pair
echo "redis $(redis-server --version | awk '{print $3}') on $RPORT, abacus on $APORT; USERS=$USERS ENTRIES=$ENTRIES N=$N rounds=$ROUNDS"

BENCH_DIR="$ROOT/bench" python3 - "$RPORT" "$APORT" "$USERS" "$ENTRIES" <<'PY'
import os, random, sys

rport, aport, users, entries = map(int, sys.argv[1:])
sys.path.insert(0, os.environ["BENCH_DIR"])
from resp import Conn, command  # bench/resp.py

CHANNELS = ["google", "facebook", "email", "direct", "tiktok", "bing", "affiliate", "display"]
KINDS = ["impression", "impression", "click", "visit"]
T0 = 1_700_000_000_000

def used(c):
    info = c.call(("INFO", "memory"))[0].decode()
    return int(next(l.split(":")[1] for l in info.split("\r\n") if l.startswith("used_memory:")))

def fill(c, commands, depth=256):
    inflight = 0
    for cmd in commands:
        c.send(command(*cmd))
        inflight += 1
        if inflight >= depth:
            c.reply()
            inflight -= 1
    for _ in range(inflight):
        c.reply()

def event(rng, purchase):
    fields = ["channel", rng.choice(CHANNELS), "event", "purchase" if purchase else rng.choice(KINDS),
              "campaign", "c%d" % rng.randrange(40)]
    if purchase:
        fields += ["amount", "%d.%02d" % (rng.randrange(5, 500), rng.randrange(100))]
    return fields

def per_user(rng):
    for u in range(users):
        t = T0 + rng.randrange(86_400_000 * 10)
        n = rng.randint(5, 35)
        buyer = rng.random() < 0.03
        for i in range(n):
            t += rng.randrange(60_000, 86_400_000)
            yield ["XADD", "user:%d" % u, "%d-0" % t] + event(rng, buyer and i == n - 1)

def one_stream(rng):
    t = T0
    for i in range(entries):
        t += rng.randrange(1, 5000)
        yield ["XADD", "events", "%d-0" % t] + event(rng, rng.random() < 0.01)

results = {}
for name, port in (("redis", rport), ("abacus", aport)):
    c = Conn(port)
    c.call(("FLUSHALL",))
    base = used(c)
    count = [0]
    def counted(gen):
        for cmd in gen:
            count[0] += 1
            yield cmd
    fill(c, counted(per_user(random.Random(7))))
    per_user_bytes = (used(c) - base) / count[0]
    n_user_entries = count[0]
    c.call(("FLUSHALL",))
    base = used(c)
    fill(c, one_stream(random.Random(8)))
    one_bytes = (used(c) - base) / entries
    c.call(("FLUSHALL",))
    results[name] = (per_user_bytes, one_bytes)

print("\nmemory per entry (INFO used_memory delta / entries)")
print("%-58s %10s %10s %8s" % ("shape", "redis", "abacus", "ratio"))
for i, what in enumerate(("%d per-user streams, %d events" % (users, n_user_entries), "one stream of %d events" % entries)):
    r, a = results["redis"][i], results["abacus"][i]
    print("%-58s %10.1f %10.1f %8.2f" % (what, r, a, a / r))
PY

echo
printf 'XADD user:__rand_int__ * (3 fields) over 100,000 keys, -c 50, n=%s\n' "$N"
declare -A xr
for P in 1 16; do
  for round in $(seq 1 "$ROUNDS"); do
    for target in redis abacus; do
      port=$RPORT; [ "$target" = abacus ] && port=$APORT
      redis-cli -p "$port" flushall >/dev/null
      rps=$(redis-benchmark -p "$port" -r 100000 -n "$N" -c 50 -P "$P" -q --csv \
        XADD user:__rand_int__ '*' channel google event click campaign c7 | awk -F, 'NR==2 {gsub(/"/,"",$2); print $2}')
      xr[$target,$P]+="$rps "
    done
  done
done
printf '%-10s %14s %14s %8s\n' pipeline redis_ops/s abacus_ops/s ratio
for P in 1 16; do
  r=$(median ${xr[redis,$P]}); a=$(median ${xr[abacus,$P]})
  printf '%-10s %14.0f %14.0f %8.2f\n' "-P $P" "$r" "$a" "$(echo "$a / $r" | bc -l)"
done
