"""Migration from Redis: Abacus as a replica of a real redis-server 7.0 (`REPLICAOF`), loading
its RDB (disk-based and diskless full syncs) and applying its command stream while a writer
keeps writing to Redis; at the end every key of every database is equal on both sides.

Nothing here decides a result by timing: the comparison follows `WAIT 1` on Redis returning 1
and Redis's INFO showing the replica's acknowledged offset equal to its own
`master_repl_offset` with the writer stopped, so Abacus has applied every byte Redis sent.
TTLs compare within a tolerance because the two servers are read a moment apart.
"""

import random
import threading

import pytest
import redis

from conftest import ServerProcess
from helpers import wait_until
from test_replication import FakePrimary, info

pytestmark = pytest.mark.abacus_only("Abacus replicating from a real Redis primary")

DBS = (0, 5)
TTL_TOLERANCE_MS = 5000
SYNC_TIMEOUT = 30.0


@pytest.fixture
def redis_primary():
    started = []

    def start(*extra):
        p = ServerProcess("redis", ["--repl-diskless-sync-delay", "0", *extra])
        started.append(p)
        return p.start()

    yield start
    for p in started:
        p.stop()


def fill(r):
    """Every type Abacus shares with Redis, in each of Redis's encodings, with TTLs."""
    r.set("str:int", 12345)
    r.set("str:embstr", "hello")
    r.set("str:raw", "r" * 100)
    r.set("str:lzf", "abc" * 400)
    r.set("str:neg", -987654321012)
    r.pfadd("hll", *("u%d" % i for i in range(300)))
    r.rpush("list:small", "a", "1", "-1")
    r.rpush("list:quick", *("item-%d" % i for i in range(3000)))
    r.sadd("set:intset", *range(100))
    r.sadd("set:hash", *("m%d" % i for i in range(300)))
    r.zadd("zset:lp", {"m%d" % i: i * 0.5 for i in range(10)})
    r.zadd("zset:skip", {"m%d" % i: i * 1.25 - 50 for i in range(400)})
    r.hset("hash:lp", mapping={"f%d" % i: i for i in range(5)})
    r.hset("hash:ht", mapping={"f%d" % i: "v" * (i % 90) for i in range(300)})
    for i in range(120):
        r.xadd("stream", {"n": i, "k": "v%d" % i})
    r.xgroup_create("stream", "g1", id="0")
    r.xgroup_create("stream", "g2", id="$")
    r.xreadgroup("g1", "alice", {"stream": ">"}, count=30)
    r.xreadgroup("g1", "bob", {"stream": ">"}, count=5)
    ids = [i for i, _ in r.xrange("stream", count=10)]
    r.xack("stream", "g1", *ids)
    r.expire("str:raw", 5000)
    r.pexpire("list:small", 7_000_000)
    r.set("ttl:soon", "x", px=400_000)
    r.setex("ttl:hash", 9000, "y")
    r.expire("hash:lp", 8000)


