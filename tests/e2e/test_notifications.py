"""Keyspace notifications (notify-keyspace-events): the parameter's parsing and canonical
form, and the messages themselves compared with the real redis-server 7.0.

The differential test runs the same seeded random sequence of writes and reads over every
command family (strings, bits, keys, expiry, hashes, sets and their stores, HyperLogLogs,
lists, sorted sets and their stores, the blocking pops with data or a short timeout, GEO,
SORT with BY/GET patterns and STORE)
on both servers, each with a PSUBSCRIBE `__key*@*__:*` connection, and compares the whole
message streams. Both servers run with active expiry off (DEBUG SET-ACTIVE-EXPIRE 0), so a
key expires when a command touches it, at the same point of both streams; short expiries
(PEXPIRE of a few ms) are only set right before a pause that outlasts them, so no command
races a deadline. Abacus runs with two threads and the keys are untagged, so multi-key
commands mostly span both shards (the scratch keyspace of exec.rs). After every command a
marker is published on both servers: a mismatch is reported with the command that caused
it and the ones before. Rerun a seed with `-k 'test_differential_notifications[SEED-...]'`.

Active expiry's "expired" and maxmemory's "evicted" events are checked against each server
on its own (their timing and choice of keys are the servers'), waiting for conditions with
generous deadlines, never asserting on time.
"""

import os
import random
import threading
import time

import pytest
import redis

from test_differential import Err, _client, _run, redis_and_abacus  # noqa: F401

SEEDS = [int(x) for x in os.environ.get("NOTIFY_SEEDS", "1,2,3").split(",")]
COMMANDS_PER_SEED = int(os.environ.get("NOTIFY_COMMANDS", "400"))
HISTORY = 8
PATTERN = b"__key*@*__:*"
MARK = b"__keyevent@15__:zz-step"

STRINGS = [b"s1", b"s2", b"s3", b"s4", b"n1", b"n2"]
HASHES = [b"h1", b"h2", b"h3"]
SETS = [b"t1", b"t2", b"t3", b"t4"]
HLLS = [b"p1", b"p2", b"p3"]
LISTS = [b"l1", b"l2", b"l3"]
ZSETS = [b"z1", b"z2", b"z3"]
STREAMS = [b"x1", b"x2", b"x3"]
ALL_KEYS = STRINGS + HASHES + SETS + HLLS + LISTS + ZSETS + STREAMS + [b"missing1", b"missing2"]


# ---------------------------------------------------------------------------
# the parameter


@pytest.fixture(scope="module")
def pair():
    with redis_and_abacus() as (rs, ab):
        cr, ca = _client(rs), _client(ab)
        yield rs, ab, cr, ca
        cr.close()
        ca.close()


CONFIG_VALUES = ["KEA", "A", "An", "Agn", "g$lshzxetdn", "KEm", "Kx", "", "KEAm", "KEz",
                 "Elg", "n", "Kn", "KEn", "KEAn", "$n", "AKEmn", "tdn", "EEKK", "mmm", "Ed"]
BAD_VALUES = ["KEX", "a", "K E", "KE!", "1", "ke", "KEA\u00e9"]


def test_config_set_get_as_redis(pair):
    _, _, cr, ca = pair
    for value in CONFIG_VALUES:
        got = []
        for c in (cr, ca):
            assert _run(c, [b"CONFIG", b"SET", b"notify-keyspace-events", value.encode()]) == b"OK"
            got.append(_run(c, [b"CONFIG", b"GET", b"notify-keyspace-events"]))
        assert got[0] == got[1], value
    # Values Redis 7.0.15 prints, so that a change on both sides is noticed.
    for value, canonical in [("KEA", b"AKE"), ("Kx", b"xK"), ("KEAn", b"AKE"), ("KEn", b"nKE"), ("", b"")]:
        _run(ca, [b"CONFIG", b"SET", b"notify-keyspace-events", value.encode()])
        assert _run(ca, [b"CONFIG", b"GET", b"notify-keyspace-events"]) == [b"notify-keyspace-events", canonical]


