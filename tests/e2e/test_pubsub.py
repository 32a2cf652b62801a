"""Pub/sub: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, SSUBSCRIBE, SUNSUBSCRIBE,
PUBLISH, SPUBLISH and PUBSUB, with Redis 7.0's replies and errors.

What is checked: every command's replies and errors byte for byte (through the raw
`RespClient`, which keeps RESP3 pushes apart from arrays), RESP2 subscribed mode (only
(P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET, PING's ["pong", arg]), RESP3 pushes,
glob patterns, MULTI with subscriptions, CLIENT LIST/KILL for subscribers, INFO stats, the
introspection counts going back to zero when subscribers leave (UNSUBSCRIBE, RESET,
disconnect), delivery to many subscribers on many connections (so on every worker thread)
in publication order per publisher, a slow subscriber cut off by `client-output-buffer-limit`
while the server stays healthy, and a differential run of the same script against the real
redis-server.

The server runs with several worker threads (conftest's `--threads 2`): connections are dealt
round robin, so consecutive connections sit on different threads. Nothing here asserts on
timing: conditions are waited for with generous timeouts.
"""

import socket
import threading
import time

import pytest

from helpers import Err, Push, RespClient, encode_command, info_dict, wait_until
from test_differential import redis_and_abacus

ALLOWED = "only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"


def cant(name):
    return Err("ERR Can't execute '%s': %s" % (name, ALLOWED))


def replies(c, n):
    return [c.read_reply() for _ in range(n)]


def numsub(r, *channels):
    flat = r.execute_command("PUBSUB", "NUMSUB", *channels)
    return dict(zip(flat[::2], flat[1::2]))


@pytest.fixture(autouse=True)
def no_subscribers_left(r):
    """Connections of earlier tests leave their subscriptions as the server notices them close:
    start once they have."""
    assert wait_until(lambda: (lambda s: (s["pubsub_channels"], s["pubsub_patterns"], s["pubsubshard_channels"]))(
        r.info("stats")) == (0, 0, 0), timeout=10)


@pytest.fixture
def conns(server, r):
    made = []

    def make():
        c = server.raw(timeout=20)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


# -- replies and errors --------------------------------------------------------------------


def test_arity_and_subcommand_errors(c):
    for cmd in ("SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE"):
        assert c(cmd) == Err("ERR wrong number of arguments for '%s' command" % cmd.lower())
    assert c("PUBLISH", "ch") == Err("ERR wrong number of arguments for 'publish' command")
    assert c("SPUBLISH", "ch") == Err("ERR wrong number of arguments for 'spublish' command")
    assert c("PUBLISH", "ch", "m", "x") == Err("ERR wrong number of arguments for 'publish' command")
    assert c("PUBSUB") == Err("ERR wrong number of arguments for 'pubsub' command")
    assert c("PUBSUB", "foo") == Err("ERR unknown subcommand 'foo'. Try PUBSUB HELP.")
    assert c("PUBSUB", "channels", "a", "b") == Err(
        "ERR unknown subcommand or wrong number of arguments for 'channels'. Try PUBSUB HELP.")
    assert c("PUBSUB", "shardchannels", "a", "b") == Err(
        "ERR unknown subcommand or wrong number of arguments for 'shardchannels'. Try PUBSUB HELP.")
    assert c("PUBSUB", "numpat", "x") == Err("ERR wrong number of arguments for 'pubsub|numpat' command")
    assert c("PUBSUB", "help", "x") == Err("ERR wrong number of arguments for 'pubsub|help' command")
    assert c("PUBSUB", "numsub") == []
    assert c("PUBSUB", "shardnumsub") == []
    help_lines = c("PUBSUB", "HELP")
    assert help_lines[0] == "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    assert help_lines[-2:] == ["HELP", "    Prints this help."]
    assert len(help_lines) == 14


def test_publish_without_subscribers(c):
    assert c("PUBLISH", "nobody", "m") == 0
    assert c("SPUBLISH", "nobody", "m") == 0