def work(r, rnd, i):
    """One random write of any type, as a client of Redis would make it."""
    k = "w:%d" % rnd.randrange(200)
    op = rnd.randrange(32)
    if op == 0:
        r.set(k, rnd.randrange(10**6), ex=rnd.randrange(100, 10000))
    elif op == 1:
        r.delete(k)
    elif op == 2:
        r.rpush("wl:%d" % (i % 20), *range(rnd.randrange(1, 5)))
    elif op == 3:
        r.lpop("wl:%d" % (i % 20))
    elif op == 4:
        r.sadd("ws:%d" % (i % 20), rnd.randrange(1000), "x%d" % rnd.randrange(50))
    elif op == 5:
        r.spop("ws:%d" % (i % 20))
    elif op == 6:
        r.zadd("wz:%d" % (i % 20), {"m%d" % rnd.randrange(300): rnd.random() * 100})
    elif op == 7:
        r.zincrby("wz:%d" % (i % 20), 1.5, "m1")
    elif op == 8:
        r.hset("wh:%d" % (i % 20), "f%d" % rnd.randrange(200), "v" * rnd.randrange(100))
    elif op == 9:
        r.hincrby("wh:%d" % (i % 20), "counter", 3)
    elif op == 10:
        r.xadd("wx", {"i": i}, maxlen=500, approximate=False)
    elif op == 11:
        r.xreadgroup("g1", "c%d" % (i % 3), {"stream": ">"}, count=2)
    elif op == 12:
        pending = r.xpending_range("stream", "g1", "-", "+", 5)
        if pending:
            r.xclaim("stream", "g1", "carol", 0, [p["message_id"] for p in pending[:2]])
    elif op == 13:
        r.expire("wl:%d" % (i % 20), rnd.randrange(1000, 100000))
    elif op == 14:
        r.incrbyfloat("wf:%d" % (i % 10), 0.25)
    elif op == 15:
        r.unlink("ws:%d" % rnd.randrange(20))
    elif op == 16:
        p = r.pipeline(transaction=True)
        p.incr("wt:a")
        p.lpush("wt:l", i)
        p.hset("wt:h", "i", i)
        p.execute()
    elif op == 17:
        # Redis 7 replicates a script's effects (in MULTI/EXEC), not the script.
        r.eval("redis.call('set', KEYS[1], ARGV[1]); return redis.call('incr', KEYS[2])", 2, k, "wc", i)
    elif op == 18:
        r.getex("w:%d" % rnd.randrange(200), persist=True)
    elif op == 19:
        r.append("wa:%d" % (i % 10), "xy")
    elif op == 20:
        r.blpop(["wl:%d" % (i % 20)], timeout=0.01)
    elif op == 21:
        r.xautoclaim("stream", "g1", "dave", 0, count=2)
    elif op == 22:
        r.zpopmin("wz:%d" % (i % 20))
    elif op == 23:
        r.lmove("wl:%d" % (i % 20), "wl:%d" % rnd.randrange(20), "LEFT", "RIGHT")
    elif op == 24:
        if r.exists(k):
            r.rename(k, "w:%d" % rnd.randrange(200))
    elif op == 25:
        r.copy("wh:%d" % (i % 20), "wcopy:%d" % (i % 5), replace=True)
    elif op == 26:
        # MOVE between the two compared databases (DBS).
        here = r.connection_pool.connection_kwargs.get("db", 0)
        r.move("w:%d" % rnd.randrange(200), DBS[1] if here == DBS[0] else DBS[0])
    elif op == 27:
        r.xtrim("wx", maxlen=rnd.randrange(100, 400), approximate=False)
    elif op == 28:
        r.setrange("wr:%d" % (i % 10), rnd.randrange(20), "abc")
    elif op == 29:
        r.pfadd("wp:%d" % (i % 5), *("e%d" % rnd.randrange(1000) for _ in range(5)))
        r.pfmerge("wpall", "wp:%d" % (i % 5))
    elif op == 30:
        payload = r.dump("wh:%d" % (i % 20))
        if payload:
            r.restore("wrestored:%d" % (i % 5), rnd.randrange(0, 50000), payload, replace=True)
    elif i % 100 == 0:
        r.swapdb(0, 5)
    else:
        r.hsetnx("wh:%d" % (i % 20), "once", i)


def value(c, k, t):
    if t == b"string":
        return c.get(k)
    if t == b"list":
        return c.lrange(k, 0, -1)
    if t == b"set":
        return sorted(c.smembers(k))
    if t == b"hash":
        return sorted(c.hgetall(k).items())
    if t == b"zset":
        return c.zrange(k, 0, -1, withscores=True)
    if t == b"stream":
        groups = sorted((g["name"], g["pending"], g["last-delivered-id"]) for g in c.xinfo_groups(k))
        pel = {}
        for g, _, _ in groups:
            pel[g] = [(p["message_id"], p["consumer"], p["times_delivered"])
                      for p in c.xpending_range(k, g, "-", "+", 10000)]
        last = c.xinfo_stream(k)["last-generated-id"]
        return (c.xrange(k), groups, pel, last)
    raise AssertionError("unexpected type %r of %r" % (t, k))


def snapshot(port, dbs=DBS):
    out = {}
    for db in dbs:
        c = redis.Redis(host="127.0.0.1", port=port, db=db)
        for k in c.scan_iter(count=1000):
            t = c.type(k)
            out[(db, k)] = (t, value(c, k, t), c.pttl(k))
        c.close()
    return out


def assert_equal(redis_port, abacus_port):
    want = snapshot(redis_port)
    got = snapshot(abacus_port)
    assert sorted(got) == sorted(want), "keys differ: only in Redis %r, only in Abacus %r" % (
        sorted(set(want) - set(got))[:10], sorted(set(got) - set(want))[:10])
    for key, (t, v, ttl) in want.items():
        gt, gv, gttl = got[key]
        assert (gt, gv) == (t, v), key
        assert (ttl < 0) == (gttl < 0) and abs(ttl - gttl) <= TTL_TOLERANCE_MS, (key, ttl, gttl)
    return len(want)


