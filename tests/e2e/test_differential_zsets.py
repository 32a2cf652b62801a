"""Differential test of the sorted-set family: seeded random sequences against the real Redis
(7.0) and Abacus (the server pair, client and exact error parsing of test_differential.py).

Each seed's `random.Random(seed)` first sets `zset-max-listpack-entries` / `-value` on both
servers (small limits, so sets cross the listpack -> skiplist conversion within a few
commands; or Redis's defaults), then generates a fixed number of commands over a small pool
of keys: ZADD with every option combination (and the invalid ones), scores at the edges
(inf, -inf, -0, 1e300, 0.1 sums, hex, overflowing and malformed texts), ZINCRBY, ZREM, the
whole ZRANGE family with random bounds, REV, LIMIT and WITHSCORES, ZRANGESTORE, the
ZREMRANGEBY* commands, ZUNION/ZINTER/ZDIFF and their STORE forms over sorted sets, plain sets
(members score 1), missing keys and strings (WRONGTYPE) with WEIGHTS and AGGREGATE,
ZINTERCARD, ZPOPMIN/ZPOPMAX/ZMPOP, ZSCORE/ZMSCORE/ZRANK/ZCOUNT/ZLEXCOUNT, ZRANDMEMBER and
ZSCAN. After each command the touched key is read back with TYPE, OBJECT ENCODING (of sorted
sets), ZRANGE 0 -1 WITHSCORES in RESP2 and the same in RESP3 on a raw connection that keeps
the double's text, and every reply must be equal.

Lex ranges are only meaningful when every member has the same score (Redis answers
differently by encoding otherwise), so the BYLEX commands use their own keys, which only
score-0 ZADDs and removals write. Random replies are compared by class: ZRANDMEMBER's size
and membership, ZSCAN's full iteration as a sorted list (skiplist scan order is hash order
in Redis).

Half the keys carry the `{zt}` tag: Abacus runs with `--threads 2`, so multi-key commands
over untagged keys mostly span both shards (the executor's cross-shard path). Rerun a seed
with `-k 'test_differential_zsets[SEED]'`; DIFF_ZSET_SEEDS / DIFF_ZSET_COMMANDS override.
"""

import os
import random
import socket

import pytest

from test_differential import Err, _client, _run, redis_and_abacus  # noqa: F401 (Err: reprs)

pytestmark = pytest.mark.abacus_only("starts its own redis-server and abacus and compares them")

SEEDS = [int(x) for x in os.environ.get("DIFF_ZSET_SEEDS", "21,22,23,24").split(",")]
COMMANDS_PER_SEED = int(os.environ.get("DIFF_ZSET_COMMANDS", "400"))
HISTORY = 12

TAGGED = [b"{zt}a", b"{zt}b", b"{zt}c"]
UNTAGGED = [b"za", b"zb", b"zc", b"zd"]
LEX = [b"{zt}lex", b"zlex"]
SETS = [b"{zt}set", b"zset"]          # plain sets: valid algebra sources, WRONGTYPE elsewhere
STRINGS = [b"{zt}str", b"zstr"]
MISSING = [b"{zt}missing", b"zmissing"]

MEMBERS = [b"a", b"b", b"c", b"d", b"e", b"f", b"g", b"h", b"1", b"10", b"", b"m" * 70]
SCORES = [b"0", b"1", b"2", b"-1", b"3", b"-3", b"1.5", b"0.1", b"0.2", b"-0", b"inf", b"-inf",
          b"+inf", b"1e300", b"-1e300", b"1e-7", b"0x10", b"2.5e3", b"100", b"1e-310"]
BAD_SCORES = [b"nan", b"abc", b"1e400", b"", b" 1", b"1 ", b"1e-400", b"--1"]
BOUNDS = [b"-inf", b"+inf", b"inf", b"0", b"1", b"(1", b"2", b"(2", b"-1", b"(-1", b"1.5", b"(",
          b"3", b"100", b"(inf", b"1e400"]
BAD_BOUNDS = [b"[1", b"abc", b"nan", b"1x"]
LEX_BOUNDS = [b"-", b"+", b"[a", b"(a", b"[c", b"(c", b"[e", b"(h", b"[", b"(", b"[zz"]
BAD_LEX = [b"a", b"", b"++", b"-a"]