def test_unsubscribe_without_subscriptions(c):
    # One reply per name, and [verb, nil, count] for "everything" with nothing subscribed;
    # none of it enters subscribed mode.
    assert c("UNSUBSCRIBE") == [b"unsubscribe", None, 0]
    assert c("PUNSUBSCRIBE") == [b"punsubscribe", None, 0]
    assert c("SUNSUBSCRIBE") == [b"sunsubscribe", None, 0]
    c.send(encode_command("UNSUBSCRIBE", "a", "b"))
    assert replies(c, 2) == [[b"unsubscribe", b"a", 0], [b"unsubscribe", b"b", 0]]
    c.send(encode_command("PUNSUBSCRIBE", "x", "y"))
    assert replies(c, 2) == [[b"punsubscribe", b"x", 0], [b"punsubscribe", b"y", 0]]
    assert c("SUNSUBSCRIBE", "s") == [b"sunsubscribe", b"s", 0]
    assert c("SET", "k", "v") == "OK"


def test_confirmation_counts(c):
    c.send(encode_command("SUBSCRIBE", "a", "b", "a"))
    assert replies(c, 3) == [[b"subscribe", b"a", 1], [b"subscribe", b"b", 2], [b"subscribe", b"a", 2]]
    # Channels and patterns share a count; shard channels have their own.
    c.send(encode_command("PSUBSCRIBE", "h?llo", "a*"))
    assert replies(c, 2) == [[b"psubscribe", b"h?llo", 3], [b"psubscribe", b"a*", 4]]
    c.send(encode_command("SSUBSCRIBE", "s1", "s2"))
    assert replies(c, 2) == [[b"ssubscribe", b"s1", 1], [b"ssubscribe", b"s2", 2]]
    c.send(encode_command("UNSUBSCRIBE"))
    got = replies(c, 2)
    assert sorted(g[1] for g in got) == [b"a", b"b"] and [g[2] for g in got] == [3, 2]
    # Patterns leave in the order they were subscribed (Redis keeps them in a list).
    c.send(encode_command("PUNSUBSCRIBE"))
    assert replies(c, 2) == [[b"punsubscribe", b"h?llo", 1], [b"punsubscribe", b"a*", 0]]
    # Still subscribed to shard channels: still in subscribed mode.
    assert c("GET", "x") == cant("get")
    assert c("UNSUBSCRIBE") == [b"unsubscribe", None, 0]
    c.send(encode_command("SUNSUBSCRIBE"))
    got = replies(c, 2)
    assert sorted(g[1] for g in got) == [b"s1", b"s2"] and [g[2] for g in got] == [1, 0]
    assert c("GET", "x") is None
    assert c("PING") == "PONG"


# -- RESP2 subscribed mode -----------------------------------------------------------------


def test_resp2_subscribed_mode_allows_only_a_few_commands(c):
    assert c("SUBSCRIBE", "ch") == [b"subscribe", b"ch", 1]
    assert c("GET", "x") == cant("get")
    assert c("CLIENT", "LIST") == cant("client|list")
    assert c("MULTI") == cant("multi")
    assert c("HELLO", "3") == cant("hello")
    assert c("PUBLISH", "ch", "m") == cant("publish")
    assert c("PUBSUB", "NUMSUB", "ch") == cant("pubsub|numsub")
    # Unknown commands and arity errors come first, as in Redis.
    assert c("NOSUCH") == Err("ERR unknown command 'NOSUCH', with args beginning with: ")
    assert c("GET") == Err("ERR wrong number of arguments for 'get' command")
    assert c("PING") == [b"pong", b""]
    assert c("PING", "hi") == [b"pong", b"hi"]
    assert c("PING", "a", "b") == Err("ERR wrong number of arguments for 'ping' command")
    assert c("PSUBSCRIBE", "p*") == [b"psubscribe", b"p*", 2]
    assert c("SSUBSCRIBE", "s") == [b"ssubscribe", b"s", 1]
    assert c("SUNSUBSCRIBE", "s") == [b"sunsubscribe", b"s", 0]
    assert c("PUNSUBSCRIBE", "p*") == [b"punsubscribe", b"p*", 1]
    assert c("UNSUBSCRIBE", "ch") == [b"unsubscribe", b"ch", 0]
    # Out of subscribed mode.
    assert c("GET", "x") is None
    assert c("PING") == "PONG"


def test_quit_and_reset_in_subscribed_mode(server, r, conns):
    c = conns()
    assert c("SUBSCRIBE", "q1") == [b"subscribe", b"q1", 1]
    assert c("RESET") == "RESET"
    assert numsub(r, "q1") == {b"q1": 0}
    assert c("GET", "x") is None
    assert c("SUBSCRIBE", "q2") == [b"subscribe", b"q2", 1]
    assert c("QUIT") == "OK"
    assert c.is_closed()
    assert wait_until(lambda: numsub(r, "q2") == {b"q2": 0}, timeout=10)