def caught_up(rc, replica):
    """Redis's view: the replica online, its acknowledged offset equal to Redis's own."""
    fields = rc.info("replication")
    slave = fields.get("slave0")
    ok = isinstance(slave, dict) and slave.get("state") == "online" \
        and int(slave.get("offset", -1)) == fields["master_repl_offset"]
    return ok and info(replica)["master_link_status"] == "up"


LIBRARY = "#!lua name=migrated\nredis.register_function('one', function() return 1 end)"


def sync_under_writes(red, rc, ab, ac, seed):
    """REPLICAOF Redis while a writer keeps writing to Redis (both databases); returns once
    Redis counts Abacus caught up with everything written, the writer stopped."""
    stop = threading.Event()
    done = [0]
    errors = []

    def writer():
        c = redis.Redis(host=red.host, port=red.port, db=DBS[0])
        c5 = redis.Redis(host=red.host, port=red.port, db=DBS[1])
        rnd = random.Random(seed)
        try:
            while not stop.is_set():
                work(c if done[0] % 3 else c5, rnd, done[0])
                done[0] += 1
        except Exception as e:  # reported by the test, not swallowed
            errors.append(e)
        finally:
            c.close()
            c5.close()

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        assert wait_until(lambda: done[0] > 200 or errors, timeout=SYNC_TIMEOUT)
        assert not errors, errors
        assert ac.execute_command("REPLICAOF", red.host, red.port) in (b"OK", True)
        assert wait_until(lambda: info(ac)["master_link_status"] == "up", timeout=SYNC_TIMEOUT), ab.log()
        # The writer goes on while the stream is applied.
        at = done[0]
        assert wait_until(lambda: done[0] > at + 1000 or errors, timeout=SYNC_TIMEOUT)
    finally:
        stop.set()
        t.join()
    assert not errors, errors
    # Redis's WAIT counts the Abacus replica, and its INFO shows it at Redis's own offset.
    assert rc.execute_command("WAIT", 1, 10000) == 1
    assert wait_until(lambda: caught_up(rc, ac), timeout=SYNC_TIMEOUT), (rc.info("replication"), ab.log()[-3000:])


@pytest.mark.parametrize("diskless", ["no", "yes"])
def test_migration_under_writes_equals_redis(server, redis_primary, diskless):
    red = redis_primary("--repl-diskless-sync", diskless)
    rc = red.client()
    for db in DBS:
        rc.execute_command("SELECT", db)
        fill(rc)
    rc.execute_command("SELECT", 0)
    ab = server.start()
    ac = ab.client()
    other = "yes" if diskless == "no" else "no"

    # Two full syncs, one in each of Redis's transfer modes (this case's first).
    for rnd, mode in enumerate([diskless, other]):
        rc.config_set("repl-diskless-sync", mode)
        target = "replicas sockets" if mode == "yes" else "disk"
        syncs = red.log().count("Starting BGSAVE for SYNC with target: " + target)
        ac.set("stale", "dropped by the full sync")
        sync_under_writes(red, rc, ab, ac, seed=rnd)
        assert red.log().count("Starting BGSAVE for SYNC with target: " + target) == syncs + 1
        assert ac.get("stale") is None
        assert assert_equal(red.port, ab.port) > 250
        fields = info(ac)
        assert fields["replica_apply_errors"] == "0", ab.log()[-5000:]
        assert fields["replica_sync_keys_skipped"] == "0"
        if rnd == 1:
            # The library loaded in round 0 is in this RDB: loaded from it (the full sync
            # replaces the replica's libraries, as Redis's does).
            assert "Redis Functions" not in ab.log()
            assert [(lib[1], lib[7]) for lib in ac.execute_command("FUNCTION", "LIST", "WITHCODE")] == \
                [(b"migrated", LIBRARY.encode())]
            break

        # A dropped link resumes from Redis's backlog (+CONTINUE), then more writes follow.
        partial_before = int(rc.info("stats")["sync_partial_ok"])
        rc.execute_command("CLIENT", "KILL", "TYPE", "replica")
        r = random.Random(11)
        for i in range(300):
            work(rc, r, i)
        # FUNCTION LOAD in the stream is applied as Redis's replica applies it (issue 51).
        rc.execute_command("FUNCTION", "LOAD", LIBRARY)
        # Whole-database commands: SWAPDB of the compared databases, FLUSHDB of another.
        rc.swapdb(DBS[0], DBS[1])
        r9 = redis.Redis(host=red.host, port=red.port, db=9)
        r9.set("doomed", "1")
        r9.flushdb()
        r9.set("survivor", "1")
        r9.close()
        rc.set("after:function", "1")
        assert rc.execute_command("WAIT", 1, 10000) == 1
        assert wait_until(lambda: caught_up(rc, ac), timeout=SYNC_TIMEOUT), ab.log()[-3000:]
        assert int(rc.info("stats")["sync_partial_ok"]) == partial_before + 1, ab.log()[-3000:]
        assert_equal(red.port, ab.port)
        assert info(ac)["replica_apply_errors"] == "0"
        assert [lib[1] for lib in ac.execute_command("FUNCTION", "LIST")] == [b"migrated"]
        assert ac.get("after:function") == b"1"
        a9 = redis.Redis(host=ab.host, port=ab.port, db=9)
        assert a9.keys() == [b"survivor"]
        a9.close()

        # Promoted, Abacus keeps the data and takes writes (the migration's last step); a
        # new REPLICAOF then needs a full sync (its replication ID is its own now).
        ac.execute_command("REPLICAOF", "NO", "ONE")
        assert info(ac)["role"] == "master"
        ac.set("after", "1")
        assert ac.get("str:int") == b"12345"


