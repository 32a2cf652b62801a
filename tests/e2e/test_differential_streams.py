"""Differential test of the stream family: seeded random sequences against the real Redis
and Abacus, compared byte for byte on the wire.

Each seed's `random.Random(seed)` generates a fixed number of commands over a small pool of
keys: XADD (explicit IDs in and out of order, `ms-*`, 0-0, invalid IDs, NOMKSTREAM, MAXLEN
and MINID with `=` / `~` and LIMIT, values of every shape: small and large integers, text
that only looks like one, empty, binary, 100-byte strings, repeated and differing field
names), XRANGE / XREVRANGE (`-`, `+`, partial IDs, exclusive bounds, COUNT, bad bounds),
XLEN, XDEL, XTRIM, XSETID, XREAD (non-blocking, `$`, COUNT, several keys), XGROUP (every
subcommand and option), XREADGROUP (`>`, history, NOACK, COUNT), XACK, XPENDING, XCLAIM
(FORCE, JUSTID, RETRYCOUNT, LASTID, TIME), XAUTOCLAIM, XINFO (STREAM [FULL], GROUPS,
CONSUMERS), plus SET (for WRONGTYPE), DEL and EXPIRE.

Each seed sets `stream-node-max-entries` and `stream-node-max-bytes` on both servers (Redis's
defaults, or small nodes of a few entries or bytes, so approximate trimming and LIMIT cut at
many node boundaries), and sends each command on a RESP2 or a RESP3 connection at random.
Replies are read as raw bytes and must be identical, except for what depends on the clock
(idle times, delivery and seen times) and Redis's radix tree node count, which are masked
after parsing (the replies' shapes and every other value still count). After each command
the touched keys are read back (XRANGE - +, XLEN, TYPE, XINFO STREAM, XINFO GROUPS).

Half the keys carry the `{st}` tag and half do not: Abacus runs with `--threads 2`, so an
XREAD or XREADGROUP over untagged keys mostly spans both shards. Rerun a seed with
`-k 'test_differential_streams[SEED]'`; DIFF_STREAMS_SEEDS and DIFF_STREAMS_COMMANDS pick
seeds and the commands per seed.
"""

import os
import random

import pytest

from test_differential import redis_and_abacus
from test_differential_lists import Wire

pytestmark = pytest.mark.abacus_only("starts its own redis-server and abacus and compares them")

SEEDS = [int(x) for x in os.environ.get("DIFF_STREAMS_SEEDS", "1,2,3,4,5,6,7,8").split(",")]
COMMANDS_PER_SEED = int(os.environ.get("DIFF_STREAMS_COMMANDS", "600"))
HISTORY = 14

TAGGED = [b"{st}a", b"{st}b", b"{st}c"]
UNTAGGED = [b"sa", b"sb", b"sc"]
STRINGS = [b"{st}s", b"ss"]
MISSING = [b"{st}missing", b"smissing"]
GROUPS = [b"g1", b"g2", b"G"]
CONSUMERS = [b"alice", b"bob", b"c"]
FIELDS = [b"channel", b"event", b"n", b"f", b""]
VALUES = [b"google", b"click", b"0", b"31", b"32", b"-1", b"-0", b"007", b"+1", b"9223372036854775807",
          b"-9223372036854775808", b"9223372036854775808", b"", b"1.5", b"x" * 100]
# (stream-node-max-entries, stream-node-max-bytes)
NODES = [(b"100", b"4096"), (b"3", b"4096"), (b"100", b"60"), (b"5", b"200"), (b"0", b"0"), (b"1", b"1")]


def parse(buf, at=0):
    """One RESP2/RESP3 reply from raw bytes: (value, next offset). Errors and statuses are
    tagged tuples; aggregates lists (maps as lists of pairs)."""
    end = buf.index(b"\r\n", at)
    t, line, at = buf[at:at + 1], buf[at + 1:end], end + 2
    if t in (b"+", b"-", b":", b",", b"(", b"#"):
        return (t, line), at
    if t == b"_":
        return None, at
    if t in (b"$", b"=", b"!"):
        n = int(line)
        if n < 0:
            return None, at
        return (t, buf[at:at + n]), at + n + 2
    n = int(line)
    if n < 0:
        return None, at
    items = []
    for _ in range(n * (2 if t == b"%" else 1)):
        v, at = parse(buf, at)
        items.append(v)
    return (t, items), at


def text(v):
    return v[1] if isinstance(v, tuple) and v[0] == b"$" else None


# Map keys whose values depend on the clock or on Redis's radix tree: masked.
MASKED_KEYS = {b"idle", b"seen-time", b"radix-tree-nodes"}