def test_config_set_errors_as_redis(pair):
    _, _, cr, ca = pair
    for c in (cr, ca):
        _run(c, [b"CONFIG", b"SET", b"notify-keyspace-events", b"Kx"])
    for value in BAD_VALUES:
        errs = [_run(c, [b"CONFIG", b"SET", b"notify-keyspace-events", value.encode()]) for c in (cr, ca)]
        assert isinstance(errs[1], Err), value
        assert errs[0] == errs[1], value
        # Nothing changed.
        assert _run(ca, [b"CONFIG", b"GET", b"notify-keyspace-events"]) == [b"notify-keyspace-events", b"xK"]
    assert errs[1].message == ("ERR CONFIG SET failed (possibly related to argument "
                               "'notify-keyspace-events') - Invalid event class character. "
                               "Use 'Ag$lshzxeKEtmdn'.")
    for c in (cr, ca):
        _run(c, [b"CONFIG", b"SET", b"notify-keyspace-events", b""])


# ---------------------------------------------------------------------------
# the differential test


class Gen:
    def __init__(self, rnd):
        self.r = rnd
        self.t = 1

    def stream_id(self, new=False):
        """An explicit stream ID: the next one (an XADD), or a recent one."""
        if new:
            self.t += self.r.randint(0, 2)
            return b"%d-%d" % (self.t, self.r.randint(0, 1))
        return b"%d-%d" % (max(1, self.t - self.r.randint(0, 5)), self.r.randint(0, 1))

    def key(self, pool=None):
        r = self.r
        if pool is None or r.random() < 0.1:
            return r.choice(ALL_KEYS)
        return r.choice(pool)

    def member(self):
        return self.r.choice([b"a", b"b", b"c", b"d", b"1", b"2", b"3"])

    def members(self, lo=1, hi=4):
        return [self.member() for _ in range(self.r.randint(lo, hi))]

    def num(self):
        return str(self.r.randint(-20, 20)).encode()

    def long_ttl(self):
        return str(self.r.randint(100000, 900000)).encode()

    def command(self):
        """One command (a list of arguments), or ("expire-soon", key)."""
        r, k = self.r, self.key
        s, h, t, p = (lambda: k(STRINGS)), (lambda: k(HASHES)), (lambda: k(SETS)), (lambda: k(HLLS))
        li, z = (lambda: k(LISTS)), (lambda: k(ZSETS))
        end = lambda: r.choice([b"LEFT", b"RIGHT"])  # noqa: E731
        minmax = lambda: r.choice([b"MIN", b"MAX"])  # noqa: E731
        score = lambda: str(r.randint(-5, 5)).encode()  # noqa: E731
        x, sid = (lambda: k(STREAMS)), self.stream_id
        choices = [
            # strings
            lambda: [b"SET", s(), self.num()],
            lambda: [b"SET", s(), b"v"] + r.choice([[b"NX"], [b"XX"], [b"GET"], [b"KEEPTTL"],
                                                     [b"PX", self.long_ttl()], [b"EX", b"1000"],
                                                     [b"PXAT", b"1"], [b"NX", b"GET"], [b"XX", b"PX", b"500000"]]),
            lambda: [b"SETNX", s(), b"x"],
            lambda: [b"SETEX", s(), b"1000", b"x"],
            lambda: [b"PSETEX", s(), self.long_ttl(), b"x"],
            lambda: [b"GETSET", s(), self.num()],
            lambda: [b"GETDEL", s()],
            lambda: [b"GETEX", s()] + r.choice([[], [b"PERSIST"], [b"PX", self.long_ttl()], [b"PXAT", b"1"], [b"EX", b"100"]]),
            lambda: [b"MSET"] + [x for _ in range(r.randint(1, 3)) for x in (s(), self.num())],
            lambda: [b"MSETNX"] + [x for _ in range(r.randint(1, 3)) for x in (s(), self.num())],
            lambda: [b"APPEND", s(), b"z"],
            lambda: [b"SETRANGE", s(), str(r.randint(0, 5)).encode(), r.choice([b"", b"ab"])],
            lambda: [b"INCR", s()],
            lambda: [b"DECR", s()],
            lambda: [b"INCRBY", s(), self.num()],
            lambda: [b"DECRBY", s(), self.num()],
            lambda: [b"INCRBYFLOAT", s(), b"1.5"],
            lambda: [b"GET", s()],
            lambda: [b"MGET", s(), s()],
            lambda: [b"STRLEN", s()],
            # bits
            lambda: [b"SETBIT", s(), str(r.randint(0, 20)).encode(), r.choice([b"0", b"1"])],
            lambda: [b"BITOP", r.choice([b"AND", b"OR", b"XOR"]), s(), s(), s()],
            lambda: [b"BITOP", b"NOT", s(), s()],
            lambda: [b"BITFIELD", s()] + r.choice([[b"SET", b"u8", b"0", b"7"], [b"GET", b"u4", b"0"],
                                                   [b"INCRBY", b"u2", b"0", b"3", b"OVERFLOW", b"FAIL", b"INCRBY", b"u2", b"0", b"3"],
                                                   [b"OVERFLOW", b"FAIL", b"INCRBY", b"u2", b"0", b"9"]]),
            lambda: [b"BITCOUNT", s()],
            # keys and expiry
            lambda: [b"DEL"] + [k() for _ in range(r.randint(1, 3))],
            lambda: [b"UNLINK"] + [k() for _ in range(r.randint(1, 3))],
            lambda: [b"EXISTS", k(), k()],
            lambda: [b"TYPE", k()],
            lambda: [b"TTL", k()],
            lambda: [b"PTTL", k()],
            lambda: [b"RENAME", k(), k()],
            lambda: [b"RENAMENX", k(), k()],
            lambda: [b"COPY", k(), k()] + r.choice([[], [b"REPLACE"], [b"DB", b"1"], [b"DB", b"1", b"REPLACE"]]),
            lambda: [b"MOVE", k(), b"1"],
            lambda: [b"EXPIRE", k(), self.long_ttl()] + r.choice([[], [b"NX"], [b"XX"], [b"GT"], [b"LT"]]),
            lambda: [b"PEXPIRE", k(), r.choice([self.long_ttl(), b"-5", b"0"])],
            lambda: [b"EXPIREAT", k(), r.choice([b"1", b"99999999999"])],
            lambda: [b"PEXPIREAT", k(), r.choice([b"1", b"99999999999999"])],
            lambda: [b"PERSIST", k()],
            lambda: ("expire-soon", k()),
            # hashes
            lambda: [b"HSET", h()] + [x for _ in range(r.randint(1, 3)) for x in (self.member(), self.num())],
            lambda: [b"HMSET", h(), self.member(), self.num()],
            lambda: [b"HSETNX", h(), self.member(), b"x"],
            lambda: [b"HDEL", h()] + self.members(),
            lambda: [b"HINCRBY", h(), self.member(), self.num()],
            lambda: [b"HINCRBYFLOAT", h(), self.member(), b"0.5"],
            lambda: [b"HGET", h(), self.member()],
            lambda: [b"HGETALL", h()],
            lambda: [b"HLEN", h()],
            # sets
            lambda: [b"SADD", t()] + self.members(),
            lambda: [b"SREM", t()] + self.members(),
            lambda: [b"SPOP", t(), b"100"],
            lambda: [b"SMOVE", t(), t(), self.member()],
            lambda: [r.choice([b"SINTERSTORE", b"SUNIONSTORE", b"SDIFFSTORE"]), t(), t(), t()],
            lambda: [r.choice([b"SINTER", b"SUNION", b"SDIFF"]), t(), t()],
            lambda: [b"SISMEMBER", t(), self.member()],
            lambda: [b"SCARD", t()],
            # HyperLogLogs
            lambda: [b"PFADD", p()] + self.members(0, 3),
            lambda: [b"PFMERGE", p(), p(), p()],
            lambda: [b"PFCOUNT", p()],
            # lists (the blocking forms with a timeout never block: MULTI-less, data or not)
            lambda: [r.choice([b"LPUSH", b"RPUSH"]), li()] + self.members(),
            lambda: [r.choice([b"LPUSHX", b"RPUSHX"]), li()] + self.members(),
            lambda: [r.choice([b"LPOP", b"RPOP"]), li()] + r.choice([[], [b"2"], [b"0"]]),
            lambda: [b"LMPOP", b"2", li(), li(), end()] + r.choice([[], [b"COUNT", b"3"]]),
            lambda: [b"LMOVE", li(), li(), end(), end()],
            lambda: [b"RPOPLPUSH", li(), li()],
            lambda: [b"LINSERT", li(), r.choice([b"BEFORE", b"AFTER"]), self.member(), b"x"],
            lambda: [b"LSET", li(), str(r.randint(-2, 2)).encode(), b"y"],
            lambda: [b"LREM", li(), str(r.randint(-1, 1)).encode(), self.member()],
            lambda: [b"LTRIM", li(), str(r.randint(0, 2)).encode(), str(r.randint(-2, 3)).encode()],
            lambda: [b"LRANGE", li(), b"0", b"-1"],
            lambda: [b"LLEN", li()],
            lambda: [b"LINDEX", li(), b"0"],
            # sorted sets
            lambda: [b"ZADD", z()] + r.choice([[], [b"NX"], [b"XX"], [b"GT"], [b"CH"]]) + [x for _ in range(r.randint(1, 3)) for x in (score(), self.member())],
            lambda: [b"ZADD", z(), b"INCR", score(), self.member()],
            lambda: [b"ZINCRBY", z(), score(), self.member()],
            lambda: [b"ZREM", z()] + self.members(),
            lambda: [r.choice([b"ZPOPMIN", b"ZPOPMAX"]), z()] + r.choice([[], [b"2"]]),
            lambda: [b"ZMPOP", b"2", z(), z(), minmax()] + r.choice([[], [b"COUNT", b"2"]]),
            lambda: [r.choice([b"BZPOPMIN", b"BZPOPMAX"]), z(), z(), b"0.01"],
            lambda: [b"BZMPOP", b"0.01", b"2", z(), z(), minmax()],
            lambda: [r.choice([b"BLPOP", b"BRPOP"]), li(), li(), b"0.01"],
            lambda: [b"BLMPOP", b"0.01", b"1", li(), end()],
            lambda: [b"BLMOVE", li(), li(), end(), end(), b"0.01"],
            lambda: [b"BRPOPLPUSH", li(), li(), b"0.01"],
            lambda: [b"ZREMRANGEBYSCORE", z(), score(), score()],
            lambda: [b"ZREMRANGEBYRANK", z(), b"0", str(r.randint(-1, 1)).encode()],
            lambda: [b"ZREMRANGEBYLEX", z(), b"-", b"[c"],
            lambda: [r.choice([b"ZUNIONSTORE", b"ZINTERSTORE", b"ZDIFFSTORE"]), z(), b"2", z(), z()],
            lambda: [b"ZRANGESTORE", z(), z(), b"0", str(r.randint(-1, 2)).encode()],
            lambda: [b"ZRANGE", z(), b"0", b"-1", b"WITHSCORES"],
            lambda: [b"ZSCORE", z(), self.member()],
            lambda: [b"ZCARD", z()],
            lambda: [b"GEOADD", z(), b"13.36", b"38.11", self.member()],
            lambda: [b"GEOSEARCHSTORE", z(), z(), b"FROMLONLAT", b"13.36", b"38.11", b"BYRADIUS", b"10", b"km", b"ASC"],
            lambda: [b"SORT", r.choice([li(), z(), t()]), b"ALPHA", b"STORE", li()],
            # (a set unsorted has no order to compare: BY nosort only on lists)
            lambda: [b"SORT", li(), b"BY", b"nosort", b"GET", b"s*", b"ALPHA"],
            lambda: [b"SORT", t(), b"ALPHA", b"GET", b"s*", b"GET", b"#"],
            lambda: [b"SORT", li(), b"BY", b"h*->a", b"GET", b"#", b"ALPHA"],
            # streams
            lambda: [b"XADD", x(), sid(True), b"f", self.num()],
            lambda: [b"XADD", x()] + r.choice([[b"NOMKSTREAM"], [b"MAXLEN", b"2"], [b"MAXLEN", b"~", b"0"], [b"MINID", sid()]]) + [sid(True), b"f", b"v"],
            lambda: [b"XDEL", x(), sid(), sid()],
            lambda: [b"XTRIM", x(), b"MAXLEN", r.choice([b"0", b"1", b"5"])],
            lambda: [b"XSETID", x(), sid(True)],
            lambda: [b"XGROUP", b"CREATE", x(), b"g", r.choice([b"$", b"0"])] + r.choice([[], [b"MKSTREAM"]]),
            lambda: [b"XGROUP", b"SETID", x(), b"g", b"0"],
            lambda: [b"XGROUP", b"DESTROY", x(), b"g"],
            lambda: [b"XGROUP", b"CREATECONSUMER", x(), b"g", r.choice([b"c1", b"c2"])],
            lambda: [b"XGROUP", b"DELCONSUMER", x(), b"g", r.choice([b"c1", b"c2"])],
            lambda: [b"XREADGROUP", b"GROUP", b"g", r.choice([b"c1", b"c2", b"c3"]), b"COUNT", b"2", b"STREAMS", x(), b">"],
            lambda: [b"XACK", x(), b"g", sid()],
            lambda: [b"XCLAIM", x(), b"g", r.choice([b"c3", b"c4"]), b"0", sid()],
            lambda: [b"XAUTOCLAIM", x(), b"g", r.choice([b"c4", b"c5"]), b"0", b"0", b"COUNT", b"1"],
            lambda: [b"XRANGE", x(), b"-", b"+"],
            lambda: [b"XLEN", x()],
        ]
        return r.choice(choices)()


