"""MEMORY USAGE / STATS / DOCTOR / MALLOC-STATS / PURGE / HELP, and the redis-cli tools that
read them (--memkeys, --bigkeys). Every test here also passes against Redis (--target redis):
figures differ between the servers, so the tests check shapes and relations between figures
(a bigger value costs more, keys.count is the number of keys), never fixed numbers.
"""

import re
import shutil
import subprocess

import pytest

from helpers import Err

REDIS_CLI = shutil.which("redis-cli")

STATS_FIELDS = [
    "peak.allocated", "total.allocated", "startup.allocated", "replication.backlog",
    "clients.slaves", "clients.normal", "cluster.links", "aof.buffer", "lua.caches",
    "functions.caches", "overhead.total", "keys.count", "keys.bytes-per-key", "dataset.bytes",
    "dataset.percentage", "peak.percentage", "allocator.allocated", "allocator.active",
    "allocator.resident", "allocator-fragmentation.ratio", "allocator-fragmentation.bytes",
    "allocator-rss.ratio", "allocator-rss.bytes", "rss-overhead.ratio", "rss-overhead.bytes",
    "fragmentation", "fragmentation.bytes",
]


def test_usage_of_every_type(r):
    r.set("s", "v")
    r.set("big", "x" * 100000)
    r.rpush("l", *range(1000))
    r.sadd("set", *range(1000))
    r.sadd("sset", *["m%d" % i for i in range(1000)])
    r.zadd("z", {"m%d" % i: i for i in range(1000)})
    r.hset("h", mapping={"f%d" % i: i for i in range(1000)})
    r.execute_command("PFADD", "pf", *range(100))
    small = r.memory_usage("s")
    assert small > 0
    assert r.memory_usage("big") >= small + 100000
    for key in ("l", "set", "sset", "z", "h", "pf"):
        assert r.memory_usage(key) > small, key
    # A bigger collection of the same kind costs more.
    r.hset("h2", mapping={"f%d" % i: i for i in range(10)})
    assert r.memory_usage("h") > r.memory_usage("h2")
    assert r.memory_usage("missing") is None
    assert r.memory_usage("big", samples=0) >= 100000


def test_usage_errors(c):
    c("SET", "k", "v")
    assert c("MEMORY", "USAGE", "k", "SAMPLES", "-1") == Err("ERR syntax error")
    assert c("MEMORY", "USAGE", "k", "SAMPLES") == Err("ERR syntax error")
    assert c("MEMORY", "USAGE", "k", "SAMPLES", "x") == \
        Err("ERR value is not an integer or out of range")
    assert c("MEMORY", "USAGE", "k", "FOO") == Err("ERR syntax error")
    assert c("MEMORY", "USAGE") == Err("ERR wrong number of arguments for 'memory|usage' command")
    assert c("MEMORY", "STATS", "x") == Err("ERR wrong number of arguments for 'memory|stats' command")
    assert c("MEMORY", "FOO") == Err("ERR unknown subcommand 'FOO'. Try MEMORY HELP.")
    assert c("MEMORY") == Err("ERR wrong number of arguments for 'memory' command")


def test_stats_shape_and_figures(r):
    for i in range(200):
        r.set("k%d" % i, "v" * 50)
    r.setex("ttl", 1000, "v")
    r.execute_command("SELECT", 3)
    r.set("other", "v")
    r.execute_command("SELECT", 0)
    stats = r.memory_stats()
    keys = [k for k in stats if not k.startswith("db.")]
    assert keys == STATS_FIELDS
    assert stats["keys.count"] == 202
    assert stats["total.allocated"] > 0
    assert stats["peak.allocated"] >= stats["total.allocated"]
    assert stats["allocator.allocated"] > 0
    assert stats["dataset.bytes"] > 0
    assert stats["keys.bytes-per-key"] > 0
    # Only the databases that hold keys are listed, each with its tables' overhead.
    dbs = sorted(k for k in stats if k.startswith("db."))
    assert dbs == ["db.0", "db.3"]
    assert stats["db.0"]["overhead.hashtable.main"] > 0
    assert stats["db.0"]["overhead.hashtable.expires"] > 0
    assert stats["db.3"]["overhead.hashtable.expires"] == 0
    fields = list(stats["db.0"])
    assert fields == ["overhead.hashtable.main", "overhead.hashtable.expires",
                      "overhead.hashtable.slot-to-keys"]


def test_stats_resp3(r3):
    r3.set("a", "b")
    stats = r3.memory_stats()
    assert stats["keys.count"] == 1
    assert isinstance(stats["fragmentation"], float)
    assert "db.0" in stats


def test_doctor_malloc_stats_purge_help(r):
    doctor = r.execute_command("MEMORY", "DOCTOR")
    assert doctor.startswith(b"Hi Sam") or doctor.startswith(b"Sam, I detected")
    assert b"jemalloc" in r.execute_command("MEMORY", "MALLOC-STATS")
    assert r.execute_command("MEMORY", "PURGE") == b"OK"
    help_lines = r.execute_command("MEMORY", "HELP")
    assert help_lines[0].startswith(b"MEMORY <subcommand>")
    assert b"USAGE <key> [SAMPLES <count>]" in help_lines


def cli(server, *args):
    argv = [REDIS_CLI, "-h", server.host, "-p", str(server.port)] + [str(a) for a in args]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


@pytest.mark.skipif(REDIS_CLI is None, reason="redis-cli not installed")
def test_redis_cli_memkeys_and_bigkeys(server, r):
    for i in range(300):
        r.set("str:%d" % i, "v" * (i + 1))
    r.rpush("list:big", *range(5000))
    r.rpush("list:small", 1)
    r.sadd("set:big", *range(3000))
    r.zadd("zset:big", {"m%d" % i: i for i in range(2000)})
    r.hset("hash:big", mapping={"f%d" % i: "v" * 20 for i in range(1000)})

    rc, out, err = cli(server, "--memkeys")
    assert rc == 0, err
    assert "MEMORY USAGE failed" not in out + err
    assert "Sampled 305 keys in the keyspace!" in out
    assert "Biggest   list found '\"list:big\"'" in out
    assert "Biggest string found" in out
    assert "Biggest    set found '\"set:big\"'" in out
    assert "Biggest   zset found '\"zset:big\"'" in out
    assert "Biggest   hash found '\"hash:big\"'" in out
    total = re.search(r"300 strings with (\d+) bytes", out)
    assert total and int(total.group(1)) > sum(range(1, 301)), out

    rc, out, err = cli(server, "--bigkeys")
    assert rc == 0, err
    assert "Biggest   list found '\"list:big\"' has 5000 items" in out
    assert "Biggest    set found '\"set:big\"' has 3000 members" in out
    assert "Biggest string found '\"str:299\"' has 300 bytes" in out