def mask(v, cmd):
    """The clock-dependent parts of a parsed reply replaced by a marker."""
    if not isinstance(v, tuple) or v[0] not in (b"*", b"%"):
        return v
    items = [mask(x, cmd) for x in v[1]]
    # Key/value lists (RESP2 maps are flat arrays): mask by key.
    for i in range(0, len(items) - 1, 2):
        if text(items[i]) in MASKED_KEYS:
            items[i + 1] = "<masked>"
    if cmd == b"XPENDING-ROW" or (cmd == b"XINFO-FULL-PENDING"):
        pass
    return (v[0], items)


def masked_reply(args, raw):
    name = args[0].upper()
    sub = args[1].upper() if len(args) > 1 else b""
    if name == b"XPENDING" and len(args) > 3:
        v, _ = parse(raw)
        if isinstance(v, tuple) and v[0] == b"*":
            # [id, consumer, idle, count]: idle masked.
            return (v[0], [(r[0], r[1][:2] + ["<idle>"] + r[1][3:]) if isinstance(r, tuple) and len(r[1]) == 4 else r for r in v[1]])
        return v
    if name == b"XINFO" and sub in (b"CONSUMERS", b"STREAM"):
        v, _ = parse(raw)
        v = mask(v, b"")
        if sub == b"STREAM" and any(a.upper() == b"FULL" for a in args[3:]):
            v = mask_full_times(v)
        return v
    return raw


def mask_full_times(v):
    """XINFO STREAM FULL: the delivery times in the groups' and consumers' pending lists."""
    def walk(x, under=None):
        if not isinstance(x, tuple) or x[0] not in (b"*", b"%"):
            return x
        items = list(x[1])
        for i in range(0, len(items) - 1, 2):
            if text(items[i]) == b"pending" and isinstance(items[i + 1], tuple):
                rows = []
                for row in items[i + 1][1]:
                    cols = list(row[1])
                    # group PEL [id, consumer, time, count]; consumer PEL [id, time, count]
                    cols[-2] = "<time>"
                    rows.append((row[0], cols))
                items[i + 1] = (items[i + 1][0], rows)
        return (x[0], [walk(y) for y in items])
    return walk(v)