def test_multi_with_subscribe(c):
    assert c("MULTI") == "OK"
    assert c("SUBSCRIBE", "m1") == "QUEUED"
    assert c("SSUBSCRIBE", "m2") == "QUEUED"
    assert c("PSUBSCRIBE", "p*") == "QUEUED"
    assert c("EXEC") == [[b"subscribe", b"m1", 1],
                         Err("ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client"),
                         [b"psubscribe", b"p*", 2]]
    assert c("GET", "x") == cant("get")
    assert c("RESET") == "RESET"
    # Several confirmations of one queued command follow EXEC's header, which counts one
    # reply per command (Redis's framing).
    c.send(encode_command("MULTI") + encode_command("SUBSCRIBE", "a", "b") + encode_command("EXEC"))
    assert c.read_reply() == "OK"
    assert c.read_reply() == "QUEUED"
    c.sock.settimeout(10)
    assert c._readline() == b"*1"
    assert replies(c, 2) == [[b"subscribe", b"a", 1], [b"subscribe", b"b", 2]]


def test_client_reply_off_does_not_hide_pushes(server, r, conns):
    c = conns()
    c.send(encode_command("CLIENT", "REPLY", "OFF") + encode_command("SUBSCRIBE", "k", "l")
           + encode_command("PING"))
    assert replies(c, 2) == [[b"subscribe", b"k", 1], [b"subscribe", b"l", 2]]
    assert c.no_reply_within(0.3)
    assert r.publish("k", "hello") == 1
    assert c.read_reply() == [b"message", b"k", b"hello"]


# -- RESP3 -----------------------------------------------------------------------------------


def test_resp3_pushes_and_every_command_allowed(server, r, conns):
    c = conns()
    c("HELLO", "3")
    got = c("SUBSCRIBE", "a")
    assert isinstance(got, Push) and got == [b"subscribe", b"a", 1]
    assert c("SET", "k", "v") == "OK"
    assert c("GET", "k") == b"v"
    assert c("PING") == "PONG"
    # Publishing to itself: the message comes before PUBLISH's reply, as in Redis.
    c.send(encode_command("PUBLISH", "a", "to self"))
    msg = c.read_reply()
    assert isinstance(msg, Push) and msg == [b"message", b"a", b"to self"]
    assert c.read_reply() == 1
    assert isinstance(c("PSUBSCRIBE", "x*"), Push)
    assert r.publish("xy", "z") == 1
    msg = c.read_reply()
    assert isinstance(msg, Push) and msg == [b"pmessage", b"x*", b"xy", b"z"]
    assert c("SSUBSCRIBE", "s") == [b"ssubscribe", b"s", 1]
    assert r.execute_command("SPUBLISH", "s", "z") == 1
    msg = c.read_reply()
    assert isinstance(msg, Push) and msg == [b"smessage", b"s", b"z"]
    assert c("CLIENT", "LIST", "TYPE", "pubsub").count(b"\n") == 1
    assert c("UNSUBSCRIBE") == [b"unsubscribe", b"a", 1]
    got = c("UNSUBSCRIBE")
    assert isinstance(got, Push) and got == [b"unsubscribe", None, 1]
    assert c("PUNSUBSCRIBE") == [b"punsubscribe", b"x*", 0]
    assert c("SUNSUBSCRIBE") == [b"sunsubscribe", b"s", 0]
    # EXEC's array holds the confirmation as a push.
    assert c("MULTI") == "OK"
    assert c("SUBSCRIBE", "e") == "QUEUED"
    got = c("EXEC")
    assert got == [[b"subscribe", b"e", 1]] and isinstance(got[0], Push)


def next_message(p):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        m = p.get_message(timeout=1)
        if m is not None:
            return m
    raise AssertionError("no message within 10 s")


