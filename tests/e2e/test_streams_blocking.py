"""Blocking stream reads: XREAD BLOCK and XREADGROUP BLOCK on the shared blocking mechanism
(`crates/engine/src/blocking.rs`).

Checked through real clients: a blocked reader is woken by an XADD from another client on
either shard, readers are served in the order they blocked, `$` means "after what existed
when I blocked", a timeout replies null after about its time, a reader of several streams
is served by a write to any of them (one on each shard too) with that stream alone, a
consumer group reader gets the NOGROUP / UNBLOCKED errors when its group or stream goes
away, CLIENT UNBLOCK ends the wait, a reader that disconnects takes nothing with it (the
entry stays for the next reader, no pending entry is created), and a served XREADGROUP
reaches the log and survives a restart.

Every test runs against Redis too (`--target redis`), except the restart test.
"""

import time

import pytest

from helpers import key_on, wait_until
from test_blocking import Blocked, block, blocked_count, wait_blocked


@pytest.fixture
def keys():
    """A key on each shard of a two-thread server (any keys on Redis)."""
    return key_on(0, "sk"), key_on(1, "sk")


@pytest.mark.parametrize("shard", [0, 1])
def test_xread_is_woken_by_an_xadd_on_either_shard(server, r, keys, shard):
    k = keys[shard]
    r.xadd(k, {"old": 1}, id="1-0")
    b = block(server, r, "XREAD", "BLOCK", "0", "STREAMS", k, "$")
    r.xadd(k, {"new": 2}, id="2-0")
    assert b.wait() == [[k.encode(), [(b"2-0", {b"new": b"2"})]]]


def test_xread_on_a_missing_key_and_count(server, r):
    b = block(server, r, "XREAD", "COUNT", "1", "BLOCK", "0", "STREAMS", "nokey", "$")
    p = r.pipeline(transaction=True)
    p.xadd("nokey", {"a": 1}, id="1-0")
    p.xadd("nokey", {"a": 2}, id="2-0")
    p.execute()
    assert b.wait() == [[b"nokey", [(b"1-0", {b"a": b"1"})]]]


