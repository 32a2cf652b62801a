"""Driver of bench/cluster_analytics.sh: loads the same series into the single node and the
cluster, then times the queries (see the script's header)."""

import os
import random
import signal
import statistics
import sys
import time

import redis
from redis.cluster import ClusterNode, RedisCluster

INSTRUMENTS = int(os.environ.get("INSTRUMENTS", 2000))
FIELDS = int(os.environ.get("FIELDS", 5))
DAYS = int(os.environ.get("DAYS", 30))
ROUNDS = int(os.environ.get("ROUNDS", 7))
SOURCES = ["exchange", "vendorA", "vendorB"]
DAY = 86_400_000
T0 = 1_700_006_400_000

single_port, ports = int(sys.argv[1]), [int(p) for p in sys.argv[2:]]
one = redis.Redis(port=single_port)
rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports], socket_timeout=60)
rnd = random.Random(7)

t = time.time()
pipes = (one.pipeline(transaction=False), rc.pipeline())
n = 0
for i in range(INSTRUMENTS):
    for f in range(FIELDS):
        for s in SOURCES:
            key = "px:%d:%d:%s" % (i, f, s)
            labels = ("LABELS", "instrument", "I%d" % i, "field", "f%d" % f, "source", s)
            samples = []
            v = 100.0
            for d in range(DAYS):
                v += rnd.uniform(-1, 1)
                if rnd.random() < 0.8:
                    samples += [key, T0 + d * DAY, round(v, 4)]
            for p in pipes:
                p.execute_command("TS.CREATE", key, *labels)
                if samples:
                    p.execute_command("TS.MADD", *samples)
            n += 1
            if n % 500 == 0:
                for p in pipes:
                    p.execute()
for p in pipes:
    p.execute()
print("loaded %d series (%d instruments x %d fields x %d sources, %d days) in %.1f s"
      % (n, INSTRUMENTS, FIELDS, len(SOURCES), DAYS, time.time() - t))

primaries = [p for p in ports if redis.Redis(port=p).execute_command("ROLE")[0] == b"master"]
for p in primaries:
    redis.Redis(port=p).execute_command("WAIT", 1, 30000)
asker = redis.Redis(port=primaries[0])
day = T0 + (DAYS // 2) * DAY
QUERIES = {
    "one-day waterfall": ("TS.WATERFALL", day, day, "SOURCES", *SOURCES, "FILTER", "source=(%s)" % ",".join(SOURCES)),
    "30-day MRANGE of one field": ("TS.MRANGE", "-", "+", "FILTER", "field=f0"),
    "MGET of everything": ("TS.MGET", "FILTER", "source=(%s)" % ",".join(SOURCES)),
}


def pid(port):
    return int(redis.Redis(port=port).info("server")["process_id"])


def cpu(ps):
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for p in ps:
        with open("/proc/%d/stat" % p) as f:
            fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / tick


single_pids, cluster_pids = [pid(single_port)], [pid(p) for p in ports]
print("%-28s %12s %12s %8s %14s %14s" % ("query", "single ms", "cluster ms", "ratio", "single cpu ms", "cluster cpu ms"))
for name, q in QUERIES.items():
    res = {}
    for label, c, pids in (("single", one, single_pids), ("cluster", asker, cluster_pids)):
        times = []
        c0 = cpu(pids)
        for _ in range(ROUNDS):
            t = time.perf_counter()
            reply = c.execute_command(*q)
            times.append((time.perf_counter() - t) * 1000)
        res[label] = (statistics.median(times), (cpu(pids) - c0) * 1000 / ROUNDS, reply)
    assert res["single"][2] == res["cluster"][2], name + ": the cluster's answer differs from the single node's"
    print("%-28s %12.1f %12.1f %8.2f %14.1f %14.1f" % (name, res["single"][0], res["cluster"][0], res["cluster"][0] / res["single"][0], res["single"][1], res["cluster"][1]))

deadline = int(asker.config_get("cluster-standby-deadline")["cluster-standby-deadline"])
stopped = primaries[1]
q = QUERIES["one-day waterfall"]
os.kill(pid(stopped), signal.SIGSTOP)
try:
    times = []
    for _ in range(3):
        t = time.perf_counter()
        reply = asker.execute_command(*q)
        times.append((time.perf_counter() - t) * 1000)
finally:
    os.kill(cluster_pids[ports.index(stopped)], signal.SIGCONT)
assert reply == one.execute_command(*q)
print("one-day waterfall with a primary stopped (standby reads, deadline %d ms): median %.1f ms; standby answers %s"
      % (deadline, statistics.median(times), asker.info("cluster")["cluster_fanout_standby_answers"]))