def _collect(sub, count, deadline_s=60.0):
    """The pmessages until `count` step markers have arrived: one list of (channel, message)
    per step."""
    steps, current = [], []
    deadline = time.monotonic() + deadline_s
    while len(steps) < count:
        assert time.monotonic() < deadline, "only %d of %d steps arrived: %r" % (len(steps), count, current)
        m = sub.get_message(timeout=1.0)
        if not m or m["type"] != "pmessage":
            continue
        if m["channel"] == MARK:
            steps.append(current)
            current = []
        else:
            current.append((m["channel"], m["data"]))
    return steps


def _subscriber(proc):
    c = redis.Redis(host=proc.host, port=proc.port, decode_responses=False, socket_timeout=30)
    sub = c.pubsub()
    sub.psubscribe(PATTERN)
    deadline = time.monotonic() + 10
    while True:
        m = sub.get_message(timeout=1.0)
        if m and m["type"] == "psubscribe":
            return c, sub
        assert time.monotonic() < deadline, "no psubscribe confirmation"


def _expired_destination(cmd, r_ev, a_ev):
    """The one known difference: a store whose result is empty deletes its destination, and
    when that destination had expired without being reclaimed yet (active expiry is off
    here), Redis 7.0 deletes it with dbDelete, which ignores expiry, and fires "del"; Abacus
    reclaims it as expired, as any other access would, and fires "expired"."""
    if not any(a.upper().endswith(b"STORE") for a in cmd):
        return False
    swap = {b"del": b"expired", b"__keyevent@0__:del": b"__keyevent@0__:expired"}
    return [(swap.get(c, c), swap.get(m, m)) for c, m in r_ev] == a_ev