def test_redis_py_pubsub_resp2_and_resp3(server, r, r3):
    for client in (r, r3):
        p = client.pubsub()
        p.subscribe("rp.a")
        p.psubscribe("rp.*")
        assert next_message(p) == {"type": "subscribe", "pattern": None, "channel": b"rp.a", "data": 1}
        assert next_message(p) == {"type": "psubscribe", "pattern": None, "channel": b"rp.*", "data": 2}
        assert client.publish("rp.a", "hi") == 2
        got = [next_message(p), next_message(p)]
        assert got[0] == {"type": "message", "pattern": None, "channel": b"rp.a", "data": b"hi"}
        assert got[1] == {"type": "pmessage", "pattern": b"rp.*", "channel": b"rp.a", "data": b"hi"}
        p.close()
        assert wait_until(lambda: numsub(r, "rp.a") == {b"rp.a": 0}, timeout=10)


# -- patterns --------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern,matching,not_matching", [
    ("h?llo", ["hello", "hallo"], ["hllo", "heello"]),
    ("h*llo", ["hllo", "heeeello"], ["hell"]),
    ("h[ae]llo", ["hello", "hallo"], ["hillo"]),
    ("h[^e]llo", ["hallo", "hbllo"], ["hello"]),
    ("h[a-b]llo", ["hallo", "hbllo"], ["hcllo"]),
    ("h\\*llo", ["h*llo"], ["hello"]),
    # Redis's stringmatchlen matches no empty channel, not even with "*".
    ("*", ["anything"], [""]),
    ("Case*", ["Case1"], ["case1"]),
])
def test_pattern_matching(server, r, conns, pattern, matching, not_matching):
    c = conns()
    assert c("PSUBSCRIBE", pattern) == [b"psubscribe", pattern.encode(), 1]
    for ch in not_matching:
        assert r.publish(ch, "no") == 0
    for ch in matching:
        assert r.publish(ch, "yes") == 1
        assert c.read_reply() == [b"pmessage", pattern.encode(), ch.encode(), b"yes"]
    assert c.no_reply_within(0.2)


def test_channel_and_patterns_each_deliver(server, r, conns):
    c = conns()
    c.send(encode_command("SUBSCRIBE", "news.art") + encode_command("PSUBSCRIBE", "news.*", "*.art"))
    replies(c, 3)
    other = conns()
    assert other("PSUBSCRIBE", "news.*") == [b"psubscribe", b"news.*", 1]
    # One delivery per subscription: the channel's first, then each matching pattern's.
    assert r.publish("news.art", "m") == 4
    got = replies(c, 3)
    assert got[0] == [b"message", b"news.art", b"m"]
    assert sorted(got[1:]) == [[b"pmessage", b"*.art", b"news.art", b"m"],
                               [b"pmessage", b"news.*", b"news.art", b"m"]]
    assert other.read_reply() == [b"pmessage", b"news.*", b"news.art", b"m"]
    # Shard channels are a name space of their own.
    assert r.execute_command("SPUBLISH", "news.art", "m") == 0
    assert r.pubsub_numpat() == 2


# -- introspection ---------------------------------------------------------------------------


def stats(r):
    return r.info("stats")


def test_introspection_counts_follow_subscribers(server, r, conns):
    a, b = conns(), conns()
    a.send(encode_command("SUBSCRIBE", "i.a", "i.b") + encode_command("PSUBSCRIBE", "i.*")
           + encode_command("SSUBSCRIBE", "i.s"))
    replies(a, 4)
    b.send(encode_command("SUBSCRIBE", "i.a") + encode_command("PSUBSCRIBE", "i.*", "j.*"))
    replies(b, 3)
    assert sorted(r.pubsub_channels()) == [b"i.a", b"i.b"]
    assert sorted(r.pubsub_channels("i.[a]")) == [b"i.a"]
    assert r.pubsub_channels("zz*") == []
    assert numsub(r, "i.a", "i.b", "i.c", "i.s") == {b"i.a": 2, b"i.b": 1, b"i.c": 0, b"i.s": 0}
    assert r.pubsub_numpat() == 2  # distinct patterns
    assert r.execute_command("PUBSUB", "SHARDCHANNELS") == [b"i.s"]
    assert r.execute_command("PUBSUB", "SHARDCHANNELS", "x*") == []
    assert r.execute_command("PUBSUB", "SHARDNUMSUB", "i.s", "i.a") == [b"i.s", 1, b"i.a", 0]
    s = stats(r)
    assert (s["pubsub_channels"], s["pubsub_patterns"], s["pubsubshard_channels"]) == (2, 2, 1)
    lines = r.execute_command("CLIENT", "LIST").decode().splitlines()
    subscribed = [l for l in lines if " flags=P " in l]
    assert len(subscribed) == 2
    assert any(" sub=2 psub=1 ssub=1 " in l for l in subscribed)
    assert any(" sub=1 psub=2 ssub=0 " in l for l in subscribed)
    assert len(r.execute_command("CLIENT", "LIST", "TYPE", "pubsub").decode().splitlines()) == 2
    assert all(" flags=P " not in l
               for l in r.execute_command("CLIENT", "LIST", "TYPE", "normal").decode().splitlines())
    # Disconnecting leaves everything.
    a.close()
    b.close()
    assert wait_until(lambda: (lambda s: (s["pubsub_channels"], s["pubsub_patterns"], s["pubsubshard_channels"]))(
        stats(r)) == (0, 0, 0), timeout=10)
    assert r.pubsub_channels() == [] and r.pubsub_numpat() == 0
    assert numsub(r, "i.a") == {b"i.a": 0}


