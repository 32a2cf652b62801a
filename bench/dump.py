#!/usr/bin/env python3
"""DUMP and RESTORE of large values, Redis and Abacus side by side (bench/dump.sh runs it).

For each value kind, the same commands build the value in both servers; then DUMP is timed
(best of 3), its payload size reported, and RESTORE of each server's own payload into a new
key timed (best of 3). Also checks that each server's payload restores in the other one.
Prints one row per kind with the Abacus/Redis time ratios.
"""
import argparse
import time

import redis

N = 1_000_000


def build(r, kind):
    r.flushall()
    p = r.pipeline(transaction=False)
    if kind == "string 8 MB":
        p.set("k", b"0123456789abcdef" * (1 << 19))
    for start in range(0, N if kind != "string 8 MB" else 0, 1000):
        chunk = range(start, start + 1000)
        if kind == "list 1M":
            p.rpush("k", *("item:%d" % i for i in chunk))
        elif kind == "set 1M ints":
            p.sadd("k", *(i * 7 for i in chunk))
        elif kind == "set 1M strings":
            p.sadd("k", *("m:%d" % i for i in chunk))
        elif kind == "hash 1M":
            p.hset("k", mapping={"f:%d" % i: i for i in chunk})
        elif kind == "zset 1M":
            p.zadd("k", {"m:%d" % i: i / 3.0 for i in chunk})
    p.execute()


def best(f, rounds=3):
    t = []
    for _ in range(rounds):
        s = time.perf_counter()
        f()
        t.append(time.perf_counter() - s)
    return min(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--abacus-port", type=int, required=True)
    a = ap.parse_args()
    servers = {"redis": redis.Redis(port=a.redis_port), "abacus": redis.Redis(port=a.abacus_port)}
    print("%-16s %10s %10s %8s %10s %10s %8s %12s %12s" % (
        "value", "dump R ms", "dump A ms", "A/R", "rest. R ms", "rest. A ms", "A/R",
        "payload R", "payload A"))
    for kind in ["string 8 MB", "list 1M", "set 1M ints", "set 1M strings", "hash 1M", "zset 1M"]:
        row = {}
        for name, r in servers.items():
            build(r, kind)
            payload = r.dump("k")
            dump_s = best(lambda: r.dump("k"))
            restore_s = best(lambda: (r.delete("copy"), r.restore("copy", 0, payload)))
            row[name] = (dump_s, restore_s, payload)
        # Each payload restores in the other server.
        servers["redis"].restore("from-abacus", 0, row["abacus"][2])
        servers["abacus"].restore("from-redis", 0, row["redis"][2])
        (dr, rr, pr), (da, ra, pa) = row["redis"], row["abacus"]
        print("%-16s %10.1f %10.1f %8.2f %10.1f %10.1f %8.2f %12d %12d" % (
            kind, dr * 1e3, da * 1e3, da / dr, rr * 1e3, ra * 1e3, ra / rr, len(pr), len(pa)))


if __name__ == "__main__":
    main()
