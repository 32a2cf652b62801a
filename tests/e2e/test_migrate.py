"""MIGRATE between two servers of the kind under test, and from it into a real redis-server.

Every test here also passes against Redis itself (--target redis): the source and the
target are then both redis-server, so the replies and errors are Redis 7.0's.
"""

import pytest
import redis

from conftest import ServerProcess, free_port
from helpers import Err


@pytest.fixture
def dest(server):
    """A second server of the kind under test, empty."""
    p = server.start()
    c = p.client()
    yield p, c
    c.close()


def fill(r):
    r.set("s", "hello")
    r.rpush("l", "a", "b", 1, 2)
    r.sadd("set", "x", "y", 7)
    r.hset("h", mapping={"f": "v", "g": "w"})
    r.zadd("z", {"m": 1.5, "n": -2})
    r.pfadd("hll", "a", "b", "c")


def snapshot(c, keys):
    out = {}
    for k in keys:
        t = c.type(k)
        if t == b"string":
            out[k] = (t, c.get(k))
        elif t == b"list":
            out[k] = (t, c.lrange(k, 0, -1))
        elif t == b"set":
            out[k] = (t, sorted(c.smembers(k)))
        elif t == b"hash":
            out[k] = (t, sorted(c.hgetall(k).items()))
        elif t == b"zset":
            out[k] = (t, c.zrange(k, 0, -1, withscores=True))
        else:
            out[k] = (t, None)
    return out


KEYS = ["s", "l", "set", "h", "z", "hll"]


def test_migrate_one_key_moves_it_with_its_ttl(r, dest):
    p, d = dest
    r.set("k", "v", px=50_000)
    assert r.execute_command("MIGRATE", p.host, p.port, "k", 0, 5000) == b"OK"
    assert r.exists("k") == 0
    assert d.get("k") == b"v"
    assert 40_000 < d.pttl("k") <= 50_000


def test_migrate_keys_every_type_copy_and_replace(r, dest):
    p, d = dest
    fill(r)
    before = snapshot(r, KEYS)
    assert r.execute_command("MIGRATE", p.host, p.port, "", 0, 5000, "COPY", "KEYS", *KEYS) == b"OK"
    assert snapshot(r, KEYS) == before  # COPY keeps the source
    assert snapshot(d, KEYS) == before
    # Again without REPLACE: the target refuses, the source keeps everything.
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("MIGRATE", p.host, p.port, "", 0, 5000, "KEYS", *KEYS)
    assert str(e.value).startswith("Target instance replied with error: BUSYKEY")
    assert snapshot(r, KEYS) == before
    r.set("s", "changed")
    assert r.execute_command("MIGRATE", p.host, p.port, "", 0, 5000, "REPLACE", "KEYS", *KEYS) == b"OK"
    assert r.exists(*KEYS) == 0
    assert d.get("s") == b"changed"
    assert d.pttl("s") == -1


def test_migrate_partial_failure_deletes_only_the_moved_keys(r, dest):
    p, d = dest
    r.set("a", "1")
    r.set("b", "2")
    d.set("b", "theirs")
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("MIGRATE", p.host, p.port, "", 0, 5000, "KEYS", "a", "b")
    assert "BUSYKEY" in str(e.value)
    assert r.exists("a") == 0 and r.get("b") == b"2"
    assert d.get("a") == b"1" and d.get("b") == b"theirs"


def test_migrate_missing_keys_and_nokey(r, dest):
    p, d = dest
    assert r.execute_command("MIGRATE", p.host, p.port, "nothere", 0, 5000) == b"NOKEY"
    assert r.execute_command("MIGRATE", p.host, p.port, "", 0, 5000, "KEYS", "n1", "n2") == b"NOKEY"
    r.set("only", "x")
    assert r.execute_command("MIGRATE", p.host, p.port, "", 0, 5000, "KEYS", "n1", "only") == b"OK"
    assert d.get("only") == b"x"


def test_migrate_to_another_database(r, dest):
    p, d = dest
    r.set("k3", "v")
    assert r.execute_command("MIGRATE", p.host, p.port, "k3", 3, 5000) == b"OK"
    assert d.exists("k3") == 0
    d.execute_command("SELECT", 3)
    assert d.get("k3") == b"v"


