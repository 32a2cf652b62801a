#!/usr/bin/env bash
# BITOP over big bitmaps: Debian's Redis and Abacus side by side. KEYS bitmaps of BITS bits
# each (default 30 x 100,000,000 bits = 12.5 MB each), all under one `{bm}` tag so Redis
# Cluster semantics do not matter (Abacus still runs them on one shard). Set-up: SETBIT of the
# last bit (so the string has its full length), then the whole string filled with random
# bytes by SETRANGE in 1 MB chunks, pipelined; both servers get the same bytes. Then
# `BITOP AND {bm}dest k1..kN` and `BITOP OR {bm}dest k1..kN` RUNS times each on each server,
# alternating servers, timed from the client (send to reply); prints the median ms and the
# Abacus/Redis ratio (below 1: Abacus faster).
#
#   bench/bitop.sh                          defaults: KEYS=30 BITS=100000000 RUNS=3
#   KEYS=10 BITS=20000000 bench/bitop.sh    quicker, less memory
set -euo pipefail
source "$(dirname "$0")/lib.sh"
KEYS=${KEYS:-30}
BITS=${BITS:-100000000}
RUNS=${RUNS:-3}

start_pair
echo "redis $(redis-server --version | awk '{print $3}') on $RPORT, abacus on $APORT;" \
  "$KEYS keys x $BITS bits, $RUNS runs"

BENCH_DIR="$ROOT/bench" python3 - "$RPORT" "$APORT" "$KEYS" "$BITS" "$RUNS" <<'PY'
import os, socket, statistics, sys, time

rport, aport, nkeys, nbits, runs = map(int, sys.argv[1:])
CHUNK = 1 << 20

sys.path.insert(0, os.environ["BENCH_DIR"])
from resp import Conn, command as resp  # bench/resp.py

def call(c, *args):
    return c.call(args)[0]

servers = {"redis": Conn(rport), "abacus": Conn(aport)}
keys = [b"{bm}k%d" % i for i in range(nkeys)]
nbytes = (nbits + 7) // 8
t0 = time.perf_counter()
for k in keys:
    for c in servers.values():
        call(c, "DEL", k)
        call(c, "SETBIT", k, nbits - 1, 1)
    pending = 0
    for off in range(0, nbytes, CHUNK):
        chunk = os.urandom(min(CHUNK, nbytes - off))
        cmd = resp("SETRANGE", k, off, chunk)
        for c in servers.values():
            c.send(cmd)
        pending += 1
    for c in servers.values():
        for _ in range(pending):
            c.reply()
for name, c in servers.items():
    lens = {int(call(c, "STRLEN", k)) for k in keys}
    assert lens == {nbytes}, (name, lens)
print("set-up: %.1f s" % (time.perf_counter() - t0))

for op in ("AND", "OR"):
    ms = {name: [] for name in servers}
    replies = {}
    for _ in range(runs):
        for name, c in servers.items():
            t = time.perf_counter()
            reply = call(c, "BITOP", op, "{bm}dest", *keys)
            ms[name].append((time.perf_counter() - t) * 1000)
            replies[name] = reply
    assert replies["redis"] == replies["abacus"] == b"%d" % nbytes, replies
    # Same result bytes on both servers: compare a digest of a few slices.
    probes = [call(servers[n], "BITCOUNT", "{bm}dest") for n in servers]
    assert probes[0] == probes[1], probes
    r, a = statistics.median(ms["redis"]), statistics.median(ms["abacus"])
    print("BITOP %-3s {bm}dest + %d keys: redis %8.1f ms   abacus %8.1f ms   abacus/redis %.3f"
          % (op, nkeys, r, a, a / r))
PY