def test_dollar_is_the_last_id_when_blocking(server, r):
    r.xadd("s", {"a": 1}, id="5-0")
    b = block(server, r, "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    # Deleted and recreated with a smaller ID: not after what existed, no wake-up.
    r.delete("s")
    r.xadd("s", {"b": 2}, id="1-0")
    time.sleep(0.2)
    assert not b.done.is_set()
    r.xadd("s", {"c": 3}, id="6-0")
    assert b.wait() == [[b"s", [(b"6-0", {b"c": b"3"})]]]


def test_readers_are_served_in_the_order_they_blocked(server, r):
    r.xgroup_create("s", "g", id="$", mkstream=True)
    readers = [block(server, r, "XREADGROUP", "GROUP", "g", "c%d" % i, "COUNT", "1", "BLOCK", "0", "STREAMS", "s", ">") for i in range(3)]
    for i in range(3):
        r.xadd("s", {"n": i}, id="%d-0" % (i + 1))
    got = [b.wait() for b in readers]
    assert got == [[[b"s", [(b"%d-0" % (i + 1), {b"n": b"%d" % i})]]] for i in range(3)]
    pending = {p["message_id"]: p["consumer"] for p in r.xpending_range("s", "g", "-", "+", 10)}
    assert pending == {b"1-0": b"c0", b"2-0": b"c1", b"3-0": b"c2"}


def test_every_xread_reader_gets_the_same_entry(server, r):
    readers = [block(server, r, "XREAD", "BLOCK", "0", "STREAMS", "s", "$") for _ in range(3)]
    r.xadd("s", {"a": 1}, id="1-0")
    assert [b.wait() for b in readers] == [[[b"s", [(b"1-0", {b"a": b"1"})]]]] * 3


def test_timeout_replies_null_after_its_time(server, r):
    start = time.monotonic()
    b = Blocked(server, "XREAD", "BLOCK", "300", "STREAMS", "s", "$")
    assert b.wait() == []  # redis-py's reading of the null array
    took = time.monotonic() - start
    assert 0.29 <= took < 5, took
    b = Blocked(server, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "200", "STREAMS", "s", ">")
    b.wait()
    assert "NOGROUP" in str(b.error)
    r.xgroup_create("s", "g", id="$", mkstream=True)
    start = time.monotonic()
    b = Blocked(server, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "200", "STREAMS", "s", ">")
    assert b.wait() == []
    assert time.monotonic() - start >= 0.19


def test_several_streams_served_by_a_write_to_either(server, r, keys):
    a, b_ = keys
    for k in (a, b_):
        r.xadd(k, {"x": 0}, id="1-0")
    b = block(server, r, "XREAD", "BLOCK", "0", "STREAMS", a, b_, "$", "$")
    r.xadd(b_, {"x": 1}, id="2-0")
    assert b.wait() == [[b_.encode(), [(b"2-0", {b"x": b"1"})]]]
    b = block(server, r, "XREAD", "BLOCK", "0", "STREAMS", a, b_, "$", "$")
    r.xadd(a, {"x": 2}, id="3-0")
    assert b.wait() == [[a.encode(), [(b"3-0", {b"x": b"2"})]]]


def test_xreadgroup_learns_that_its_group_or_stream_is_gone(server, r):
    r.xgroup_create("s", "g", id="$", mkstream=True)
    b = block(server, r, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    r.xgroup_destroy("s", "g")
    b.wait()
    assert str(b.error) == "NOGROUP the consumer group this client was blocked on no longer exists"
    r.xgroup_create("s", "g", id="$")
    b = block(server, r, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    r.delete("s")
    b.wait()
    assert str(b.error) == "UNBLOCKED the stream key no longer exists"


def test_xread_keeps_waiting_when_its_stream_is_replaced(server, r):
    r.xadd("s", {"a": 1}, id="1-0")
    b = block(server, r, "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    r.delete("s")
    r.set("s", "string")
    time.sleep(0.2)
    assert not b.done.is_set()
    r.delete("s")
    r.xadd("s", {"a": 2}, id="2-0")
    assert b.wait() == [[b"s", [(b"2-0", {b"a": b"2"})]]]


def test_client_unblock(server, r):
    b = block(server, r, "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    assert r.client_unblock(b.id) == 1
    assert b.wait() == []
    r.xgroup_create("s", "g", id="$", mkstream=True)
    b = block(server, r, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    assert r.client_unblock(b.id, error=True) == 1
    b.wait()
    assert str(b.error) == "UNBLOCKED client unblocked via CLIENT UNBLOCK"


def test_a_reader_that_disconnects_takes_nothing(server, r):
    r.xgroup_create("s", "g", id="$", mkstream=True)
    c = server.raw()
    before = blocked_count(r)
    c.send(b"*9\r\n$10\r\nXREADGROUP\r\n$5\r\nGROUP\r\n$1\r\ng\r\n$4\r\ngone\r\n$5\r\nBLOCK\r\n$1\r\n0\r\n$7\r\nSTREAMS\r\n$1\r\ns\r\n$1\r\n>\r\n")
    wait_blocked(r, before + 1)
    c.close()
    assert wait_until(lambda: blocked_count(r) == before, timeout=10)
    r.xadd("s", {"a": 1}, id="1-0")
    assert r.xpending("s", "g")["pending"] == 0
    assert r.xreadgroup("g", "next", {"s": ">"}) == [[b"s", [(b"1-0", {b"a": b"1"})]]]


def test_noack_and_count_when_served(server, r):
    r.xgroup_create("s", "g", id="$", mkstream=True)
    b = block(server, r, "XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "NOACK", "BLOCK", "0", "STREAMS", "s", ">")
    p = r.pipeline(transaction=True)
    for i in range(3):
        p.xadd("s", {"n": i}, id="%d-0" % (i + 1))
    p.execute()
    assert b.wait() == [[b"s", [(b"1-0", {b"n": b"0"}), (b"2-0", {b"n": b"1"})]]]
    assert r.xpending("s", "g")["pending"] == 0
    assert r.xinfo_groups("s")[0]["last-delivered-id"] == b"2-0"


def test_resp3_reply_of_a_served_reader(server, r):
    b = block(server, r, "XREAD", "BLOCK", "0", "STREAMS", "s", "$", resp3=True)
    r.xadd("s", {"a": 1}, id="1-0")
    assert b.wait() == {b"s": [[(b"1-0", {b"a": b"1"})]]}


@pytest.mark.abacus_only("restarts the server on its data directory")
def test_a_served_xreadgroup_survives_a_restart(server):
    n = server.start(["--appendfsync", "always"])
    r = n.client()
    r.xgroup_create("s", "g", id="$", mkstream=True)
    b = Blocked(n, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    assert wait_until(lambda: blocked_count(r) == 1, timeout=10)
    r.xadd("s", {"a": 1}, id="1-0")
    assert b.wait() == [[b"s", [(b"1-0", {b"a": b"1"})]]]
    before = (r.xpending("s", "g"), r.xinfo_groups("s"))
    n.proc.kill()
    n.proc.wait()
    n.start()
    r = n.client()
    assert (r.xpending("s", "g"), r.xinfo_groups("s")) == before