@pytest.mark.abacus_only("starts its own redis-server and abacus and compares them")
@pytest.mark.parametrize("flags", ["KEA", "KEAnm"])
@pytest.mark.parametrize("seed", SEEDS)
def test_differential_notifications(seed, flags):
    with redis_and_abacus() as (rs, ab):
        cr, ca = _client(rs), _client(ab)
        subs = []
        try:
            for c in (cr, ca):
                assert _run(c, [b"DEBUG", b"SET-ACTIVE-EXPIRE", b"0"]) == b"OK"
                assert _run(c, [b"CONFIG", b"SET", b"notify-keyspace-events", flags.encode()]) == b"OK"
            subs = [_subscriber(rs), _subscriber(ab)]
            gen = Gen(random.Random(seed))
            history = []
            for step in range(COMMANDS_PER_SEED):
                cmd = gen.command()
                if isinstance(cmd, tuple):
                    # A short expiry, then a pause that outlasts it: the key expires before
                    # any command can touch it, on both servers.
                    cmd = [b"PEXPIRE", cmd[1], b"5"]
                    replies = [_run(c, cmd) for c in (cr, ca)]
                    time.sleep(0.03)
                else:
                    replies = [_run(c, cmd) for c in (cr, ca)]
                history.append((cmd, replies))
                name = cmd[0].upper()
                if name not in (b"TTL", b"PTTL", b"SPOP", b"SINTER", b"SUNION", b"SDIFF"):
                    assert replies[0] == replies[1], (cmd, replies)
                for c in (cr, ca):
                    _run(c, [b"PUBLISH", MARK, str(step).encode()])
            got = [_collect(sub, COMMANDS_PER_SEED) for _, sub in subs]
            total = sum(len(x) for x in got[0])
            assert total > COMMANDS_PER_SEED // 2, "too few events to mean anything: %d" % total
            for step, (r_ev, a_ev) in enumerate(zip(*got)):
                if r_ev != a_ev and _expired_destination(history[step][0], r_ev, a_ev):
                    continue
                if r_ev != a_ev:
                    context = "\n".join("  %r -> %r" % h for h in history[max(0, step - HISTORY):step + 1])
                    pytest.fail("step %d (%r): redis published %r, abacus %r\nlast commands:\n%s"
                                % (step, history[step][0], r_ev, a_ev, context))
        finally:
            for c, sub in subs:
                sub.close()
                c.close()
            cr.close()
            ca.close()