class Gen:
    def __init__(self, rnd):
        self.r = rnd

    def key(self):
        return self.r.choice(self.r.choice([TAGGED, UNTAGGED]))

    def source(self):
        x = self.r.random()
        if x < 0.12:
            return self.r.choice(SETS)
        if x < 0.2:
            return self.r.choice(MISSING)
        if x < 0.23:
            return self.r.choice(STRINGS)
        if x < 0.28:
            return self.r.choice(LEX)
        return self.key()

    def any_key(self):
        return self.source() if self.r.random() < 0.3 else self.key()

    def score_key(self):
        """A key for writes that set scores: never a lex key (their members all score 0)."""
        k = self.any_key()
        return self.key() if k in LEX else k

    def member(self):
        return self.r.choice(MEMBERS)

    def score(self):
        if self.r.random() < 0.04:
            return self.r.choice(BAD_SCORES)
        if self.r.random() < 0.2:
            return str(self.r.randint(-20, 20)).encode()
        return self.r.choice(SCORES)

    def bound(self):
        return self.r.choice(BAD_BOUNDS) if self.r.random() < 0.04 else self.r.choice(BOUNDS)

    def lex(self):
        return self.r.choice(BAD_LEX) if self.r.random() < 0.04 else self.r.choice(LEX_BOUNDS)

    def index(self):
        return str(self.r.choice([0, 1, 2, -1, -2, 5, -5, 100, -100, self.r.randint(-8, 8)])).encode()

    def limit(self):
        r = self.r
        return [b"LIMIT", str(r.choice([0, 1, 2, -1, 5])).encode(), str(r.choice([0, 1, 2, -1, 3, 10])).encode()]

    def zadd(self):
        r = self.r
        opts = [o for o in [b"NX", b"XX", b"GT", b"LT", b"CH", b"INCR"] if r.random() < 0.15]
        r.shuffle(opts)
        pairs = []
        for _ in range(1 if b"INCR" in opts and r.random() < 0.9 else r.randint(1, 4)):
            pairs += [self.score(), self.member()]
        if r.random() < 0.03:
            pairs = pairs[:-1]
        k = self.score_key()
        return [b"ZADD", k] + opts + pairs, k

    def keys(self, lo=1, hi=3):
        return [self.source() for _ in range(self.r.randint(lo, hi))]

    def algebra(self):
        r = self.r
        op = r.choice([b"ZUNION", b"ZINTER", b"ZDIFF"])
        store = r.random() < 0.5
        srcs = self.keys()
        n = len(srcs)
        if r.random() < 0.04:
            n = r.choice([0, n + 1, -1])
        args = [op + (b"STORE" if store else b"")]
        dest = self.key()
        if store:
            args.append(dest)
        args += [str(n).encode()] + srcs
        if op != b"ZDIFF" or r.random() < 0.05:
            if r.random() < 0.4:
                args += [b"WEIGHTS"] + [r.choice([b"1", b"2", b"-1", b"0", b"0.5", b"inf", b"x"]) for _ in srcs]
            if r.random() < 0.4:
                args += [b"AGGREGATE", r.choice([b"SUM", b"MIN", b"MAX", b"sum", b"avg"])]
        if not store and r.random() < 0.6:
            args.append(b"WITHSCORES")
        return args, dest if store else srcs[0]

    def range_cmd(self):
        r = self.r
        k = self.any_key() if r.random() < 0.9 else self.source()
        x = r.random()
        ws = [b"WITHSCORES"] if r.random() < 0.5 else []
        if x < 0.2:
            return [b"ZRANGE", k, self.index(), self.index()] + ([b"REV"] if r.random() < 0.3 else []) + ws, k
        if x < 0.35:
            cmd = [b"ZRANGE", k, self.bound(), self.bound(), b"BYSCORE"]
            if r.random() < 0.4:
                cmd.append(b"REV")
            if r.random() < 0.4:
                cmd += self.limit()
            return cmd + ws, k
        if x < 0.45:
            lk = r.choice(LEX)
            cmd = [b"ZRANGE", lk, self.lex(), self.lex(), b"BYLEX"] + ([b"REV"] if r.random() < 0.4 else [])
            if r.random() < 0.4:
                cmd += self.limit()
            return cmd, lk
        if x < 0.55:
            return [r.choice([b"ZRANGEBYSCORE", b"ZREVRANGEBYSCORE"]), k, self.bound(), self.bound()] + ws + (self.limit() if r.random() < 0.3 else []), k
        if x < 0.65:
            lk = r.choice(LEX)
            return [r.choice([b"ZRANGEBYLEX", b"ZREVRANGEBYLEX"]), lk, self.lex(), self.lex()] + (self.limit() if r.random() < 0.3 else []), lk
        if x < 0.72:
            return [b"ZREVRANGE", k, self.index(), self.index()] + ws, k
        if x < 0.85:
            dest = self.key()
            cmd = [b"ZRANGESTORE", dest, self.source()]
            if r.random() < 0.5:
                cmd += [self.bound(), self.bound(), b"BYSCORE"] + ([b"REV"] if r.random() < 0.3 else []) + (self.limit() if r.random() < 0.3 else [])
            else:
                cmd += [self.index(), self.index()]
            return cmd, dest
        # option soup: syntax errors and conflicts
        opts = [r.choice([b"BYSCORE", b"BYLEX", b"REV", b"WITHSCORES", b"LIMIT", b"1", b"x"]) for _ in range(r.randint(1, 4))]
        return [b"ZRANGE", k, self.bound(), self.bound()] + opts, k

    def command(self):
        r = self.r
        x = r.random()
        if x < 0.22:
            return self.zadd()
        if x < 0.27:
            lk = r.choice(LEX)
            opts = [r.choice([b"NX", b"XX", b"CH"])] if r.random() < 0.2 else []
            return [b"ZADD", lk] + opts + sum([[b"0", self.member()] for _ in range(r.randint(1, 3))], []), lk
        if x < 0.32:
            k = self.score_key()
            return [b"ZINCRBY", k, self.score(), self.member()], k
        if x < 0.37:
            k = r.choice([self.any_key(), r.choice(LEX)])
            return [b"ZREM", k] + [self.member() for _ in range(r.randint(1, 3))], k
        if x < 0.55:
            return self.range_cmd()
        if x < 0.65:
            return self.algebra()
        if x < 0.69:
            k = self.any_key()
            return [r.choice([b"ZREMRANGEBYRANK"]), k, self.index(), self.index()], k
        if x < 0.72:
            k = self.any_key()
            return [b"ZREMRANGEBYSCORE", k, self.bound(), self.bound()], k
        if x < 0.74:
            lk = r.choice(LEX)
            return [b"ZREMRANGEBYLEX", lk, self.lex(), self.lex()], lk
        if x < 0.79:
            k = self.any_key()
            cmd = [r.choice([b"ZPOPMIN", b"ZPOPMAX"]), k]
            if r.random() < 0.6:
                cmd.append(r.choice([b"0", b"1", b"2", b"5", b"-1", b"x"]))
            return cmd, k
        if x < 0.83:
            srcs = self.keys(1, 3)
            n = len(srcs) if r.random() < 0.95 else r.choice([0, len(srcs) + 2])
            cmd = [b"ZMPOP", str(n).encode()] + srcs + [r.choice([b"MIN", b"MAX", b"max", b"mid"])]
            if r.random() < 0.5:
                cmd += [b"COUNT", r.choice([b"1", b"2", b"10", b"0", b"-1"])]
            return cmd, srcs[0]
        if x < 0.86:
            srcs = self.keys(1, 3)
            cmd = [b"ZINTERCARD", str(len(srcs)).encode()] + srcs
            if r.random() < 0.4:
                cmd += [b"LIMIT", r.choice([b"0", b"1", b"2", b"-1"])]
            return cmd, srcs[0]
        k = self.any_key() if r.random() < 0.8 else r.choice(LEX)
        x = r.random()
        if x < 0.2:
            return [b"ZSCORE", k, self.member()], k
        if x < 0.35:
            return [b"ZMSCORE", k] + [self.member() for _ in range(r.randint(1, 3))], k
        if x < 0.5:
            return [r.choice([b"ZRANK", b"ZREVRANK"]), k, self.member()], k
        if x < 0.65:
            return [b"ZCOUNT", k, self.bound(), self.bound()], k
        if x < 0.75:
            lk = r.choice(LEX)
            return [b"ZLEXCOUNT", lk, self.lex(), self.lex()], lk
        if x < 0.85:
            return [b"ZCARD", k], k
        if x < 0.93:
            cmd = [b"ZRANDMEMBER", k]
            if r.random() < 0.7:
                cmd.append(r.choice([b"0", b"1", b"3", b"100", b"-1", b"-5", b"x"]))
                if r.random() < 0.5:
                    cmd.append(b"WITHSCORES")
            return cmd, k
        return [b"ZSCAN", k, b"0"], k