def test_timeout_spares_subscribers(server, r, conns):
    sub, idle = conns(), conns()
    assert sub("SUBSCRIBE", "patient") == [b"subscribe", b"patient", 1]
    assert idle("PING") == "PONG"
    r.config_set("timeout", 1)
    try:
        # A command after the change, so that each connection's next wait sees it.
        assert idle("PING") == "PONG"
        assert sub("PING") == [b"pong", b""]
        assert idle.is_closed(timeout=15)
        assert wait_until(lambda: r.publish("patient", "still here") == 1, timeout=5)
        assert sub.read_reply() == [b"message", b"patient", b"still here"]
    finally:
        server.client().config_set("timeout", 0)


def test_client_kill_type_pubsub(server, r, conns):
    a = conns()
    assert a("SUBSCRIBE", "kill.me") == [b"subscribe", b"kill.me", 1]
    assert r.execute_command("CLIENT", "KILL", "TYPE", "pubsub") == 1
    assert a.is_closed()
    assert wait_until(lambda: numsub(r, "kill.me") == {b"kill.me": 0}, timeout=10)
    assert r.execute_command("CLIENT", "KILL", "TYPE", "pubsub") == 0
    assert r.ping()


def test_unsubscribe_on_disconnect_many(server, r, conns):
    clients = [conns() for _ in range(20)]
    for i, c in enumerate(clients):
        c.send(encode_command("SUBSCRIBE", "d.all", "d.%d" % i) + encode_command("PSUBSCRIBE", "d.*"))
        replies(c, 3)
    assert numsub(r, "d.all") == {b"d.all": 20}
    assert r.publish("d.all", "x") == 40
    for c in clients:
        c.close()
    assert wait_until(lambda: numsub(r, "d.all") == {b"d.all": 0} and r.pubsub_numpat() == 0
                      and r.pubsub_channels("d.*") == [], timeout=10)
    assert r.publish("d.all", "x") == 0


# -- delivery across threads -----------------------------------------------------------------