# ---------------------------------------------------------------------------
# active expiry and eviction, on each server


@pytest.fixture
def private(server):
    """A client of a server of its own (Redis: the shared one, flushed), with notifications
    reset afterwards."""
    if server.is_redis:
        client = server.client(decode_responses=False)
        client.flushall()
        proc = server.main if hasattr(server, "main") else None
    else:
        proc = server.start(["--save", "", "--appendonly", "no"])
        client = proc.client(decode_responses=False)
    yield client
    client.config_set("notify-keyspace-events", "")
    client.config_set("maxmemory", 0)
    client.config_set("maxmemory-policy", "noeviction")
    client.close()


def _pubsub(client):
    sub = client.pubsub()
    sub.psubscribe(PATTERN)
    return sub


def _drain_until(sub, done, deadline_s=30.0):
    """pmessages (channel, data) until done(messages) holds."""
    got = []
    deadline = time.monotonic() + deadline_s
    while not done(got):
        assert time.monotonic() < deadline, "condition not reached; got %d messages: %r" % (len(got), got[:20])
        m = sub.get_message(timeout=0.5)
        if m and m["type"] == "pmessage":
            got.append((m["channel"], m["data"]))
    return got


def test_active_expiry_publishes_expired(private):
    c = private
    c.config_set("notify-keyspace-events", "Ex")
    sub = _pubsub(c)
    keys = [b"ae:%d" % i for i in range(60)]
    p = c.pipeline(transaction=False)
    for k in keys:
        p.set(k, b"v", px=50)
    p.set(b"ae:kept", b"v")
    p.execute()
    # Nobody touches the keys: only active expiry can reclaim them.
    got = _drain_until(sub, lambda g: len(g) >= len(keys))
    assert sorted(got) == sorted((b"__keyevent@0__:expired", k) for k in keys)
    # Only E: no keyspace channel; SET itself is not in class x.
    assert c.exists(b"ae:kept") == 1
    sub.close()