class Resp3:
    """A raw RESP3 connection whose doubles stay text (redis-py would turn them into floats,
    hiding formatting differences)."""

    def __init__(self, proc):
        self.sock = socket.create_connection((proc.host, proc.port), timeout=10)
        self.buf = b""
        self.call(b"HELLO", b"3")

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            assert chunk, "connection closed"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            assert chunk, "connection closed"
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t in (b"*", b"~", b"%", b">"):
            n = int(rest)
            if n < 0:
                return ("nullarray",)
            return (t, [self.read() for _ in range(n * (2 if t == b"%" else 1))])
        if t == b"$":
            n = int(rest)
            return ("nullbulk",) if n < 0 else self._exact(n)
        return (t, rest)

    def call(self, *args):
        self.sock.sendall(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
        return self.read()

    def close(self):
        self.sock.close()


def _scan_all(c, key):
    cursor, seen = b"0", []
    for _ in range(10000):
        reply = _run(c, [b"ZSCAN", key, cursor, b"COUNT", b"3"])
        if isinstance(reply, Err):
            return reply
        cursor, items = reply
        seen += [tuple(items[i:i + 2]) for i in range(0, len(items), 2)]
        if cursor == b"0":
            return sorted(set(seen))
    return "scan did not finish"


@pytest.fixture(scope="module")
def zset_pair():
    with redis_and_abacus() as (rs, ab):
        cr, ca = _client(rs), _client(ab)
        r3, a3 = Resp3(rs), Resp3(ab)
        yield cr, ca, r3, a3
        for c in (cr, ca, r3, a3):
            c.close()


@pytest.mark.parametrize("seed", SEEDS)
def test_differential_zsets(zset_pair, seed):
    cr, ca, r3, a3 = zset_pair
    rnd = random.Random(seed)
    entries = rnd.choice([b"128", b"4", b"2", b"0"])
    value = rnd.choice([b"64", b"8"])
    for c in (cr, ca):
        c.execute_command("FLUSHALL")
        c.execute_command("CONFIG", "SET", "zset-max-listpack-entries", entries, "zset-max-listpack-value", value)
        for k in SETS:
            c.execute_command("SADD", k, "a", "b", "x")
        for k in STRINGS:
            c.execute_command("SET", k, "v")
    gen = Gen(rnd)
    history = []

    def fail(i, check, args, ra, aa):
        past = "\n".join("  " + repr(h)[:300] for h in history[-HISTORY:])
        pytest.fail("seed %d (entries %s, value %s), command %d: %r\n  after %r\n  redis:  %r\n  abacus: %r\nrecent commands:\n%s"
                    % (seed, entries, value, i, check[:12], args[:12], repr(ra)[:600], repr(aa)[:600], past))

    try:
        for i in range(COMMANDS_PER_SEED):
            args, key = gen.command()
            history.append(args)
            ra, aa = _run(cr, args), _run(ca, args)
            name = args[0]
            if name == b"ZRANDMEMBER" and not isinstance(ra, Err) and isinstance(ra, list):
                members = _run(cr, [b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"])
                count = int(args[2])
                card = len(members) // 2 if isinstance(members, list) else 0
                ok = len(ra) == len(aa) and (count < card or sorted(ra) == sorted(aa))
                if not ok or (isinstance(members, list) and not all(x in members for x in aa)):
                    fail(i, args, args, ra, aa)
            elif name == b"ZRANDMEMBER" and not isinstance(ra, Err):
                if (ra is None) != (aa is None):
                    fail(i, args, args, ra, aa)
            elif name == b"ZSCAN":
                ra, aa = _scan_all(cr, key), _scan_all(ca, key)
                if ra != aa:
                    fail(i, args, args, ra, aa)
            elif ra != aa:
                fail(i, args, args, ra, aa)
            checks = [[b"TYPE", key], [b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"], [b"TTL", key]]
            if _run(cr, [b"TYPE", key]) == b"zset":
                checks.append([b"OBJECT", b"ENCODING", key])
            for check in checks:
                ra, aa = _run(cr, check), _run(ca, check)
                if ra != aa:
                    fail(i, check, args, ra, aa)
            if i % 3 == 0:
                check = [b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"]
                ra, aa = r3.call(*check), a3.call(*check)
                if ra != aa:
                    fail(i, ["RESP3"] + check, args, ra, aa)
    finally:
        for c in (cr, ca):
            c.execute_command("CONFIG", "SET", "zset-max-listpack-entries", "128", "zset-max-listpack-value", "64")
