"""Blocking commands: BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP.

What `crates/engine/src/blocking.rs` promises, checked through real clients: a blocked client
is served by a write from another client (on either shard), clients are served in the order
they blocked, a timeout replies null, MULTI never blocks, CLIENT UNBLOCK and CLIENT KILL end
the wait, a client that disconnects while blocked loses nothing (the element stays for the
next reader), commands pipelined behind a blocking one wait for it, the served pop reaches
the log (as a pop) and survives a restart, and INFO / CLIENT LIST show blocked clients.

Every test runs against Redis too (`--target redis`), except the restart test. Waits use
generous deadlines and never assert how long anything took.
"""

import socket
import threading

import pytest
import redis

from helpers import encode_command, key_on, wait_until


class Blocked:
    """A blocking command running on its own connection in a thread."""

    def __init__(self, server, *args, resp3=False):
        kw = {"protocol": 3} if resp3 else {}
        self.client = server.client(socket_timeout=30, **kw)
        self.id = self.client.client_id()
        self.args = args
        self.result = None
        self.error = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            self.result = self.client.execute_command(*self.args)
        except Exception as e:  # noqa: BLE001 (the test inspects it)
            self.error = e
        self.done.set()

    def wait(self, timeout=10):
        assert self.done.wait(timeout), "blocked command did not return: %r" % (self.args,)
        # redis-py turns some of these replies into tuples.
        return list(self.result) if isinstance(self.result, tuple) else self.result


def blocked_count(r):
    return int(r.info("clients")["blocked_clients"])


def wait_blocked(r, n):
    """Waits until `n` clients are blocked (so the next one blocks after them)."""
    assert wait_until(lambda: blocked_count(r) == n, timeout=10), "expected %d blocked clients, INFO says %d" % (n, blocked_count(r))


def block(server, r, *args, resp3=False):
    before = blocked_count(r)
    b = Blocked(server, *args, resp3=resp3)
    wait_blocked(r, before + 1)
    return b


@pytest.fixture
def keys():
    """A key on each shard of a two-thread server (any keys on Redis)."""
    return key_on(0, "bk"), key_on(1, "bk")


def test_blpop_serves_at_once_when_data_is_there(r):
    r.rpush("l", "a", "b")
    assert r.blpop(["missing", "l"], timeout=0) == (b"l", b"a")
    assert r.brpop(["l"], timeout=0) == (b"l", b"b")
    assert r.exists("l") == 0


@pytest.mark.parametrize("shard", [0, 1])
def test_blpop_is_woken_by_a_push_on_either_shard(server, r, keys, shard):
    k = keys[shard]
    b = block(server, r, "BLPOP", k, 0)
    assert r.rpush(k, "x") == 1
    assert b.wait() == [k.encode(), b"x"]
    assert r.exists(k) == 0
    assert wait_until(lambda: blocked_count(r) == 0)


def test_clients_are_served_in_the_order_they_blocked(server, r, keys):
    k = keys[0]
    waiters = [block(server, r, "BLPOP", k, 0) for _ in range(4)]
    r.rpush(k, "a", "b", "c")
    assert [w.wait() for w in waiters[:3]] == [[k.encode(), v] for v in (b"a", b"b", b"c")]
    assert not waiters[3].done.is_set()
    assert blocked_count(r) == 1
    r.rpush(k, "d")
    assert waiters[3].wait() == [k.encode(), b"d"]


def test_a_pushed_element_goes_to_the_blocked_client_before_a_later_pop(server, r, keys):
    k = keys[1]
    b = block(server, r, "BRPOP", k, 0)
    # The push and the pop in one pipeline: the blocked client is served between them.
    p = r.pipeline(transaction=False)
    p.lpush(k, "v")
    p.lpop(k)
    assert p.execute() == [1, None]
    assert b.wait() == [k.encode(), b"v"]


def test_blpop_on_several_keys_takes_the_first_that_gets_data(server, r, keys):
    a, b_ = keys
    b = block(server, r, "BLPOP", a, b_, 0)
    r.rpush(b_, "from-b")
    assert b.wait() == [b_.encode(), b"from-b"]