class Gen:
    def __init__(self, rnd):
        self.r = rnd
        self.t = 1

    def key(self):
        x = self.r.random()
        if x < 0.05:
            return self.r.choice(MISSING)
        if x < 0.08:
            return self.r.choice(STRINGS)
        return self.r.choice(self.r.choice([TAGGED, UNTAGGED]))

    def id(self, strict=True):
        """An ID argument: mostly near the stream's frontier."""
        r = self.r
        x = r.random()
        if x < 0.04:
            return r.choice([b"abc", b"-5", b"1-2-3", b"18446744073709551616", b"1-x", b" 1", b"+5-1"])
        if x < 0.08 and not strict:
            return r.choice([b"-", b"+"])
        if x < 0.12:
            return r.choice([b"0", b"0-0", b"0-1", b"18446744073709551615-18446744073709551615"])
        ms = max(1, self.t - r.randint(0, 8))
        if r.random() < 0.4:
            return b"%d" % ms
        return b"%d-%d" % (ms, r.choice([0, 0, 1, 2, 5, 18446744073709551615]))

    def range_bound(self):
        r = self.r
        b = self.id(strict=False)
        if r.random() < 0.2 and b not in (b"-", b"+"):
            b = b"(" + b
        if r.random() < 0.03:
            b = r.choice([b"(", b"(-", b"(+"])
        return b

    def fields(self):
        r = self.r
        if r.random() < 0.7:
            names = [b"channel", b"event", b"n"]
        else:
            names = [r.choice(FIELDS) for _ in range(r.randint(1, 4))]
        out = []
        for n in names:
            v = r.choice(VALUES) if r.random() < 0.8 else b"%d" % r.randint(-100000, 100000)
            if r.random() < 0.03:
                v = r.randbytes(r.randint(0, 20))
            out += [n, v]
        return out

    def trim_opts(self, xadd):
        r = self.r
        opts = []
        strategy = r.choice([b"MAXLEN", b"MINID", b"maxlen"])
        opts.append(strategy)
        mod = r.choice([None, b"=", b"~", b"~"])
        if mod:
            opts.append(mod)
        if strategy.upper() == b"MAXLEN":
            opts.append(r.choice([b"%d" % r.randint(0, 12), b"%d" % r.randint(0, 3), b"-1", b"x"]) if r.random() < 0.95 else b"-1")
        else:
            opts.append(self.id())
        if r.random() < 0.3:
            opts += [b"LIMIT", r.choice([b"0", b"1", b"3", b"10", b"-1", b"x"])]
        return opts

    def xadd(self):
        r = self.r
        k = self.key()
        c = [b"XADD", k]
        if r.random() < 0.1:
            c.append(b"NOMKSTREAM")
        if r.random() < 0.25:
            c += self.trim_opts(True)
        self.t += r.choice([0, 1, 1, 1, 2, 5, 100])
        x = r.random()
        if x < 0.6:
            c.append(b"%d-%d" % (self.t, r.choice([0, 0, 1, 7])))
        elif x < 0.8:
            c.append(b"%d-*" % self.t)
        elif x < 0.9:
            c.append(b"%d" % self.t)
        else:
            c.append(self.id())
        c += self.fields()
        if r.random() < 0.02:
            c.append(b"dangling")
        return c, [k]

    def group_cmd(self, k):
        r = self.r
        g = r.choice(GROUPS)
        x = r.random()
        if x < 0.35:
            c = [b"XGROUP", r.choice([b"CREATE", b"create"]), k, g, r.choice([b"$", b"0", self.id()])]
            if r.random() < 0.4:
                c.append(b"MKSTREAM")
            if r.random() < 0.2:
                c += [b"ENTRIESREAD", r.choice([b"0", b"3", b"-1", b"-2", b"x", b"100"])]
            return c
        if x < 0.55:
            c = [b"XGROUP", b"SETID", k, g, r.choice([b"$", b"0", b"-", b"+", self.id(False)])]
            if r.random() < 0.3:
                c += [b"ENTRIESREAD", r.choice([b"0", b"2", b"-1", b"-3"])]
            if r.random() < 0.03:
                c.append(b"MKSTREAM")
            return c
        if x < 0.65:
            return [b"XGROUP", b"DESTROY", k, g]
        if x < 0.8:
            return [b"XGROUP", b"CREATECONSUMER", k, g, r.choice(CONSUMERS)]
        if x < 0.9:
            return [b"XGROUP", b"DELCONSUMER", k, g, r.choice(CONSUMERS)]
        return [b"XGROUP", r.choice([b"FOO", b"HELP", b"CREATE"]), k]

    def command(self):
        """(the command, the keys to read back after it)."""
        r = self.r
        x = r.random()
        if x < 0.28:
            return self.xadd()
        k = self.key()
        if x < 0.36:
            c = [r.choice([b"XRANGE", b"XREVRANGE"]), k, self.range_bound(), self.range_bound()]
            if r.random() < 0.4:
                c += [b"COUNT", r.choice([b"0", b"1", b"2", b"5", b"-1", b"x"])]
            if r.random() < 0.02:
                c.append(b"COUNT")
            return c, [k]
        if x < 0.4:
            return [b"XLEN", k], [k]
        if x < 0.46:
            return [b"XDEL", k] + [self.id() for _ in range(r.randint(1, 3))], [k]
        if x < 0.5:
            return [b"XTRIM", k] + self.trim_opts(False), [k]
        if x < 0.52:
            c = [b"XSETID", k, self.id()]
            if r.random() < 0.4:
                c += [b"ENTRIESADDED", r.choice([b"0", b"5", b"100", b"-1", b"x"])]
            if r.random() < 0.4:
                c += [b"MAXDELETEDID", self.id()]
            return c, [k]
        if x < 0.58:
            tagged = r.random() < 0.5
            pool = (TAGGED + [MISSING[0]]) if tagged else (UNTAGGED + [MISSING[1]])
            ks = [r.choice(pool) for _ in range(r.randint(1, 3))]
            c = [b"XREAD"]
            if r.random() < 0.4:
                c += [b"COUNT", r.choice([b"1", b"2", b"0", b"-3", b"x"])]
            c.append(b"STREAMS")
            c += ks + [r.choice([b"$", b"0", self.id(), b">"]) for _ in ks]
            if r.random() < 0.03:
                c.pop()
            return c, ks
        if x < 0.7:
            return self.group_cmd(k), [k]
        if x < 0.8:
            tagged = r.random() < 0.5
            pool = (TAGGED + [MISSING[0]]) if tagged else (UNTAGGED + [MISSING[1]])
            ks = [r.choice(pool) for _ in range(r.randint(1, 2))]
            c = [b"XREADGROUP", b"GROUP", r.choice(GROUPS), r.choice(CONSUMERS)]
            if r.random() < 0.4:
                c += [b"COUNT", r.choice([b"1", b"2", b"3", b"0"])]
            if r.random() < 0.2:
                c.append(b"NOACK")
            c.append(b"STREAMS")
            c += ks + [r.choice([b">", b">", b">", b"0", self.id()]) for _ in ks]
            return c, ks
        if x < 0.84:
            return [b"XACK", k, r.choice(GROUPS)] + [self.id() for _ in range(r.randint(1, 3))], [k]
        if x < 0.88:
            c = [b"XPENDING", k, r.choice(GROUPS)]
            if r.random() < 0.6:
                if r.random() < 0.2:
                    c += [b"IDLE", r.choice([b"0", b"100000000", b"x"])]
                c += [self.range_bound(), self.range_bound(), r.choice([b"10", b"1", b"0", b"-1", b"x"])]
                if r.random() < 0.3:
                    c.append(r.choice(CONSUMERS))
            return c, [k]
        if x < 0.92:
            c = [b"XCLAIM", k, r.choice(GROUPS), r.choice(CONSUMERS), r.choice([b"0", b"0", b"100000000", b"x"])]
            c += [self.id() for _ in range(r.randint(1, 3))]
            for _ in range(r.randint(0, 3)):
                opt = r.choice([b"FORCE", b"JUSTID", b"RETRYCOUNT", b"LASTID", b"TIME", b"IDLE", b"BOGUS"])
                c.append(opt)
                if opt == b"RETRYCOUNT":
                    c.append(r.choice([b"0", b"5", b"-2", b"x"]))
                elif opt == b"LASTID":
                    c.append(self.id())
                elif opt == b"TIME":
                    c.append(r.choice([b"5", b"x", b"99999999999999"]))
                elif opt == b"IDLE":
                    c.append(r.choice([b"100000000", b"-5", b"x"]))
            return c, [k]
        if x < 0.95:
            c = [b"XAUTOCLAIM", k, r.choice(GROUPS), r.choice(CONSUMERS), r.choice([b"0", b"0", b"100000000", b"x"]), self.range_bound()]
            if r.random() < 0.5:
                c += [b"COUNT", r.choice([b"1", b"2", b"10", b"0", b"x"])]
            if r.random() < 0.3:
                c.append(b"JUSTID")
            return c, [k]
        if x < 0.97:
            sub = r.choice([b"STREAM", b"GROUPS", b"CONSUMERS", b"STREAM"])
            c = [b"XINFO", sub, k]
            if sub == b"CONSUMERS":
                c.append(r.choice(GROUPS))
            elif sub == b"STREAM" and r.random() < 0.5:
                c.append(b"FULL")
                if r.random() < 0.5:
                    c += [b"COUNT", r.choice([b"0", b"1", b"3", b"-1"])]
            return c, [k]
        if x < 0.98:
            k = r.choice(STRINGS) if r.random() < 0.8 else k
            return [b"SET", k, b"v"], [k]
        if x < 0.99:
            return [b"DEL", k], [k]
        return [b"EXPIRE", k, b"100000"], [k]


