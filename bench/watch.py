#!/usr/bin/env python3
"""WATCH contention client: optimistic-locking retry loops against Redis and Abacus.

Called by bench/watch.sh, which starts the servers. CLIENTS processes (one connection each)
each make PER_CLIENT increments of KEYS shared counters, every increment a retry loop of
WATCH k; GET k; MULTI; SET k v+1; EXEC (an INCR built from a read and a write, as an
application holding logic between the two would). Reports, per server, the wall time, the
EXECs that aborted (retries) and checks that every counter is exact. Rounds alternate
between the servers; the medians are printed.
"""

import argparse
import multiprocessing
import statistics
import time


from resp import Conn  # noqa: E402  (bench/resp.py, beside this file)


def worker(port, n, keys, per_client, start, out):
    c = Conn(port)
    start.wait()
    retries = 0
    for j in range(per_client):
        key = "watch:%d" % ((n + j) % keys)
        while True:
            _, value = c.call(("WATCH", key), ("GET", key))
            done = c.call(("MULTI",), ("SET", key, int(value or 0) + 1), ("EXEC",))[2]
            if done is not None:
                break
            retries += 1
    out.put(retries)


def run(port, clients, keys, per_client):
    Conn(port).call(("FLUSHALL",))
    start = multiprocessing.Barrier(clients + 1)
    out = multiprocessing.Queue()
    procs = [multiprocessing.Process(target=worker, args=(port, n, keys, per_client, start, out)) for n in range(clients)]
    for p in procs:
        p.start()
    start.wait()
    t0 = time.monotonic()
    retries = sum(out.get() for _ in procs)
    wall = time.monotonic() - t0
    for p in procs:
        p.join()
    values = Conn(port).call(*[("GET", "watch:%d" % k) for k in range(keys)])
    total = sum(int(v or 0) for v in values)
    assert total == clients * per_client, "lost increments: %d of %d" % (total, clients * per_client)
    return wall, retries


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--abacus-port", type=int, required=True)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--keys", type=int, default=4)
    ap.add_argument("--per-client", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    res = {"redis": [], "abacus": []}
    for _ in range(a.rounds):
        for name, port in (("redis", a.redis_port), ("abacus", a.abacus_port)):
            res[name].append(run(port, a.clients, a.keys, a.per_client))
    print("WATCH contention: %d clients, %d keys, %d increments each (GET+SET retry loops), %d rounds"
          % (a.clients, a.keys, a.per_client, a.rounds))
    print("%-8s %10s %10s %12s" % ("server", "wall_s", "retries", "increments/s"))
    for name, runs in res.items():
        wall = statistics.median(w for w, _ in runs)
        retries = statistics.median(r for _, r in runs)
        print("%-8s %10.2f %10d %12.0f" % (name, wall, retries, a.clients * a.per_client / wall))


if __name__ == "__main__":
    main()
