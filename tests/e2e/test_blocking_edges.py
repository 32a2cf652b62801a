"""Every way a blocked client's wait can end while what it waits on changes (issue 48).

A client blocks; another client changes what it waits on: the destination of a moving pop
takes another type, the stream goes away (DEL, FLUSHALL, FLUSHDB, SWAPDB, RENAME, MOVE,
overwritten), its consumer group is destroyed, a key of another type appears, the server
becomes a replica. Each case gets Redis 7.0's reply at once, or keeps waiting where Redis
keeps waiting, and nothing is lost: an element not delivered stays where it was.

Every test runs against Redis too (`--target redis`). Waits use generous deadlines and never
assert how long anything took; "keeps waiting" is checked by serving the client afterwards
(its reply is then the later element, not an error).
"""

import pytest
import redis

from helpers import encode_command
from test_blocking import block


def err_text(b):
    assert b.error is not None, "expected an error, got %r" % (b.result,)
    return str(b.error)


@pytest.mark.parametrize("cmd", [("BRPOPLPUSH", "{t}src", "{t}dst", "0"),
                                 ("BLMOVE", "{t}src", "{t}dst", "RIGHT", "LEFT", "0")])
def test_moving_pop_to_a_destination_of_another_type_gets_wrongtype(server, r, cmd):
    r.set("{t}dst", "nolist")
    b = block(server, r, *cmd)
    r.rpush("{t}src", "foo")
    b.wait()
    assert err_text(b).startswith("WRONGTYPE")
    # The element stays in the source; the destination is untouched.
    assert r.lrange("{t}src", 0, -1) == [b"foo"]
    assert r.get("{t}dst") == b"nolist"


def test_several_moving_pops_to_a_bad_destination_all_get_wrongtype(server, r):
    r.set("{t}dst", "nolist")
    waiters = [block(server, r, "BRPOPLPUSH", "{t}src", "{t}dst", "0") for _ in range(3)]
    r.rpush("{t}src", "a", "b")
    for b in waiters:
        b.wait()
        assert err_text(b).startswith("WRONGTYPE")
    assert r.lrange("{t}src", 0, -1) == [b"a", b"b"]


def test_destination_changing_type_while_waiting(server, r):
    r.rpush("{t}dst", "x")
    b = block(server, r, "BLMOVE", "{t}src", "{t}dst", "LEFT", "RIGHT", "0")
    r.delete("{t}dst")
    r.set("{t}dst", "s")
    r.rpush("{t}src", "foo")
    b.wait()
    assert err_text(b).startswith("WRONGTYPE")
    assert r.lrange("{t}src", 0, -1) == [b"foo"]


def test_a_pop_whose_key_takes_another_type_keeps_waiting(server, r):
    b = block(server, r, "BLPOP", "l", "0")
    r.set("l", "string")
    r.delete("l")
    r.rpush("l", "z")
    assert b.wait() == [b"l", b"z"]


def test_a_pop_is_served_from_the_key_that_became_ready(server, r):
    # Redis serves from the ready key alone, whatever the other keys hold now.
    b = block(server, r, "BLPOP", "{k}1", "{k}2", "0")
    r.set("{k}1", "string")
    r.rpush("{k}2", "v")
    assert b.wait() == [b"{k}2", b"v"]
    b = block(server, r, "BZPOPMIN", "{z}1", "{z}2", "0")
    r.set("{z}1", "string")
    r.zadd("{z}2", {"m": 1})
    assert b.wait() == [b"{z}2", b"m", 1.0]


def test_moving_pop_whose_source_takes_another_type_keeps_waiting(server, r):
    b = block(server, r, "BLMOVE", "{m}src", "{m}dst", "LEFT", "LEFT", "0")
    r.set("{m}src", "s")
    r.rpush("{m}dst", "v")  # the destination's readiness serves nothing
    r.delete("{m}src")
    r.rpush("{m}src", "e")
    assert b.wait() == b"e"
    assert r.lrange("{m}dst", 0, -1) == [b"e", b"v"]


def stream_with_group(r, key="s"):
    r.xadd(key, {"f": "v"}, id="1-1")
    r.xgroup_create(key, "g", id="$")


GONE = "UNBLOCKED the stream key no longer exists"


@pytest.mark.parametrize("change", [
    lambda r: r.delete("s"),
    lambda r: r.flushall(),
    lambda r: r.flushdb(),
    lambda r: r.execute_command("FLUSHALL", "ASYNC"),
    lambda r: r.swapdb(0, 1),
    lambda r: r.rename("s", "s2"),
    lambda r: r.move("s", 1),
    lambda r: r.set("s", "x"),
], ids=["del", "flushall", "flushdb", "flushall-async", "swapdb", "rename", "move", "overwritten"])
def test_xreadgroup_learns_its_stream_is_gone(server, r, change):
    stream_with_group(r)
    b = block(server, r, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    change(r)
    b.wait()
    assert err_text(b) == GONE


def test_xreadgroup_learns_its_group_is_destroyed(server, r):
    stream_with_group(r)
    b = block(server, r, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    assert r.xgroup_destroy("s", "g") == 1
    b.wait()
    assert err_text(b) == "NOGROUP the consumer group this client was blocked on no longer exists"


def test_xread_without_group_keeps_waiting_through_a_flush(server, r):
    r.xadd("s", {"f": "v"}, id="1-1")
    b = block(server, r, "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    r.flushall()
    r.xadd("s", {"a": "b"}, id="2-1")
    assert b.wait() == [[b"s", [(b"2-1", {b"a": b"b"})]]]


def test_pop_served_after_swapdb_brings_data_in(server, r):
    other = server.client(db=1)
    other.rpush("l", "a")
    b = block(server, r, "BLPOP", "l", "0")
    r.swapdb(0, 1)
    assert b.wait() == [b"l", b"a"]
    assert r.exists("l") == 0


def test_becoming_a_replica_unblocks_with_an_error_and_closes(server):
    # A private server: it becomes a replica of a port where nothing listens.
    target = server.start()
    r = target.client()
    b = block(target, r, "BLPOP", "l", "0")
    try:
        r.execute_command("REPLICAOF", "127.0.0.1", "1")
        b.wait()
        assert err_text(b) == "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"
    finally:
        r.execute_command("REPLICAOF", "NO", "ONE")


def test_xadd_after_the_last_sequence_moves_to_the_next_millisecond(r):
    assert r.xadd("x", {"f": "v"}, id="2577343934890-18446744073709551615") == b"2577343934890-18446744073709551615"
    assert r.xadd("x", {"f2": "v2"}) == b"2577343934891-0"


@pytest.mark.parametrize("kind", ["channel", "pattern", "shard"])
@pytest.mark.parametrize("resp", [2, 3])
def test_publish_after_an_acknowledged_unsubscribe_of_everything_counts_nobody(server, r, kind, resp):
    sub_cmd, unsub_cmd, pub_cmd = {
        "channel": ("SUBSCRIBE", "UNSUBSCRIBE", "PUBLISH"),
        "pattern": ("PSUBSCRIBE", "PUNSUBSCRIBE", "PUBLISH"),
        "shard": ("SSUBSCRIBE", "SUNSUBSCRIBE", "SPUBLISH"),
    }[kind]
    for _ in range(20):
        c = server.raw()
        if resp == 3:
            c.execute("HELLO", "3")
        c.send(encode_command(sub_cmd, "a", "b", "c"))
        for _ in range(3):
            c.read_reply()
        c.send(encode_command(unsub_cmd))
        for _ in range(3):
            c.read_reply()
        assert r.execute_command(pub_cmd, "a", "hello") == 0
        c.close()