def test_timeout_replies_null(server, r, keys):
    assert r.blpop([keys[0]], timeout=0.05) is None
    assert r.execute_command("BRPOPLPUSH", keys[0], keys[1], "0.05") is None
    assert r.execute_command("BLMOVE", keys[0], keys[1], "LEFT", "RIGHT", "0.05") is None
    assert r.execute_command("BLMPOP", "0.05", 2, keys[0], keys[1], "LEFT") is None
    assert blocked_count(r) == 0


def test_timeout_resp3_is_null(server, keys):
    r3 = server.client(protocol=3)
    assert r3.execute_command("BLPOP", keys[0], "0.05") is None


@pytest.mark.parametrize("timeout,error", [
    ("-1", "timeout is negative"),
    ("abc", "timeout is not a float or out of range"),
    ("1x", "timeout is not a float or out of range"),
])
def test_bad_timeouts(r, timeout, error):
    for args in (("BLPOP", "l", timeout), ("BRPOPLPUSH", "a", "b", timeout), ("BLMPOP", timeout, 1, "l", "LEFT"),
                 ("BZPOPMIN", "z", timeout)):
        with pytest.raises(redis.ResponseError, match=error):
            r.execute_command(*args)


def test_wrongtype_is_immediate(r):
    r.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.blpop(["str"], timeout=0)
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        r.execute_command("BZPOPMIN", "str", 0)


def test_multi_never_blocks(r, keys):
    p = r.pipeline(transaction=True)
    p.blpop([keys[0]], timeout=0)
    p.execute_command("BZPOPMIN", keys[0], 0)
    p.rpush(keys[0], "x")
    p.blpop([keys[0]], timeout=0)
    assert p.execute() == [None, None, 1, (keys[0].encode(), b"x")]


def test_a_push_inside_exec_serves_after_exec(server, r, keys):
    k = keys[0]
    b = block(server, r, "BLPOP", k, 0)
    p = r.pipeline(transaction=True)
    p.rpush(k, "1", "2")
    p.llen(k)
    assert p.execute() == [2, 2]
    assert b.wait() == [k.encode(), b"1"]
    assert r.lrange(k, 0, -1) == [b"2"]


def test_blmove_and_brpoplpush_move_when_woken(server, r, keys):
    src, dst = keys
    b = block(server, r, "BLMOVE", src, dst, "RIGHT", "LEFT", 0)
    r.rpush(src, "a", "b")
    assert b.wait() == b"b"
    assert r.lrange(dst, 0, -1) == [b"b"]
    b = block(server, r, "BRPOPLPUSH", "{t}s", "{t}d", 0)
    r.rpush("{t}s", "z")
    assert b.wait() == b"z"
    assert r.lrange("{t}d", 0, -1) == [b"z"]


def test_blmove_feeds_another_blocked_client(server, r):
    # One waiter's move makes the next waiter's key ready: a chain served in one go.
    first = block(server, r, "BLMOVE", "{c}a", "{c}b", "LEFT", "LEFT", 0)
    second = block(server, r, "BLPOP", "{c}b", 0)
    r.rpush("{c}a", "x")
    assert first.wait() == b"x"
    assert second.wait() == [b"{c}b", b"x"]
    assert r.exists("{c}a", "{c}b") == 0


def test_blmpop_with_count(server, r, keys):
    b = block(server, r, "BLMPOP", 0, 2, keys[0], keys[1], "RIGHT", "COUNT", 2)
    r.rpush(keys[1], "a", "b", "c")
    assert b.wait() == [keys[1].encode(), [b"c", b"b"]]


def test_a_client_blocked_on_a_key_of_another_type_keeps_waiting(server, r, keys):
    k = keys[0]
    b = block(server, r, "BLPOP", k, "0.5")
    r.set(k, "string now")
    r.delete(k)
    assert b.wait() is None


def test_client_unblock(server, r, keys):
    b = block(server, r, "BLPOP", keys[0], 0)
    assert r.client_unblock(b.id) == 1
    assert b.wait() is None
    b = block(server, r, "BLPOP", keys[1], 0)
    assert r.client_unblock(b.id, error=True) == 1
    b.wait()
    assert isinstance(b.error, redis.ResponseError) and "UNBLOCKED client unblocked via CLIENT UNBLOCK" in str(b.error)
    assert r.client_unblock(r.client_id()) == 0
    assert r.client_unblock(999999) == 0
    with pytest.raises(redis.ResponseError, match="CLIENT UNBLOCK reason should be TIMEOUT or ERROR"):
        r.execute_command("CLIENT", "UNBLOCK", b.id, "LATER")