def test_no_k_or_e_publishes_nothing(private):
    c = private
    c.config_set("notify-keyspace-events", "A")
    sub = _pubsub(c)
    c.set(b"q", b"1")
    c.delete(b"q")
    c.publish(b"__keyspace@0__:end", b"end")
    got = _drain_until(sub, lambda g: any(ch == b"__keyspace@0__:end" for ch, _ in g))
    assert got == [(b"__keyspace@0__:end", b"end")]
    sub.close()


def test_eviction_publishes_evicted(private, server):
    c = private
    c.config_set("notify-keyspace-events", "KEe")
    sub = _pubsub(c)
    base = int(c.info("memory")["used_memory"])
    c.config_set("maxmemory-policy", "allkeys-lru")
    c.config_set("maxmemory", base + 8 * 1024 * 1024)
    value = b"x" * 1000
    written = 0
    start_evicted = int(c.info("stats")["evicted_keys"])
    while int(c.info("stats")["evicted_keys"]) - start_evicted < 200:
        assert written < 200000, "nothing was evicted"
        p = c.pipeline(transaction=False)
        for i in range(written, written + 1000):
            p.set(b"ev:%d" % i, value)
        p.execute()
        written += 1000
    c.config_set("maxmemory", 0)
    n = int(c.info("stats")["evicted_keys"]) - start_evicted
    # Every eviction's events are out before the reply of the write that evicted: all of them
    # come before this marker.
    c.publish(b"__keyspace@0__:zz-end", b"end")
    got = _drain_until(sub, lambda g: g and g[-1] == (b"__keyspace@0__:zz-end", b"end"))[:-1]
    events = [(ch, d) for ch, d in got if ch.startswith(b"__keyevent@0__:")]
    spaces = [(ch, d) for ch, d in got if ch.startswith(b"__keyspace@0__:")]
    assert all(ch == b"__keyevent@0__:evicted" for ch, _ in events)
    assert len(events) == n
    # Each shard's thread publishes its own evictions (keyspace, then keyevent), so the two
    # threads' messages interleave: the same keys, not necessarily in the same order.
    assert sorted(spaces) == sorted((b"__keyspace@0__:" + k, b"evicted") for _, k in events)
    # The evicted keys are gone.
    p = c.pipeline(transaction=False)
    for _, k in events:
        p.exists(k)
    assert sum(p.execute()) == 0
    sub.close()


