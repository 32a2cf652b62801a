"""FUNCTION libraries are data (issue 51): they survive a restart from the log and from a
snapshot, and they reach replicas (the stream, and a full sync, which replaces the replica's
own), as in Redis 7.0. Every test also runs against Redis (`--target redis`)."""

import time

import pytest
import redis
from redis.exceptions import ResponseError

from helpers import wait_until
from test_replication import kill9, restart as replication_restart

LIB1 = "#!lua name=lib1\n" \
    "redis.register_function('get1', function(keys, args) return redis.call('get', keys[1]) end)\n" \
    "redis.register_function{function_name='ro1', callback=function(keys, args) return 'v1' end, " \
    "flags={'no-writes'}, description='first'}"
LIB1_V2 = "#!lua name=lib1\n" \
    "redis.register_function{function_name='ro1', callback=function(keys, args) return 'v2' end, flags={'no-writes'}}"
LIB2 = "#!lua name=lib2\nredis.register_function('set2', function(keys, args) " \
    "return redis.call('set', keys[1], args[1]) end)"
LIB3 = "#!lua name=lib3\nredis.register_function('three', function(keys, args) return 3 end)"
LIB4 = "#!lua name=lib4\nredis.register_function('four', function(keys, args) return 4 end)"


def listing(c):
    """FUNCTION LIST WITHCODE as comparable values (library order is not specified)."""
    out = {}
    for lib in c.execute_command("FUNCTION", "LIST", "WITHCODE"):
        d = dict(zip(lib[::2], lib[1::2]))
        fns = []
        for f in d[b"functions"]:
            fd = dict(zip(f[::2], f[1::2]))
            fns.append((fd[b"name"], fd[b"description"], sorted(fd[b"flags"])))
        out[d[b"library_name"]] = (d[b"library_code"], sorted(fns))
    return out


def restart(node):
    replication_restart(node)
    return node.client()


def idle(c):
    p = c.info("persistence")
    return p.get("aof_rewrite_in_progress", 0) == 0 and p.get("rdb_bgsave_in_progress", 0) == 0 \
        and p.get("aof_rewrite_scheduled", 0) == 0


def change_libraries(c):
    """Every kind of change: LOAD, LOAD REPLACE, DELETE, FLUSH and RESTORE."""
    assert c.execute_command("FUNCTION", "LOAD", LIB1) == b"lib1"
    assert c.execute_command("FUNCTION", "LOAD", LIB2) == b"lib2"
    assert c.execute_command("FUNCTION", "LOAD", "REPLACE", LIB1_V2) == b"lib1"
    assert c.execute_command("FUNCTION", "DELETE", "lib2") in (b"OK", True)
    assert c.execute_command("FUNCTION", "LOAD", LIB3) == b"lib3"
    payload = c.execute_command("FUNCTION", "DUMP")
    assert c.execute_command("FUNCTION", "FLUSH") in (b"OK", True)
    assert c.execute_command("FUNCTION", "LOAD", LIB4) == b"lib4"
    assert c.execute_command("FUNCTION", "RESTORE", payload, "APPEND") in (b"OK", True)
    assert set(listing(c)) == {b"lib1", b"lib3", b"lib4"}


def test_libraries_survive_kill_9_from_the_log(server):
    node = server.start(["--appendonly", "yes", "--appendfsync", "always"])
    c = node.client()
    c.set("k", "val")
    change_libraries(c)
    before = listing(c)
    kill9(node)
    c = restart(node)
    assert listing(c) == before
    assert c.fcall("ro1", 0) == b"v2"
    assert c.fcall("three", 0) == 3
    assert c.execute_command("FUNCTION", "STATS")[3][1][1] == 3
    # A library deleted before the crash stays deleted.
    with pytest.raises(ResponseError, match="Function not found"):
        c.fcall("set2", 1, "k", "x")


def test_libraries_survive_a_restart_from_a_snapshot(server):
    node = server.start(["--appendonly", "no"])
    c = node.client()
    c.execute_command("FUNCTION", "LOAD", LIB1)
    c.execute_command("FUNCTION", "LOAD", LIB3)
    c.set("k", "from-snapshot")
    assert c.save()
    before = listing(c)
    # A change after the snapshot is not in it (no log), as in Redis.
    c.execute_command("FUNCTION", "LOAD", LIB4)
    kill9(node)
    c = restart(node)
    assert listing(c) == before
    assert c.fcall("get1", 1, "k") == b"from-snapshot"


def test_libraries_survive_log_compaction(server):
    """A snapshot taken by BGREWRITEAOF holds the libraries; the log after it holds the
    changes since."""
    node = server.start(["--appendonly", "yes", "--appendfsync", "always"])
    c = node.client()
    c.execute_command("FUNCTION", "LOAD", LIB1)
    c.execute_command("FUNCTION", "LOAD", LIB2)
    assert wait_until(lambda: idle(c), timeout=30)
    c.bgrewriteaof()
    assert wait_until(lambda: idle(c), timeout=30), node.log()
    c.execute_command("FUNCTION", "DELETE", "lib1")
    c.execute_command("FUNCTION", "LOAD", LIB3)
    before = listing(c)
    assert set(before) == {b"lib2", b"lib3"}
    kill9(node)
    c = restart(node)
    assert listing(c) == before


def attach(replica, primary):
    rc = replica.client()
    assert rc.execute_command("REPLICAOF", primary.host, primary.port) in (b"OK", True)
    assert wait_until(lambda: rc.info("replication").get("master_link_status") == "up", timeout=30), replica.log()


def test_libraries_reach_replicas(server):
    primary = server.start()
    replica = server.start()
    pc, rc = primary.client(), replica.client()
    pc.execute_command("FUNCTION", "LOAD", LIB1)
    # The full sync replaces the replica's own libraries with the primary's.
    rc.execute_command("FUNCTION", "LOAD", LIB4)
    attach(replica, primary)
    assert wait_until(lambda: listing(rc) == listing(pc), timeout=30)
    assert b"lib4" not in listing(rc)
    # Then every change reaches it through the stream.
    pc.execute_command("FUNCTION", "DELETE", "lib1")
    change_libraries(pc)
    assert pc.execute_command("WAIT", 1, 10000) == 1
    assert listing(rc) == listing(pc)
    # The replica runs them; a replica refuses a client's FUNCTION LOAD.
    pc.set("k", "here")
    assert pc.execute_command("WAIT", 1, 10000) == 1
    assert rc.fcall_ro("ro1", 0) == b"v2"
    with pytest.raises(ResponseError, match="read only replica"):
        rc.execute_command("FUNCTION", "LOAD", LIB2)
    pc.execute_command("FUNCTION", "FLUSH")
    assert pc.execute_command("WAIT", 1, 10000) == 1
    assert listing(rc) == {}