@pytest.fixture(scope="module")
def wires():
    with redis_and_abacus() as (rs, ab):
        conns = {(name, resp3): Wire(proc, resp3) for name, proc in (("redis", rs), ("abacus", ab))
                 for resp3 in (False, True)}
        yield conns
        for c in conns.values():
            c.close()


@pytest.mark.parametrize("seed", SEEDS)
def test_differential_streams(wires, seed):
    rnd = random.Random(seed)
    entries, nbytes = NODES[seed % len(NODES)]
    for name in ("redis", "abacus"):
        w = wires[(name, False)]
        assert w.call([b"FLUSHALL"]) == b"+OK\r\n"
        assert w.call([b"CONFIG", b"SET", b"stream-node-max-entries", entries]) == b"+OK\r\n"
        assert w.call([b"CONFIG", b"SET", b"stream-node-max-bytes", nbytes]) == b"+OK\r\n"
        for k in STRINGS:
            w.call([b"SET", k, b"text"])
    gen = Gen(rnd)
    history = []

    def same(args, resp3):
        ra = wires[("redis", resp3)].call(args)
        aa = wires[("abacus", resp3)].call(args)
        if ra != aa and masked_reply(args, ra) != masked_reply(args, aa):
            past = "\n".join("  " + repr(h)[:300] for h in history[-HISTORY:])
            pytest.fail("seed %d (nodes %s/%s), command %d over RESP%d: %r\n  redis:  %r\n  abacus: %r\nrecent commands:\n%s"
                        % (seed, entries, nbytes, len(history), 3 if resp3 else 2, args[:14], ra[:800], aa[:800], past))

    try:
        for _ in range(COMMANDS_PER_SEED):
            args, keys = gen.command()
            history.append(args)
            same(args, rnd.random() < 0.4)
            for k in dict.fromkeys(keys):
                for check in ([b"XRANGE", k, b"-", b"+"], [b"XLEN", k], [b"TYPE", k], [b"XINFO", b"STREAM", k], [b"XINFO", b"GROUPS", k]):
                    same(check, False)
            if rnd.random() < 0.05:
                k = gen.key()
                same([b"XINFO", b"STREAM", k, b"FULL"], rnd.random() < 0.5)
    finally:
        for name in ("redis", "abacus"):
            w = wires[(name, False)]
            w.call([b"CONFIG", b"SET", b"stream-node-max-entries", b"100"])
            w.call([b"CONFIG", b"SET", b"stream-node-max-bytes", b"4096"])