# ---------------------------------------------------------------------------
# blocked clients served by a later write


def _blocked_pop_events(proc):
    """The events of four blocking pops, each served by a push from another client while it
    waits (the write's event, then the pop's, then "del" for the emptied key)."""
    c = redis.Redis(host=proc.host, port=proc.port, socket_timeout=30)
    c.config_set("notify-keyspace-events", "KEA")
    sub_client, sub = _subscriber(proc)
    events = []
    try:
        for cmd in (["BLPOP", "l", "5"], ["BLMOVE", "l", "m", "LEFT", "RIGHT", "5"],
                    ["BZPOPMIN", "z", "5"], ["BLMPOP", "5", "1", "l", "RIGHT", "COUNT", "3"]):
            blocked = redis.Redis(host=proc.host, port=proc.port, socket_timeout=30)
            t = threading.Thread(target=blocked.execute_command, args=cmd)
            t.start()
            wait_blocked(c, 1)
            if cmd[0] == "BZPOPMIN":
                c.zadd("z", {"a": 1})
            else:
                c.rpush("l", "x", "y")
            t.join()
            blocked.close()
            c.delete("l", "m")
            c.publish(MARK, b"done")
            events.append(_collect(sub, 1)[0])
    finally:
        sub.close()
        sub_client.close()
        c.close()
    return events


def wait_blocked(c, n, deadline_s=10.0):
    deadline = time.monotonic() + deadline_s
    while int(c.info("clients")["blocked_clients"]) != n:
        assert time.monotonic() < deadline, "the client never blocked"
        time.sleep(0.01)


@pytest.mark.abacus_only("starts its own redis-server and abacus and compares them")
def test_blocked_pops_notify_as_redis():
    with redis_and_abacus() as (rs, ab):
        r_events, a_events = _blocked_pop_events(rs), _blocked_pop_events(ab)
    assert all(r_events), r_events
    assert r_events == a_events