def test_blocked_clients_in_info_and_client_list(server, r, keys):
    b = block(server, r, "BLPOP", keys[0], 0)
    line = [l for l in r.execute_command("CLIENT", "LIST").decode().splitlines() if "id=%d " % b.id in l][0]
    flags = dict(f.split("=", 1) for f in line.split() if "=" in f)["flags"]
    assert "b" in flags
    assert int(r.info("clients")["blocked_clients"]) == 1
    r.rpush(keys[0], "x")
    b.wait()
    assert wait_until(lambda: blocked_count(r) == 0)


def test_disconnect_while_blocked_loses_nothing(server, r, keys):
    k = keys[1]
    s = socket.create_connection((server.host, server.port))
    s.sendall(encode_command("BLPOP", k, 0))
    wait_blocked(r, 1)
    s.close()
    assert wait_until(lambda: blocked_count(r) == 0, timeout=10)
    r.rpush(k, "kept")
    assert r.lrange(k, 0, -1) == [b"kept"]


def test_client_kill_ends_the_wait(server, r, keys):
    b = block(server, r, "BLPOP", keys[0], 0)
    assert r.client_kill_filter(_id=b.id) == 1
    b.wait()
    assert isinstance(b.error, redis.ConnectionError)
    assert wait_until(lambda: blocked_count(r) == 0)
    r.rpush(keys[0], "kept")
    assert r.llen(keys[0]) == 1


def test_commands_pipelined_behind_a_blocking_one_wait_for_it(server, r, keys):
    k = keys[0]
    c = server.raw()
    c.send(encode_command("BLPOP", k, 0) + encode_command("RPUSH", k, "own") + encode_command("PING"))
    wait_blocked(r, 1)
    assert c.no_reply_within(0.2)
    r.rpush(k, "other")
    assert c.read_reply() == [k.encode(), b"other"]
    assert c.read_reply() == 1
    assert c.read_reply() == "PONG"
    c.close()


def test_keys_on_two_shards_in_one_blpop(server, r, keys):
    a, b_ = keys
    for target in (a, b_):
        b = block(server, r, "BLPOP", a, b_, 0)
        r.rpush(target, "v")
        assert b.wait() == [target.encode(), b"v"]
    b = block(server, r, "BLMOVE", a, b_, "LEFT", "RIGHT", 0)
    r.rpush(a, "moved")
    assert b.wait() == b"moved"
    assert r.lrange(b_, 0, -1) == [b"moved"]


def test_rename_into_a_blocked_key_serves_it(server, r):
    b = block(server, r, "BLPOP", "{r}dst", 0)
    r.rpush("{r}src", "x")
    r.rename("{r}src", "{r}dst")
    assert b.wait() == [b"{r}dst", b"x"]


def test_bzpopmin_bzpopmax_bzmpop(server, r, keys):
    k = keys[0]
    b = block(server, r, "BZPOPMIN", k, 0)
    r.zadd(k, {"a": 1, "b": 2, "c": 3})
    assert b.wait() == [k.encode(), b"a", 1.0]
    assert r.execute_command("BZPOPMAX", k, 0) == (k.encode(), b"c", 3.0)
    r.delete(k)
    b = block(server, r, "BZMPOP", 0, 1, k, "MIN", "COUNT", 5)
    r.zadd(k, {"x": 5, "y": 6})
    assert b.wait() == [k.encode(), [[b"x", b"5"], [b"y", b"6"]]]
    assert r.execute_command("BZPOPMIN", k, "0.05") is None


def test_bzpopmin_resp3_reply(server, keys):
    r3 = server.client(protocol=3)
    r3.zadd(keys[1], {"m": 1.5})
    assert r3.execute_command("BZPOPMIN", keys[1], 0) == [keys[1].encode(), b"m", 1.5]