def rdb_file(version, body=b""):
    """An RDB file with the given header version (EOF, then a zero checksum: unchecked)."""
    return b"REDIS%04d" % version + body + b"\xff" + b"\x00" * 8


@pytest.mark.parametrize("payload,why", [
    (rdb_file(11), "RDB version 11"),
    # A key of the pre-7.0 module type: cannot be skipped, so the whole file is refused.
    (rdb_file(10, b"\x06\x03old" + b"\x81" + b"\x00" * 8 + b"opaque"), "'old'"),
    # A damaged file (its checksum does not match).
    (b"REDIS0010\xfe\x00\x00\x01k\x01v\xff" + b"\x01" * 8, "checksum"),
    # A diskless transfer the primary closes before its end mark.
    (b"$EOF:" + b"m" * 40 + b"\r\n" + rdb_file(10, b"\x00\x01k\x01v"), "before the end of the snapshot"),
])
def test_unreadable_rdb_is_a_clear_error_and_keeps_data(server, payload, why):
    replica = server.start()
    rc = replica.client()
    rc.set("mine", "kept")
    if not payload.startswith(b"$EOF:"):
        payload = b"$%d\r\n" % len(payload) + payload
    framed = b"+FULLRESYNC " + b"b" * 40 + b" 0\r\n" + payload
    fake = FakePrimary(framed)
    try:
        rc.execute_command("REPLICAOF", "127.0.0.1", fake.port)
        assert fake.served.wait(10)
        assert wait_until(lambda: why in replica.log(), timeout=10), replica.log()
        assert rc.get("mine") == b"kept"
        assert info(rc)["master_link_status"] == "down"
    finally:
        rc.execute_command("REPLICAOF", "NO", "ONE")
        fake.close()
    assert rc.get("mine") == b"kept"


def test_diskless_framing_from_a_fake_primary(server):
    """`$EOF:<mark>` framing with a module key inside: the key is skipped and counted, the
    others load."""
    mark = b"0123456789abcdef0123456789abcdef01234567"
    # db 0: a string "k" = "v", and a MODULE_2 value (module id 0, then EOF opcode 0).
    body = b"\xfe\x00" + b"\x00\x01k\x01v" + b"\x07\x03mod\x00\x00"
    framed = b"+FULLRESYNC " + b"c" * 40 + b" 0\r\n$EOF:" + mark + b"\r\n" + rdb_file(10, body) + mark
    replica = server.start()
    rc = replica.client()
    fake = FakePrimary(framed)
    try:
        rc.execute_command("REPLICAOF", "127.0.0.1", fake.port)
        assert fake.served.wait(10)
        assert wait_until(lambda: "Skipping key 'mod'" in replica.log(), timeout=10), replica.log()
        assert wait_until(lambda: rc.get("k") == b"v", timeout=10), replica.log()
        assert int(info(rc)["replica_sync_keys_skipped"]) >= 1
    finally:
        rc.execute_command("REPLICAOF", "NO", "ONE")
        fake.close()