def test_many_subscribers_on_every_thread_get_every_message_in_order(server, r, conns):
    """40 subscriber connections (dealt round robin over the worker threads), 3 publishers on
    their own connections publishing concurrently: every subscriber gets every message, and
    each publisher's messages in the order they were published."""
    subs = [conns() for _ in range(40)]
    for i, c in enumerate(subs):
        if i % 2:
            assert c("SUBSCRIBE", "fan") == [b"subscribe", b"fan", 1]
        else:
            c("HELLO", "3")
            assert c("PSUBSCRIBE", "fa?") == [b"psubscribe", b"fa?", 1]
    per_publisher = 300
    counts = []

    def publisher(p):
        c = server.raw(timeout=20)
        n = 0
        # Pipelined in bursts, so messages pile up in the subscribers' queues.
        for start in range(0, per_publisher, 50):
            cmds = [("PUBLISH", "fan", "%d:%d" % (p, k)) for k in range(start, start + 50)]
            n += sum(c.pipeline(cmds))
        counts.append(n)
        c.close()

    threads = [threading.Thread(target=publisher, args=(p,)) for p in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert counts == [per_publisher * 40] * 3
    for i, c in enumerate(subs):
        last = {0: -1, 1: -1, 2: -1}
        for _ in range(3 * per_publisher):
            m = c.read_reply()
            data = m[-1]
            if i % 2:
                assert m[:2] == [b"message", b"fan"]
            else:
                assert isinstance(m, Push) and m[:3] == [b"pmessage", b"fa?", b"fan"]
            p, k = map(int, data.split(b":"))
            assert k == last[p] + 1, "subscriber %d: publisher %d's message %d after %d" % (i, p, k, last[p])
            last[p] = k
        assert last == {0: per_publisher - 1, 1: per_publisher - 1, 2: per_publisher - 1}
        assert c.no_reply_within(0.05)


def test_unsubscribe_confirmation_comes_after_earlier_messages(server, r, conns):
    c = conns()
    assert c("SUBSCRIBE", "u") == [b"subscribe", b"u", 1]
    pub = conns()
    pub.pipeline([("PUBLISH", "u", str(i)) for i in range(200)])
    c.send(encode_command("UNSUBSCRIBE", "u"))
    got = []
    while True:
        m = c.read_reply()
        got.append(m)
        if m[0] == b"unsubscribe":
            break
    assert got[-1] == [b"unsubscribe", b"u", 0]
    assert [m[2] for m in got[:-1]] == [str(i).encode() for i in range(200)]
    assert pub("PUBLISH", "u", "late") == 0
    assert c.no_reply_within(0.2)


# -- slow subscribers ------------------------------------------------------------------------


@pytest.fixture
def small_pubsub_limit(r):
    old = r.config_get("client-output-buffer-limit")["client-output-buffer-limit"]
    yield lambda v: r.config_set("client-output-buffer-limit", v)
    r.config_set("client-output-buffer-limit", old)


def slow_subscriber(server, channel):
    """A raw socket with a small receive buffer that subscribes and then never reads."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(20)
    s.connect((server.host, server.port))
    s.sendall(encode_command("SUBSCRIBE", channel))
    buf = b""
    while buf.count(b"\r\n") < 6:
        buf += s.recv(100)
    return s


def closed_by_server(s):
    """Whether the server closed `s` (reads whatever is left first)."""
    s.settimeout(0.5)
    try:
        while True:
            data = s.recv(1 << 20)
            if not data:
                return True
    except socket.timeout:
        return False
    except OSError:
        return True


def test_slow_subscriber_is_disconnected_at_the_hard_limit(server, r, conns, small_pubsub_limit):
    small_pubsub_limit("pubsub 256kb 0 0")
    assert r.config_get("client-output-buffer-limit")["client-output-buffer-limit"].endswith(
        "pubsub 262144 0 0")
    before = stats(r).get("client_output_buffer_limit_disconnections")
    slow = slow_subscriber(server, "slow")
    try:
        fast = conns()
        assert fast("SUBSCRIBE", "slow") == [b"subscribe", b"slow", 1]
        payload = "x" * 10000
        pub = conns()
        # Up to 200 MB, far more than socket buffers hold, in bursts the fast subscriber
        # reads as they come: the slow one must be cut off, the fast one not.
        for burst in range(2000):
            assert set(pub.pipeline([("PUBLISH", "slow", payload)] * 10)) <= {1, 2}
            for _ in range(10):
                assert fast.read_reply()[:2] == [b"message", b"slow"]
            if numsub(r, "slow")[b"slow"] == 1:
                break
        assert numsub(r, "slow") == {b"slow": 1}
        assert closed_by_server(slow) or wait_until(lambda: closed_by_server(slow), timeout=10)
        # The server is healthy and the other subscriber still receives.
        assert r.ping()
        assert pub("PUBLISH", "slow", "after") == 1
        assert fast.read_reply() == [b"message", b"slow", b"after"]
        if not server.is_redis:
            assert stats(r)["client_output_buffer_limit_disconnections"] > before
    finally:
        slow.close()


def test_slow_subscriber_is_disconnected_past_the_soft_limit_seconds(server, r, conns, small_pubsub_limit):
    small_pubsub_limit("pubsub 0 128kb 1")
    slow = slow_subscriber(server, "soft")
    try:
        pub = conns()
        payload = "y" * 10000
        deadline = time.monotonic() + 60
        while numsub(r, "soft")[b"soft"] == 1 and time.monotonic() < deadline:
            pub.pipeline([("PUBLISH", "soft", payload)] * 20)
            time.sleep(0.05)
        assert numsub(r, "soft") == {b"soft": 0}
        assert closed_by_server(slow) or wait_until(lambda: closed_by_server(slow), timeout=10)
        assert r.ping()
    finally:
        slow.close()


def test_config_output_buffer_limit_syntax(r, c, small_pubsub_limit):
    def get():
        return r.config_get("client-output-buffer-limit")["client-output-buffer-limit"]

    small_pubsub_limit("normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60")
    assert get() == "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60"
    small_pubsub_limit("PUBSUB 1mb 512kb 5")
    assert get() == "normal 0 0 0 slave 268435456 67108864 60 pubsub 1048576 524288 5"
    small_pubsub_limit("replica 1 2 3 normal 4 5 6")
    assert get() == "normal 4 5 6 slave 1 2 3 pubsub 1048576 524288 5"
    small_pubsub_limit("")
    assert get() == "normal 4 5 6 slave 1 2 3 pubsub 1048576 524288 5"
    prefix = "ERR CONFIG SET failed (possibly related to argument 'client-output-buffer-limit') - "
    for bad, why in [("pubsub 1 2", "Wrong number of arguments in buffer limit configuration."),
                     ("foo 1 2 3", "Invalid client class specified in buffer limit configuration."),
                     ("master 1 2 3", "Invalid client class specified in buffer limit configuration."),
                     ("pubsub x 2 3", "Error in hard, soft or soft_seconds setting in buffer limit configuration."),
                     ("pubsub 1 2 -3", "Error in hard, soft or soft_seconds setting in buffer limit configuration."),
                     ("pubsub 1 2 3s", "Error in hard, soft or soft_seconds setting in buffer limit configuration.")]:
        assert c("CONFIG", "SET", "client-output-buffer-limit", bad) == Err(prefix + why)
    assert get() == "normal 4 5 6 slave 1 2 3 pubsub 1048576 524288 5"


def test_command_info(c):
    info = c("COMMAND", "INFO", "subscribe", "publish", "ssubscribe", "spublish",
             "pubsub|numpat", "pubsub|help")
    got = [(i[0], i[1], i[3], i[4], i[5], sorted(i[6])) for i in info]
    assert got == [
        (b"subscribe", -2, 0, 0, 0, ["@pubsub", "@slow"]),
        (b"publish", 3, 0, 0, 0, ["@fast", "@pubsub"]),
        (b"ssubscribe", -2, 1, -1, 1, ["@pubsub", "@slow"]),
        (b"spublish", 3, 1, 1, 1, ["@fast", "@pubsub"]),
        (b"pubsub|numpat", 2, 0, 0, 0, ["@pubsub", "@slow"]),
        (b"pubsub|help", 2, 0, 0, 0, ["@slow"]),
    ]


# -- against the real Redis ------------------------------------------------------------------

SCRIPT = [
    # (connection, command); connection 0 subscribes in RESP2, 1 in RESP3, 2 publishes.
    (0, ("UNSUBSCRIBE",)), (0, ("PUNSUBSCRIBE", "a", "b")), (0, ("SUNSUBSCRIBE",)),
    (0, ("SUBSCRIBE", "c1", "c2", "c1")), (0, ("PSUBSCRIBE", "c*", "x?")),
    (0, ("SSUBSCRIBE", "s1")), (0, ("GET", "k")), (0, ("PING",)), (0, ("PING", "m")),
    (0, ("CLIENT", "INFO")), (0, ("ECHO", "e")), (0, ("NOSUCH", "a")), (0, ("SUBSCRIBE",)),
    (1, ("HELLO", "3")), (1, ("SUBSCRIBE", "c1")), (1, ("PSUBSCRIBE", "*1")), (1, ("GET", "k")),
    (1, ("PING",)), (1, ("SSUBSCRIBE", "s1", "s2")), (1, ("PUBLISH", "c1", "self")),
    (2, ("PUBLISH", "c1", "hello")), (2, ("PUBLISH", "xy", "w")), (2, ("PUBLISH", "none", "w")),
    (2, ("SPUBLISH", "s1", "sh")), (2, ("SPUBLISH", "s2", "sh")), (2, ("SPUBLISH", "c1", "x")),
    (2, ("PUBSUB", "NUMSUB", "c1", "c2", "s1", "zz")), (2, ("PUBSUB", "NUMPAT")),
    (2, ("PUBSUB", "SHARDNUMSUB", "s1", "s2", "c1")), (2, ("PUBSUB", "CHANNELS", "c2")),
    (2, ("PUBSUB", "SHARDCHANNELS", "s2")), (2, ("PUBSUB", "HELP")), (2, ("PUBSUB", "NUMSUB")),
    (0, ("UNSUBSCRIBE", "c2", "nope")), (0, ("PUNSUBSCRIBE",)), (1, ("UNSUBSCRIBE", "c1")),
    (1, ("PUNSUBSCRIBE", "*1")), (1, ("UNSUBSCRIBE",)), (1, ("MULTI",)), (1, ("SUBSCRIBE", "m")),
    (1, ("SSUBSCRIBE", "m")), (1, ("EXEC",)), (0, ("UNSUBSCRIBE",)), (0, ("SUNSUBSCRIBE", "s1")),
    (0, ("GET", "k")), (0, ("MULTI",)), (0, ("PSUBSCRIBE", "q")), (0, ("EXEC",)),
    (0, ("GET", "k")), (0, ("RESET",)), (0, ("GET", "k")), (2, ("PUBSUB", "NUMPAT")),
    (1, ("SUNSUBSCRIBE", "s2")), (1, ("SUNSUBSCRIBE",)), (1, ("RESET",)), (2, ("PUBSUB", "NUMSUB", "m", "c1")),
    (2, ("CONFIG", "SET", "client-output-buffer-limit", "pubsub 1 2")),
]


def run_script(port):
    """Runs SCRIPT; returns every connection's replies and messages after each command.
    After each command every connection outside MULTI is sent a PING, and read up to its
    reply: whatever the command produced (its replies, the messages it published) came
    before. A connection inside MULTI is read until it stays quiet."""
    conns = [RespClient("127.0.0.1", port) for _ in range(3)]
    in_multi = [False] * 3
    out = []
    try:
        for who, cmd in SCRIPT:
            conns[who].send(encode_command(*cmd))
            name = cmd[0].upper()
            # The sender's own first reply is read before the others are pinged: once it is
            # in, what the command published is in every subscriber's queue. (Pinging first
            # raced it: a subscriber served by another server thread could answer its PING
            # before the PUBLISH had run.)
            own = None if name == "MULTI" else normalize(conns[who].read_reply())
            for i, x in enumerate(conns):
                got = []
                if i == who and name == "MULTI":
                    got.append(normalize(x.read_reply()))
                    in_multi[i] = got[0] == "OK"
                elif i == who and name in ("EXEC", "DISCARD", "RESET"):
                    in_multi[i] = False
                if in_multi[i]:
                    if i == who and name != "MULTI":
                        # Its reply (QUEUED or an error) comes for sure: waited for in
                        # full, so a loaded machine cannot push it past the quiet wait.
                        got.append(own)
                    x.sock.settimeout(0.3)
                    try:
                        while True:
                            got.append(normalize(x.read_reply()))
                    except (socket.timeout, TimeoutError):
                        pass
                    x.sock.settimeout(10)
                else:
                    if i == who and name != "MULTI":
                        # Its own first reply (which may look like the PING's).
                        got.append(own)
                    x.send(encode_command("PING"))
                    while True:
                        reply = x.read_reply()
                        if reply in ("PONG", [b"pong", b""]):
                            break
                        got.append(normalize(reply))
                out.append((who, cmd, i, got))
    finally:
        for c in conns:
            c.close()
    return out


def normalize(reply):
    """Replies whose content legitimately differs: client ids and addresses."""
    if isinstance(reply, bytes) and reply.startswith(b"id="):
        fields = dict(f.split(b"=", 1) for f in reply.split() if b"=" in f)
        return {k: fields[k] for k in (b"flags", b"sub", b"psub", b"ssub", b"resp", b"cmd")}
    if isinstance(reply, dict) and b"id" in reply:
        return {k: v for k, v in reply.items() if k != b"id"}
    if isinstance(reply, list):
        kind = "push" if isinstance(reply, Push) else "array"
        return (kind, [normalize(x) for x in reply])
    if isinstance(reply, Err):
        return ("err", reply.message)
    return reply


@pytest.mark.abacus_only("starts its own redis-server and abacus and compares them")
def test_differential_against_redis():
    with redis_and_abacus() as (rs, ab):
        want = run_script(rs.port)
        got = run_script(ab.port)
    assert len(got) == len(want)
    for w, g in zip(want, got):
        assert g == w