def test_migrate_keeps_its_connection_to_the_target(r, server, dest):
    """Successive MIGRATEs to one target reuse one connection (Redis keeps it 10 s): the
    database each selects is still right when it alternates, and a target restarted in
    between (the kept connection is dead) is reached again on a new one."""
    p, d = dest
    for i, db in enumerate([0, 3, 3, 0]):
        r.set("m%d" % i, i)
        assert r.execute_command("MIGRATE", p.host, p.port, "m%d" % i, db, 5000) == b"OK"
    assert sorted(d.keys("m*")) == [b"m0", b"m3"]
    d.execute_command("SELECT", 3)
    assert sorted(d.keys("m*")) == [b"m1", b"m2"]
    d.close()
    p.stop()
    q = ServerProcess(p.target, port=p.port)
    server._children.append(q)
    q.start()
    r.set("after", "restart")
    assert r.execute_command("MIGRATE", q.host, q.port, "after", 0, 5000) == b"OK"
    assert q.client().get("after") == b"restart"
    assert r.exists("after") == 0


def test_migrate_auth_and_auth2(r, server):
    p = server.start(["--requirepass", "secret"])
    r.set("k", "v")
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("MIGRATE", p.host, p.port, "k", 0, 5000)
    assert "NOAUTH" in str(e.value)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("MIGRATE", p.host, p.port, "k", 0, 5000, "AUTH", "wrong")
    assert str(e.value).startswith("Target instance replied with error:")
    assert r.get("k") == b"v"
    assert r.execute_command("MIGRATE", p.host, p.port, "k", 0, 5000, "AUTH", "secret") == b"OK"
    c = p.client(password="secret")
    assert c.get("k") == b"v"
    r.set("k2", "v2")
    assert r.execute_command("MIGRATE", p.host, p.port, "k2", 0, 5000, "AUTH2", "default", "secret") == b"OK"
    assert c.get("k2") == b"v2"
    c.close()


def test_migrate_connection_refused_is_ioerr(r):
    r.set("k", "v")
    port = free_port()  # nothing listens there
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("MIGRATE", "127.0.0.1", port, "k", 0, 1000)
    # Redis connects without blocking, so a refused connection shows when it writes.
    assert str(e.value) == "IOERR error or timeout writing to target instance"
    assert r.get("k") == b"v"


def test_migrate_argument_errors(r, dest):
    p, d = dest
    r.set("k", "v")
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("MIGRATE", p.host, p.port, "k", 0, 5000, "KEYS", "k")
    assert "the key argument must be set to the empty string" in str(e.value)
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("MIGRATE", p.host, p.port, "k", 0, 5000, "BOGUS")
    assert str(e.value) == "syntax error"
    for bad in [("k", "x", 5000), ("k", 0, "x")]:
        with pytest.raises(redis.ResponseError) as e:
            r.execute_command("MIGRATE", p.host, p.port, *bad)
        assert str(e.value) == "value is not an integer or out of range"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("MIGRATE", p.host, p.port, "k", 0)
    assert "wrong number of arguments" in str(e.value)
    assert r.get("k") == b"v"


def test_migrate_into_real_redis_and_back(r, real_redis, server):
    ref = real_redis.client()
    ref.flushall()
    fill(r)
    r.expire("h", 1000)
    before = snapshot(r, KEYS)
    assert r.execute_command("MIGRATE", real_redis.host, real_redis.port, "", 0, 5000, "KEYS", *KEYS) == b"OK"
    assert r.exists(*KEYS) == 0
    assert snapshot(ref, KEYS) == before
    assert 900 < ref.ttl("h") <= 1000
    # And back from Redis into the server under test.
    assert ref.execute_command("MIGRATE", server.host, server.port, "", 0, 5000, "KEYS", *KEYS) == b"OK"
    assert snapshot(r, KEYS) == before
    ref.close()


def test_migrate_fires_del_and_command_getkeys(r, dest):
    p, d = dest
    def getkeys(*args):
        return [k if isinstance(k, str) else k.decode() for k in r.command_getkeys(*args)]
    assert getkeys("MIGRATE", "h", "1", "k", "0", "10") == ["k"]
    assert getkeys("MIGRATE", "h", "1", "", "0", "10", "COPY", "KEYS", "a", "b") == ["a", "b"]
    r.config_set("notify-keyspace-events", "KEA")
    try:
        ps = r.pubsub()
        ps.psubscribe("__keyevent@0__:*")
        ps.get_message(timeout=2)
        r.set("nk", "v")
        assert r.execute_command("MIGRATE", p.host, p.port, "nk", 0, 5000) == b"OK"
        got = []
        for _ in range(10):
            m = ps.get_message(timeout=2)
            if m is None:
                break
            got.append((m["channel"], m["data"]))
            if m["channel"].endswith(b":del"):
                break
        assert (b"__keyevent@0__:del", b"nk") in got
        ps.close()
    finally:
        r.config_set("notify-keyspace-events", "")
