"""Differential test: random command sequences against Abacus and the real Redis.

For each seed, a `random.Random(seed)` generates a few thousand commands over a
small key pool (so commands collide and hit every type), each command is sent
to one redis-server and one Abacus server, and the replies must be equal. Error
replies are compared in full: the redis-py parser is replaced by one that keeps
the whole error line (redis-py normally strips the `ERR ` prefix), and replies
are left raw (no redis-py response callbacks).

Replies that are order-insensitive (SMEMBERS, HKEYS, SINTER, ...) are sorted
before comparing; random replies (SPOP, SRANDMEMBER, HRANDFIELD, RANDOMKEY) are
checked by size and membership only, and time-dependent ones (TTL, PTTL,
EXPIRETIME, PEXPIRETIME) by their class (-2, -1 or positive). Every expiry the
generator produces is either <= 0 / in the past (the key goes away at once,
deterministically) or at least 1000 seconds away, so nothing expires while the
test runs.

On a mismatch the assertion message names the seed, the command's index, the
command, both replies and the commands before it; rerun one seed with
`-k 'test_differential[SEED]'`. The file starts both servers itself, so it is
skipped with `--target redis`.

Besides single commands, the mix has transactions (WATCH on the main connection, a
command on a second connection, MULTI with queued commands, arity errors, unknown
commands, nested MULTI, WATCH/UNWATCH inside MULTI, then EXEC, DISCARD or a malformed
EXEC; EXEC's array is compared command by command), SCAN/SSCAN/HSCAN (iterated from
cursor 0 to cursor 0 on each server; the *sets* of elements are compared, since
cursors and pages legitimately differ and elements may repeat; invalid cursors and
options exactly), KEYS (as a set), OBJECT (FREQ, IDLETIME, REFCOUNT by reply class
only: time, policy and object sharing; HELP exactly), RANDOMKEY (nil iff empty),
COPY ... DB, MOVE and RENAME followed by TTLs. test_differential_glob runs KEYS and
MATCH over names full of glob characters; test_differential_databases mixes SELECT,
MOVE, COPY ... DB, SWAPDB and FLUSHDB (with WATCH across them) and compares every
database at the end.

Commands Abacus implements but the mix leaves out, and why:
  - FLUSHALL inside the mix: a whole-keyspace reset adds little (test_keys.py covers it).
  - SPOP, DBSIZE, RANDOMKEY inside transactions (random state, or expired keys counted
    differently: see DBSIZE below).
  - OBJECT ENCODING: deliberately different (integer sets are `bitmap`, README "sets").
  - PF* / HLL.*: HyperLogLog has its own tests (and HLL.* exists only in Abacus).
  - EXPIRE/SET/GETEX with a relative time between 1 ms and ~1000 s: the key would
    expire during the run at a different moment on each server.
  - SAVE/BGSAVE/SHUTDOWN/... inside MULTI (Redis: "Command not allowed inside a
    transaction"): persistence commands are not part of this mix.
BITOP, BITFIELD and BITFIELD_RO have their own mix: test_differential_bits.py.
Redis commands of the families above that Abacus does not implement (so not in the
mix): GETEX/SET beyond Redis 7.0, DUMP/RESTORE, SORT;
lists, streams and geo commands are not implemented at all. Sorted sets have their own mix:
test_differential_zsets.py.

DBSIZE: Redis 7.0 keeps a key SET with an EXAT/PXAT in the past until it is next
touched (or sampled by active expiry, at any moment) and counts it meanwhile;
Abacus drops it at once. Both are correct Redis semantics for a logically expired
key, so every key is touched (EXISTS) before DBSIZE is compared.

Exploration aids (environment): DIFF_SEEDS=1,2,3 picks seeds, DIFF_COMMANDS=N the
commands per seed, DIFF_SKIP=INCRBYFLOAT,... leaves commands out.
"""

import contextlib
import os
import random
import time

import pytest
import redis
from redis._parsers.resp2 import _RESP2Parser
from redis.exceptions import ResponseError

from conftest import ServerProcess

pytestmark = pytest.mark.abacus_only("starts its own redis-server and abacus and compares them")

SEEDS = [int(x) for x in os.environ.get("DIFF_SEEDS", "1,2,3,4,5,6,7,8").split(",")]
# Exploration aid: DIFF_SKIP=INCRBYFLOAT,HINCRBYFLOAT leaves commands out of a run.
SKIP = {x.encode().upper() for x in os.environ.get("DIFF_SKIP", "").split(",") if x}
COMMANDS_PER_SEED = int(os.environ.get("DIFF_COMMANDS", "4000"))
HISTORY = 10          # commands shown before the failing one
MAX_MISMATCHES = 5    # report at most this many (after each, both servers are flushed)

KEYS = [b"k%d" % i for i in range(18)] + [b"{t}a", b"{t}b"]
# Each family mostly uses its own keys; the two {t} keys are shared by all.
STRING_KEYS = KEYS[0:7] + KEYS[18:]
HASH_KEYS = KEYS[7:12] + KEYS[18:]
SET_KEYS = KEYS[12:18] + KEYS[18:]
FIELDS = [b"f%d" % i for i in range(6)] + [b"", b"\xff", b"7", b"-1"]
MEMBERS = [b"1", b"2", b"3", b"10", b"-5", b"0", b"007", b"+1", b"4294967295",
           b"4294967296", b"9223372036854775807", b"-9223372036854775808",
           b"18446744073709551616", b"a", b"b", b"c", b"", b"1.5", b" 1", b"\xff\x00"]
VALUES = [b"", b"0", b"1", b"-1", b"42", b"-17", b"1.5", b"-0.5", b"inf", b"-inf",
          b"+inf", b"1e3", b"1E3", b"1e400", b"nan", b" 1", b"1 ", b"\t", b" ", b"abc",
          b"hello world", b"\xff\xfe\x00\x80", b"\x00", b"9223372036854775807",
          b"-9223372036854775808", b"9223372036854775808", b"18446744073709551616",
          b"0x10", b"+5", b"007", b"-0", b"3.0", b"0.1", b".5", b"5.", b"1_000"]
INTS = [0, 1, -1, 2, 5, 10, -10, 100, 123456, -123456, 2**31, 2**62,
        9223372036854775807, -9223372036854775808]
BAD_INTS = [b"", b"abc", b"1.5", b" 1", b"9223372036854775808", b"-9223372036854775809",
            b"1e3", b"0x1", b"\xff"]
FLOATS = [b"0", b"1", b"-1", b"1.5", b"-2.25", b"0.1", b"1e3", b"-1e-3", b"3.0e2", b"inf",
          b"-inf", b"nan", b"abc", b"", b" 1", b"5.0000000000000001", b"999.999", b"1e308",
          b"1e400", b"-1e4932", b"1e-30", b"0x10", b"-0x1.8p3", b"0x", b"infinity", b"1e",
          b"0.000003814697265625", b"-7.000000000000000000001", b"1e-4960"]
JUNK = [b"foo", b"", b"\xff\xfe", b"x y", b"withscores"]

PATTERNS = [b"*", b"k*", b"k1*", b"k?", b"k1?", b"{t}*", b"\\{t\\}*", b"k[0-5]",
            b"k[^0-5]", b"k[1-]", b"k[5-1]", b"[", b"k[", b"k[1", b"*a", b"*[ab]", b"?",
            b"", b"k\\1*", b"[k{]*", b"*}*", b"**", b"k[]]", b"k[\\]]", b"f*", b"1*",
            b"[0-9]", b"*0", b"[^a-z]*", b"\\", b"*\\", b"[a-c]", b"-*", b"\\+1"]
GLOB_TOKENS = [b"k", b"a", b"b", b"1", b"f", b"*", b"?", b"[", b"]", b"^", b"-", b"\\",
               b"[a-b]", b"[^a]", b"[a-]", b"[]", b"[\\]]", b"\\*", b"\\?", b"\\[",
               b"{", b"}", b"t", b"0", b"[0-9]", b"[!a]", b"A"]
BAD_CURSORS = [b"abc", b" 1", b"1 ", b"18446744073709551616", b"1.5", b"-", b"+", b"0x1",
               b"", b"+0", b"00"]
BAD_COUNTS = [b"0", b"-1", b"abc", b"", b"9223372036854775808", b"1.5",
              b"-9223372036854775808"]

# A far-future base for absolute expiry times (identical on both servers).
FUTURE = int(time.time()) + 10 * 86400

ORDERLESS = {b"SMEMBERS", b"SINTER", b"SUNION", b"SDIFF", b"HKEYS", b"HVALS"}
TTL_LIKE = {b"TTL", b"PTTL", b"EXPIRETIME", b"PEXPIRETIME"}


class _ExactErrorParser(_RESP2Parser):
    """redis-py's RESP2 parser, but errors keep their whole text (no prefix
    stripping, no exception subclasses), so `-ERR x` and `-x` differ."""

    @classmethod
    def parse_error(cls, response):
        return ResponseError(response)


class Err:
    def __init__(self, message):
        self.message = message

    def __eq__(self, other):
        return isinstance(other, Err) and other.message == self.message

    def __repr__(self):
        return "Err(%r)" % self.message


def _client(proc):
    pool = redis.ConnectionPool(host=proc.host, port=proc.port, decode_responses=False,
                                parser_class=_ExactErrorParser, socket_timeout=10,
                                socket_connect_timeout=5)
    c = redis.Redis(connection_pool=pool)
    c.response_callbacks = {}  # raw replies: no per-command conversion
    return c


def _norm(v):
    """Error replies nested in arrays (EXEC) become Err too."""
    if isinstance(v, ResponseError):
        return Err(str(v))
    if isinstance(v, list):
        return [_norm(x) for x in v]
    return v


def _run(client, args):
    try:
        return _norm(client.execute_command(*args))
    except ResponseError as e:
        return Err(str(e))


# ---------------------------------------------------------------------------
# servers


@contextlib.contextmanager
def redis_and_abacus():
    """A real redis-server and an Abacus server, both without persistence, stopped after."""
    rs = ServerProcess("redis")
    rs.start()
    try:
        # Made after Redis is up, so its free port cannot be the one Redis holds (a PING
        # there would answer for a server that failed to bind).
        ab = ServerProcess("abacus", ["--appendonly", "no", "--save", ""])
        ab.start()
        try:
            yield rs, ab
        finally:
            ab.stop()
    finally:
        rs.stop()


@pytest.fixture(scope="module")
def pair():
    with redis_and_abacus() as (rs, ab):
        yield from _pair_clients(rs, ab)


def _pair_clients(rs, ab):
    cr, ca = _client(rs), _client(ab)
    # second connections: they modify (or not) keys that the first ones WATCH
    cr2, ca2 = _client(rs), _client(ab)
    yield cr, ca, cr2, ca2
    for c in (cr, ca, cr2, ca2):
        c.close()


# ---------------------------------------------------------------------------
# command generation


class Gen:
    def __init__(self, rnd):
        self.r = rnd
        self.pool = KEYS
        self.force = None  # keys that key() mostly picks (watched keys), when set

    # -- argument helpers
    def key(self):
        """A key, mostly from the current family's own part of the pool (so that most
        commands find a key of their type; the rest get WRONGTYPE)."""
        # (string writes overwrite any type, so they stray least, or every key would
        # soon be a string)
        if self.force and self.r.random() < 0.8:
            return self.r.choice(self.force)
        if self.r.random() < (0.98 if self.pool is STRING_KEYS else 0.85):
            return self.r.choice(self.pool)
        return self.r.choice(KEYS)

    def keys(self, lo=1, hi=4):
        return [self.key() for _ in range(self.r.randint(lo, hi))]

    def value(self):
        r = self.r
        if r.random() < 0.8:
            return r.choice(VALUES)
        return bytes(r.randrange(256) for _ in range(r.randint(0, 6)))

    def int_arg(self):
        r = self.r
        x = r.random()
        if x < 0.6:
            return str(r.choice(INTS)).encode()
        if x < 0.85:
            return str(r.randint(-20, 20)).encode()
        return r.choice(BAD_INTS)

    def index(self):
        r = self.r
        if r.random() < 0.85:
            return str(r.randint(-12, 12)).encode()
        return r.choice([b"9223372036854775807", b"-9223372036854775808", b"100000",
                         b"-100000", b"abc", b"1.0", b""])

    def field(self):
        return self.r.choice(FIELDS)

    def member(self):
        r = self.r
        if r.random() < 0.85:
            return r.choice(MEMBERS)
        return str(r.randint(0, 40)).encode()

    def rel_seconds(self):
        """A relative expiry in seconds: never between 1 and 999."""
        r = self.r
        x = r.random()
        if x < 0.65:
            return str(r.randint(1000, 10**6)).encode()
        if x < 0.75:
            return r.choice([b"0", b"-1", b"-100"])
        if x < 0.85:
            return r.choice([b"9223372036854775807", b"-9223372036854775808",
                             b"9223372036854775", b"9223372036854776", b"1000000000000",
                             b"4611686018427387904"])
        return r.choice(BAD_INTS)

    def rel_ms(self):
        r = self.r
        x = r.random()
        if x < 0.65:
            return str(r.randint(10**6, 10**9)).encode()
        if x < 0.75:
            return r.choice([b"0", b"-1", b"-100000"])
        if x < 0.85:
            return r.choice([b"9223372036854775807", b"-9223372036854775808",
                             b"9223372036854775806", b"9223372036854770000"])
        return r.choice(BAD_INTS)

    def abs_seconds(self):
        r = self.r
        x = r.random()
        if x < 0.65:
            return str(FUTURE + r.randint(0, 10**6)).encode()
        if x < 0.8:
            return r.choice([b"1", b"0", b"-1", b"1000000"])
        if x < 0.9:
            return r.choice([b"9223372036854775807", b"9223372036854775",
                             b"9223372036854776", b"-9223372036854775808"])
        return r.choice(BAD_INTS)

    def abs_ms(self):
        r = self.r
        x = r.random()
        if x < 0.65:
            return str((FUTURE + r.randint(0, 10**6)) * 1000 + r.randint(0, 999)).encode()
        if x < 0.8:
            return r.choice([b"1", b"0", b"-1", b"1000000"])
        if x < 0.9:
            return r.choice([b"9223372036854775807", b"-9223372036854775808"])
        return r.choice(BAD_INTS)

    def expire_opts(self):
        r = self.r
        if r.random() < 0.5:
            return []
        opts = [r.choice([b"NX", b"XX", b"GT", b"LT", b"nx", b"gt", b"FOO"])]
        if r.random() < 0.2:
            opts.append(r.choice([b"NX", b"XX", b"GT", b"LT"]))
        return opts

    # -- commands, by family
    def set_cmd(self):
        r = self.r
        args = [b"SET", self.key(), self.value()]
        opts = []
        # mostly valid combinations, sometimes anything goes
        if r.random() < 0.4:
            opts += r.choice([[b"EX", self.rel_seconds()], [b"PX", self.rel_ms()],
                              [b"EXAT", self.abs_seconds()], [b"PXAT", self.abs_ms()],
                              [b"KEEPTTL"]])
        if r.random() < 0.3:
            opts.append(r.choice([b"NX", b"XX", b"nx", b"xx"]))
        if r.random() < 0.25:
            opts.append(b"GET")
        if r.random() < 0.1:
            opts.append(r.choice([b"EX", b"PX", b"KEEPTTL", b"NX", b"XX", b"GET",
                                  b"EXAT", b"FOO"]))
            if opts[-1] in (b"EX", b"PX", b"EXAT") and r.random() < 0.7:
                opts.append(r.choice([b"1000000", b"0", b"abc"]))
        r.shuffle(opts) if r.random() < 0.1 else None
        return args + opts

    def string_cmd(self):
        r = self.r
        k = self.key()
        c = r.randrange(31)
        if c == 0:
            return [b"GET", k]
        if c == 1:
            return [b"GETSET", k, self.value()]
        if c == 2:
            return [b"GETDEL", k]
        if c == 3:
            opts = r.choice([[], [b"PERSIST"], [b"EX", self.rel_seconds()],
                             [b"PX", self.rel_ms()], [b"EXAT", self.abs_seconds()],
                             [b"PXAT", self.abs_ms()], [b"EX"], [b"FOO"],
                             [b"PERSIST", b"EX", b"1000000"],
                             [b"EX", b"1000000", b"PX", b"1000000000"]])
            return [b"GETEX", k] + opts
        if c == 4:
            return [b"SETNX", k, self.value()]
        if c == 5:
            return [b"SETEX", k, self.rel_seconds(), self.value()]
        if c == 6:
            return [b"PSETEX", k, self.rel_ms(), self.value()]
        if c == 7:
            n = r.randint(1, 3)
            args = [b"MSET"]
            for _ in range(n):
                args += [self.key(), self.value()]
            if r.random() < 0.1:
                args.append(self.key())  # odd number of arguments
            return args
        if c == 8:
            n = r.randint(1, 3)
            args = [b"MSETNX"]
            for _ in range(n):
                args += [self.key(), self.value()]
            if r.random() < 0.1:
                args.pop()
            return args
        if c == 9:
            return [b"MGET"] + self.keys(1, 5)
        if c == 10:
            return [b"APPEND", k, self.value()]
        if c == 11:
            return [b"STRLEN", k]
        if c == 12:
            return [r.choice([b"GETRANGE", b"SUBSTR"]), k, self.index(), self.index()]
        if c == 13:
            x = r.random()
            if x < 0.8:
                off = str(r.randint(0, 40)).encode()
            elif x < 0.9:
                off = str(r.randint(0, 1000000)).encode()
            else:
                off = r.choice([b"-1", b"536870911", b"536870912", b"4294967296",
                                b"9223372036854775807", b"abc", b""])
            return [b"SETRANGE", k, off, self.value()]
        if c in (14, 15):
            return [b"INCR", k] if c == 14 else [b"DECR", k]
        if c in (16, 17):
            return [r.choice([b"INCRBY", b"DECRBY"]), k, self.int_arg()]
        if c in (18, 19):
            return [b"INCRBYFLOAT", k, r.choice(FLOATS)]
        if c == 20:
            x = r.random()
            if x < 0.85:
                off = str(r.randint(0, 100)).encode()
            else:
                off = r.choice([b"-1", b"4294967296", b"abc", b"100000"])
            return [b"SETBIT", k, off, r.choice([b"0", b"1", b"1", b"2", b"-1", b"a"])]
        if c == 21:
            return [b"GETBIT", k, r.choice([str(r.randint(0, 100)).encode(), b"-1",
                                            b"4294967296", b"abc", b"1000000"])]
        if c == 22:
            opts = r.choice([[], [self.index(), self.index()],
                             [self.index(), self.index(), r.choice([b"BYTE", b"BIT", b"bit",
                                                                    b"FOO"])],
                             [self.index()]])
            return [b"BITCOUNT", k] + opts
        if c == 23:
            opts = r.choice([[], [self.index()], [self.index(), self.index()],
                             [self.index(), self.index(), r.choice([b"BYTE", b"BIT", b"FOO"])]])
            return [b"BITPOS", k, r.choice([b"0", b"1", b"1", b"2", b"x"])] + opts
        if c == 24:
            # a big value, to exercise growth without going over ~1 MB
            return [b"SET", k, b"x" * r.choice([100, 1000, 70000])]
        if c == 25:
            return [b"INCR", k]
        if c == 27:
            return [b"LCS", k, self.key()] + r.choice([[], [b"LEN"], [b"IDX"],
                                                      [b"IDX", b"WITHMATCHLEN"],
                                                      [b"IDX", b"MINMATCHLEN", b"2"],
                                                      [b"LEN", b"IDX"], [b"FOO"]])
        if c == 26:
            # numbers close to the edges
            return [b"SET", k, r.choice([b"9223372036854775806", b"-9223372036854775807",
                                         b"1.7976931348623157e308", b"10.5", b"100"])]
        return self.set_cmd()

    def key_cmd(self):
        r = self.r
        c = r.randrange(18)
        if c == 0:
            return [r.choice([b"DEL", b"UNLINK"])] + self.keys(1, 3)
        if c == 1:
            ks = self.keys(1, 4)
            if r.random() < 0.5:
                ks.append(ks[0])
            return [b"EXISTS"] + ks
        if c == 2:
            return [b"TYPE", self.key()]
        if c == 3:
            a = self.key()
            return [b"RENAME", a, a if r.random() < 0.1 else self.key()]
        if c == 4:
            a = self.key()
            return [b"RENAMENX", a, a if r.random() < 0.1 else self.key()]
        if c == 5:
            a = self.key()
            opts = r.choice([[], [], [b"REPLACE"], [b"replace"], [b"FOO"], [b"DB"],
                             [b"DB", b"abc"]])
            return [b"COPY", a, a if r.random() < 0.1 else self.key()] + opts
        if c == 6:
            return [b"EXPIRE", self.key(), self.rel_seconds()] + self.expire_opts()
        if c == 7:
            return [b"PEXPIRE", self.key(), self.rel_ms()] + self.expire_opts()
        if c == 8:
            return [b"EXPIREAT", self.key(), self.abs_seconds()] + self.expire_opts()
        if c == 9:
            return [b"PEXPIREAT", self.key(), self.abs_ms()] + self.expire_opts()
        if c == 10:
            return [b"PERSIST", self.key()]
        if c == 11:
            return [r.choice([b"TTL", b"PTTL", b"EXPIRETIME", b"PEXPIRETIME"]), self.key()]
        if c == 12:
            return [b"DBSIZE"]
        if c == 14:
            sub = r.choice([b"REFCOUNT", b"FREQ", b"IDLETIME", b"refcount", b"HELP",
                            b"FOO"])
            if sub == b"HELP":
                return [b"OBJECT", sub] + ([self.key()] if r.random() < 0.2 else [])
            return [b"OBJECT", sub, self.key()]
        if c == 15:
            return [b"RANDOMKEY"]
        if c == 16:
            a = self.key()
            opts = [b"DB", r.choice([b"0", b"0", b"1", b"1", b"15", b"16", b"-1"])]
            if r.random() < 0.5:
                opts.append(b"REPLACE")
                r.shuffle(opts) if r.random() < 0.3 else None
            return [b"COPY", a, a if r.random() < 0.2 else self.key()] + opts
        if c == 17:
            return [b"MOVE", self.key(), r.choice([b"1", b"1", b"0", b"16", b"-1", b"x"])]
        return [b"TOUCH"] + self.keys(1, 3)

    def hash_cmd(self):
        r = self.r
        k = self.key()
        c = r.randrange(16)
        if c in (0, 1):
            args = [r.choice([b"HSET", b"HSET", b"HMSET"]), k]
            for _ in range(r.randint(1, 3)):
                args += [self.field(), self.value()]
            if r.random() < 0.08:
                args.pop()
            return args
        if c == 2:
            return [b"HGET", k, self.field()]
        if c == 3:
            return [b"HDEL", k] + [self.field() for _ in range(r.randint(1, 3))]
        if c == 4:
            return [b"HLEN", k]
        if c == 5:
            return [b"HGETALL", k]
        if c == 6:
            return [b"HINCRBY", k, self.field(), self.int_arg()]
        if c == 7:
            return [b"HINCRBYFLOAT", k, self.field(), r.choice(FLOATS)]
        if c == 8:
            return [b"HSETNX", k, self.field(), self.value()]
        if c == 9:
            return [b"HMGET", k] + [self.field() for _ in range(r.randint(1, 4))]
        if c == 10:
            return [b"HEXISTS", k, self.field()]
        if c == 11:
            return [b"HKEYS", k]
        if c == 12:
            return [b"HVALS", k]
        if c == 13:
            return [b"HSTRLEN", k, self.field()]
        if c == 14:
            return [b"HRANDFIELD", k] + r.choice([[], [self.int_arg()],
                                                  [self.int_arg(), b"WITHVALUES"]])
        return [b"HSET", k, self.field(), str(r.randint(-5, 5)).encode()]

    def set_family_cmd(self):
        r = self.r
        k = self.key()
        c = r.randrange(18)
        if c in (0, 1, 2):
            return [b"SADD", k] + [self.member() for _ in range(r.randint(1, 4))]
        if c == 3:
            return [b"SREM", k] + [self.member() for _ in range(r.randint(1, 3))]
        if c == 4:
            return [b"SCARD", k]
        if c == 5:
            return [b"SISMEMBER", k, self.member()]
        if c == 6:
            return [b"SMISMEMBER", k] + [self.member() for _ in range(r.randint(1, 4))]
        if c == 7:
            return [b"SMEMBERS", k]
        if c == 8:
            return [r.choice([b"SINTER", b"SUNION", b"SDIFF"])] + self.keys(1, 3)
        if c == 9:
            return [r.choice([b"SINTERSTORE", b"SUNIONSTORE", b"SDIFFSTORE"]),
                    self.key()] + self.keys(1, 3)
        if c == 10:
            return [b"SMOVE", k, self.key(), self.member()]
        if c == 11:
            return [b"SPOP", k] + r.choice([[], [self.int_arg()], [b"1", b"2"]])
        if c == 12:
            return [b"SRANDMEMBER", k] + r.choice([[], [self.int_arg()]])
        if c == 13:
            ks = self.keys(1, 3)
            args = [b"SINTERCARD", r.choice([str(len(ks)).encode(), b"0", b"5", b"-1", b"x"])]
            args += ks
            if r.random() < 0.4:
                args += [b"LIMIT", r.choice([b"0", b"1", b"3", b"-1", b"x"])]
            return args
        # integer-heavy sets (Abacus keeps them as bitmaps)
        return [b"SADD", k] + [str(r.randint(0, 50)).encode() for _ in range(r.randint(1, 6))]

    def arity_cmd(self):
        r = self.r
        name = r.choice([b"GET", b"SET", b"GETSET", b"GETDEL", b"GETEX", b"SETNX", b"SETEX",
                         b"PSETEX", b"MSET", b"MSETNX", b"MGET", b"APPEND", b"STRLEN",
                         b"GETRANGE", b"SUBSTR", b"SETRANGE", b"INCR", b"DECR", b"INCRBY",
                         b"DECRBY", b"INCRBYFLOAT", b"SETBIT", b"GETBIT", b"BITCOUNT",
                         b"BITPOS", b"DEL", b"UNLINK", b"EXISTS", b"TYPE", b"RENAME",
                         b"RENAMENX", b"COPY", b"EXPIRE", b"PEXPIRE", b"EXPIREAT",
                         b"PEXPIREAT", b"PERSIST", b"TTL", b"PTTL", b"DBSIZE", b"HSET",
                         b"HGET", b"HDEL", b"HLEN", b"HGETALL", b"HINCRBY", b"HINCRBYFLOAT",
                         b"HSETNX", b"HMGET", b"HEXISTS", b"HKEYS", b"HVALS", b"HSTRLEN",
                         b"HMSET", b"SADD", b"SREM", b"SCARD", b"SISMEMBER", b"SMISMEMBER",
                         b"SMEMBERS", b"SINTER", b"SUNION", b"SDIFF", b"SINTERSTORE",
                         b"SUNIONSTORE", b"SDIFFSTORE", b"SMOVE", b"SPOP", b"SINTERCARD",
                         b"EXPIRETIME", b"TOUCH", b"get", b"Set"])
        n = r.choice([0, 0, 1, 2, 5])
        return [name] + [self.key() if i == 0 else r.choice(JUNK) for i in range(n)]

    def mutate(self, args):
        """Occasionally drop trailing arguments or add junk ones (never numbers,
        so no short expiry can appear)."""
        r = self.r
        x = r.random()
        if x < 0.04 and len(args) > 1:
            return args[:r.randint(1, len(args) - 1)]
        if x < 0.07:
            return args + [r.choice(JUNK) for _ in range(r.randint(1, 2))]
        return args

    def pattern(self, names):
        """A glob pattern, mostly one that matches some of `names` (KEYS, MATCH)."""
        r = self.r
        x = r.random()
        if x < 0.3:
            return r.choice(PATTERNS)
        if x < 0.5:
            # a name with one or two characters replaced by a wildcard or a class
            n = bytearray(r.choice(names))
            for _ in range(r.randint(1, 2)):
                if n:
                    i = r.randrange(len(n))
                    n[i:i + 1] = r.choice([b"?", b"*", b"[%c-z]" % n[i], b"[^%c]" % n[i],
                                           b"\\%c" % n[i]])
            return bytes(n)
        return b"".join(r.choice(GLOB_TOKENS) for _ in range(r.randint(0, 5)))

    def scan_cmd(self):
        """SCAN, SSCAN or HSCAN; cursor "0" (iterated to the end) or an invalid one."""
        r = self.r
        kind = r.choice([b"SCAN", b"SCAN", b"SSCAN", b"HSCAN"])
        cursor = b"0" if r.random() < 0.88 else r.choice(BAD_CURSORS)
        if kind == b"SCAN":
            args, names = [b"SCAN", cursor], KEYS
        elif kind == b"SSCAN":
            self.pool = SET_KEYS
            args, names = [b"SSCAN", self.key(), cursor], MEMBERS
        else:
            self.pool = HASH_KEYS
            args, names = [b"HSCAN", self.key(), cursor], FIELDS
        opts = []
        if r.random() < 0.5:
            opts.append([r.choice([b"MATCH", b"match"]), self.pattern(names)])
        if r.random() < 0.5:
            opts.append([b"COUNT", r.choice([b"1", b"2", b"3", b"10", b"100", b"1000"])
                         if r.random() < 0.85 else r.choice(BAD_COUNTS)])
        if r.random() < (0.4 if kind == b"SCAN" else 0.04):
            opts.append([b"TYPE", r.choice([b"string", b"hash", b"set", b"STRING", b"Set",
                                            b"none", b"list", b"foo"])])
        if r.random() < 0.05:
            opts.append(r.choice([[b"FOO", b"1"], [b"MATCH"], [b"COUNT"], [b"TYPE"],
                                  [b"NOVALUES"], [b"COUNT", b"1", b"x"]]))
        r.shuffle(opts)
        return args + [a for o in opts for a in o]

    def tx_command(self):
        """A command of the mix for a transaction (or a second connection): not SPOP
        (random state change) nor DBSIZE (expired keys' count, see the docstring)."""
        while True:
            cmd = self.command()
            if cmd[0].upper() not in (b"SPOP", b"DBSIZE", b"RANDOMKEY"):
                return cmd

    def other_command(self):
        """A command for the second connection, between WATCH and EXEC: any command of the
        mix (a write that may change nothing included: WATCH is signalled as Redis signals
        it, see test_differential_watch.py), or a write on a watched key."""
        r = self.r
        if r.random() < 0.5:
            return self.tx_command()
        k = r.choice(self.force)
        return r.choice([[b"SET", k, self.value()], [b"INCR", k], [b"APPEND", k, b"x"],
                         [b"HSET", k, self.field(), b"v"], [b"GETSET", k, b"v"],
                         [b"HINCRBY", k, b"f0", b"1"], [b"MSET", k, b"1"],
                         [b"SADD", k, b"new%d" % r.randrange(10**9)]])

    def transaction(self):
        """Actions (connection, command): 0 is the main connection, 1 the second one.
        WATCH on 0, maybe a command on 1 (mostly on a watched key), MULTI, commands
        (with arity errors, unknown commands, nested MULTI, WATCH, UNWATCH, ...), maybe a
        command on 1 while 0 is in MULTI, then EXEC or DISCARD."""
        r = self.r
        x = r.random()
        if x < 0.05:
            return [(0, [r.choice([b"EXEC", b"DISCARD", b"exec"])])]
        if x < 0.07:
            return [(0, [b"UNWATCH"])]
        acts = []
        watched = []
        if r.random() < 0.45:
            watched = [r.choice(KEYS) for _ in range(r.randint(1, 3))]
            acts.append((0, [b"WATCH"] + watched))
            if r.random() < 0.1:
                acts.append((0, [b"UNWATCH"]))
            if r.random() < 0.15:
                acts.append((0, [b"WATCH", r.choice(KEYS)]))
        self.force = watched
        if watched and r.random() < 0.6:
            acts.append((1, self.other_command()))
        acts.append((0, [r.choice([b"MULTI", b"MULTI", b"multi"])]))
        for _ in range(r.randint(0, 6)):
            y = r.random()
            if y < 0.03:
                acts.append((0, [b"MULTI"]))
            elif y < 0.06:
                acts.append((0, [b"WATCH", r.choice(KEYS)]))
            elif y < 0.08:
                acts.append((0, [b"UNWATCH"]))
            elif y < 0.10:
                acts.append((0, [b"NOSUCHCMD", r.choice(KEYS)]))
            elif y < 0.11:
                acts.append((0, [b"MULTI", b"x"]))
            elif watched and y < 0.16:
                acts.append((1, self.other_command()))
            else:
                self.force = None
                acts.append((0, self.tx_command()))
                self.force = watched
        self.force = None
        end = r.choice([[b"EXEC"]] * 8 + [[b"DISCARD"], [b"EXEC", b"x"]])
        acts.append((0, end))
        return acts

    def step(self):
        """The next actions: usually one command of the mix on the main connection."""
        r = self.r
        x = r.random()
        if x < 0.035:
            return self.transaction()
        if x < 0.05:
            return [(0, self.scan_cmd())]
        if x < 0.06:
            return [(0, [r.choice([b"KEYS", b"keys"]), self.pattern(KEYS)])]
        if x < 0.065:
            # RENAME of a key that may have an expiry: the TTL class must carry over
            self.pool = r.choice([STRING_KEYS, HASH_KEYS, SET_KEYS])
            a, b = self.key(), self.key()
            return [(0, [b"RENAME", a, b]), (0, [b"TTL", b]), (0, [b"TTL", a])]
        return [(0, self.command())]

    def command(self):
        r = self.r
        x = r.random()
        if x < 0.38:
            self.pool = STRING_KEYS
            cmd = self.string_cmd()
        elif x < 0.55:
            # RENAME/COPY mostly within one family's keys, for the same reason
            self.pool = r.choice([STRING_KEYS, HASH_KEYS, SET_KEYS])
            cmd = self.key_cmd()
        elif x < 0.74:
            self.pool = HASH_KEYS
            cmd = self.hash_cmd()
        elif x < 0.96:
            self.pool = SET_KEYS
            cmd = self.set_family_cmd()
        else:
            self.pool = KEYS
            return self.arity_cmd()
        return self.mutate(cmd)


# ---------------------------------------------------------------------------
# comparison


def _ttl_class(v):
    if isinstance(v, int):
        return v if v < 0 else "positive"
    return v


def _class(v):
    """Reply class only: nil, error, integer, bulk, array (time/policy-dependent replies)."""
    if isinstance(v, Err):
        return "error"
    return None if v is None else type(v).__name__


def _sort_list(v):
    return sorted(v, key=lambda x: (x is None, x or b"")) if isinstance(v, list) else v


def _cmp_name(args):
    """The name replies are compared by: the command, or "OBJECT|SUB" for OBJECT."""
    name = args[0].upper()
    if name == b"OBJECT" and len(args) > 1:
        return b"OBJECT|" + args[1].upper()
    return name


def _compare(name, ra, aa):
    """Return (redis_view, abacus_view) for `name`: the parts of both replies
    that must be equal."""
    if name in ORDERLESS:
        return _sort_list(ra), _sort_list(aa)
    if name == b"KEYS":
        def as_set(v):
            return sorted(set(v)) if isinstance(v, list) else v
        return as_set(ra), as_set(aa)
    if name == b"HGETALL":
        def pairs(v):
            if not isinstance(v, list):
                return v
            return sorted(zip(v[0::2], v[1::2]))
        return pairs(ra), pairs(aa)
    if name in TTL_LIKE:
        return _ttl_class(ra), _ttl_class(aa)
    if name == b"RANDOMKEY":
        # nil iff the database is empty
        return _class(ra), _class(aa)
    if name in (b"OBJECT|FREQ", b"OBJECT|IDLETIME", b"OBJECT|REFCOUNT"):
        # FREQ/IDLETIME depend on time and policy; REFCOUNT on object sharing (Redis
        # shares small integers: 2147483647; Abacus never shares: 1)
        return _class(ra), _class(aa)
    if name in (b"SRANDMEMBER", b"HRANDFIELD", b"SPOP"):
        # random members: compare the shape only, and check membership on each side
        def shape(v):
            if isinstance(v, list):
                return ("list", len(v))
            if isinstance(v, bytes):
                return "bulk"
            return v
        return shape(ra), shape(aa)
    return ra, aa


def _short(text, limit=1000):
    return text if len(text) <= limit else "%s...(%d chars)" % (text[:limit], len(text))


def _fmt(args):
    return _short(" ".join(repr(a)[1:] if isinstance(a, bytes) else repr(a) for a in args))


def _check_random_members(client, name, args, reply):
    """SRANDMEMBER/HRANDFIELD reply members must belong to the key."""
    if not isinstance(reply, (list, bytes)):
        return None
    items = reply if isinstance(reply, list) else [reply]
    if name == b"SRANDMEMBER":
        universe = set(_run(client, [b"SMEMBERS", args[1]]) or [])
        bad = [m for m in items if m not in universe]
    else:
        universe = _run(client, [b"HGETALL", args[1]]) or []
        fields = set(universe[0::2])
        if len(args) > 3 and args[3].upper() == b"WITHVALUES":
            items = items[0::2]
        bad = [m for m in items if m not in fields]
    return bad or None


ZERO_CURSORS = (b"0", b"", b"+0", b"00")


def _scan_all(client, args):
    """Iterate a SCAN/SSCAN/HSCAN from cursor 0 to cursor 0: ("elements", sorted set of
    what it returned) (HSCAN: (field, value) pairs), or the first reply if it is not a
    page (an error). Cursors and page boundaries legitimately differ between servers,
    and an element may be returned twice, so only the set is compared."""
    ci = 1 if args[0].upper() == b"SCAN" else 2
    args = list(args)
    seen = set()
    for calls in range(100000):
        reply = _run(client, args)
        if not (isinstance(reply, list) and len(reply) == 2 and isinstance(reply[1], list)):
            return reply if calls == 0 else ("bad page", reply)
        cursor, items = reply
        if args[0].upper() == b"HSCAN":
            seen.update(zip(items[0::2], items[1::2]))
        else:
            seen.update(items)
        if cursor == b"0":
            return ("elements", sorted(seen))
        args[ci] = cursor
    return ("no end", sorted(seen))


class Runner:
    """Sends actions to both servers, compares, keeps the history and the mismatches.
    `conns` are (redis, abacus) pairs: [main, second]."""

    def __init__(self, seed, conns, touch_keys=KEYS):
        self.seed = seed
        self.conns = conns
        self.touch_keys = touch_keys
        self.history = []
        self.mismatches = []
        self.queued = None   # names of the commands queued since MULTI (None: no MULTI)
        self.after_reset = None  # called after a mismatch's flush (databases test)

    def done(self):
        return len(self.mismatches) >= MAX_MISMATCHES

    def report(self, i, args, rv, av, note="", conn=0):
        label = " (second connection)" if conn else ""
        lines = ["seed=%d command #%d: %s%s%s" % (self.seed, i, _fmt(args), label, note),
                 "  redis : " + _short(repr(rv)), "  abacus: " + _short(repr(av)),
                 "  preceding commands:"]
        lines += ["    #%d %s%s" % (j, _fmt(a), " (second connection)" if c else "")
                  for j, a, c in self.history[-HISTORY:]]
        self.mismatches.append(lines)
        cr, ca = self.conns[0]
        try:
            for c in (cr, ca):
                _run(c, [b"DISCARD"])
                _run(c, [b"UNWATCH"])
            kr, ka = set(_run(cr, [b"KEYS", b"*"])), set(_run(ca, [b"KEYS", b"*"]))
            if kr != ka:
                lines.append("  keys only in redis: %r, only in abacus: %r"
                             % (sorted(kr - ka), sorted(ka - kr)))
            # continue from a clean, identical state
            cr.flushall()
            ca.flushall()
            if self.after_reset:
                self.after_reset()
        except redis.ConnectionError as e:
            lines.append("  (abacus unreachable: %s)" % e)
            raise AssertionError("\n".join(lines))
        self.history.clear()
        self.queued = None

    def touch(self, conn=0):
        # Redis 7.0 keeps a key SET with an EXAT/PXAT in the past until it is touched (or
        # sampled by active expiry, at any time), and DBSIZE counts it; Abacus drops it
        # at once. Touch every key first so both count only live keys.
        cr, ca = self.conns[conn]
        _run(cr, [b"EXISTS"] + self.touch_keys)
        _run(ca, [b"EXISTS"] + self.touch_keys)

    def act(self, i, args, conn=0):
        """Run one command on both servers and compare. Returns False on a mismatch."""
        cr, ca = self.conns[conn]
        name = _cmp_name(args)
        in_multi = self.queued is not None and conn == 0
        if name in (b"DBSIZE", b"RANDOMKEY") and not in_multi:
            self.touch(conn)
        if name in (b"SCAN", b"SSCAN", b"HSCAN") and not in_multi and \
                args[1 if name == b"SCAN" else 2] in ZERO_CURSORS:
            rv = _scan_all(cr, args)
            try:
                av = _scan_all(ca, args)
            except redis.ConnectionError as e:
                self.report(i, args, rv, "connection error: %s" % e, conn=conn)
                return False
            if rv != av:
                self.report(i, args, rv, av, " (iterated to cursor 0)", conn=conn)
                return False
            self.history.append((i, args, conn))
            return True
        rv = _run(cr, args)
        try:
            av = _run(ca, args)
        except redis.ConnectionError as e:
            self.report(i, args, rv, "connection error: %s" % e, conn=conn)
            return False
        if in_multi and name not in (b"EXEC", b"DISCARD", b"MULTI", b"WATCH"):
            if rv != av:
                self.report(i, args, rv, av, " (inside MULTI)", conn=conn)
                return False
            if rv == b"QUEUED":
                self.queued.append(name)
            self.history.append((i, args, conn))
            return True
        if name == b"EXEC" and self.queued is not None and isinstance(rv, list) \
                and isinstance(av, list) and len(rv) == len(av) == len(self.queued):
            rcmp = [_compare(n, x, y)[0] for n, x, y in zip(self.queued, rv, av)]
            acmp = [_compare(n, x, y)[1] for n, x, y in zip(self.queued, rv, av)]
        else:
            rcmp, acmp = _compare(name, rv, av)
        if conn == 0:
            if name == b"MULTI" and rv == av == b"OK":
                self.queued = []
            elif name in (b"EXEC", b"DISCARD") and self.queued is not None:
                self.queued = None
        if rcmp != acmp:
            self.report(i, args, rv, av, conn=conn)
            return False
        if name == b"SPOP" and isinstance(rv, (list, bytes)):
            # Popped members differ; check popped + remaining is the same set on
            # both, then drop the key on both so the states agree again.
            rest_r = _run(cr, [b"SMEMBERS", args[1]])
            rest_a = _run(ca, [b"SMEMBERS", args[1]])
            pr = rv if isinstance(rv, list) else [rv]
            pa = av if isinstance(av, list) else [av]
            if sorted(pr + rest_r) != sorted(pa + rest_a):
                self.report(i, args, (rv, rest_r), (av, rest_a), " (popped, remaining)",
                            conn=conn)
                return False
            _run(cr, [b"DEL", args[1]])
            _run(ca, [b"DEL", args[1]])
            self.history.append((i, args, conn))
            self.history.append((i, [b"DEL", args[1]], conn))
        elif name in (b"SRANDMEMBER", b"HRANDFIELD"):
            bad_r = _check_random_members(cr, name, args, rv)
            bad_a = _check_random_members(ca, name, args, av)
            if bad_r or bad_a:
                self.report(i, args, rv, av, " (members not in the key: redis %r abacus %r)"
                            % (bad_r, bad_a), conn=conn)
                return False
            self.history.append((i, args, conn))
        else:
            self.history.append((i, args, conn))
        return True

    def final_state(self, i, keys, db_label=""):
        """Every key's type and content, and the number of keys."""
        cr, ca = self.conns[0]
        for k in keys:
            rv, av = _run(cr, [b"TYPE", k]), _run(ca, [b"TYPE", k])
            if rv != av:
                self.report(i, [b"TYPE", k], rv, av, " (final state%s)" % db_label)
                continue
            cmd = {b"string": [b"GET", k], b"hash": [b"HGETALL", k],
                   b"set": [b"SMEMBERS", k]}.get(rv)
            if cmd is not None:
                rv, av = _run(cr, cmd), _run(ca, cmd)
                rcmp, acmp = _compare(cmd[0], rv, av)
                if rcmp != acmp:
                    self.report(i, cmd, rv, av, " (final state%s)" % db_label)
        self.touch()
        for cmd in ([b"DBSIZE"], [b"KEYS", b"*"]):
            rv, av = _run(cr, cmd), _run(ca, cmd)
            rcmp, acmp = _compare(cmd[0], rv, av)
            if rcmp != acmp:
                self.report(i, cmd, rv, av, " (final state%s)" % db_label)

    def check(self, what):
        assert not self.mismatches, (
            "%d divergence(s) between redis and abacus (%s, seed %d; after each one both "
            "servers were flushed and the run went on):\n\n%s"
            % (len(self.mismatches), what, self.seed,
               "\n\n".join("\n".join(m) for m in self.mismatches)))


@pytest.mark.parametrize("seed", SEEDS)
def test_differential(pair, seed):
    cr, ca, cr2, ca2 = pair
    cr.flushall()
    ca.flushall()
    gen = Gen(random.Random(seed))
    run = Runner(seed, [(cr, ca), (cr2, ca2)])
    i = 0
    while i < COMMANDS_PER_SEED and not run.done():
        for conn, args in gen.step():
            if args[0].upper() in SKIP:
                continue
            ok = run.act(i, args, conn)
            i += 1
            if not ok:
                break  # the rest of this step (a transaction) makes no sense now
    if not run.mismatches:
        run.final_state(COMMANDS_PER_SEED, KEYS)
        # keys COPY ... DB 1 and MOVE put in database 1
        for c in (cr, ca):
            _run(c, [b"SELECT", b"1"])
        run.final_state(COMMANDS_PER_SEED, KEYS, " of db 1")
        for c in (cr, ca):
            _run(c, [b"SELECT", b"0"])
    run.check("test_differential")


# ---------------------------------------------------------------------------
# glob patterns: KEYS and the MATCH of SCAN, SSCAN and HSCAN over names full of
# pattern characters


GLOB_NAMES = [b"", b"a", b"b", b"ab", b"abc", b"a*", b"a?", b"[", b"]", b"[a]", b"\\",
              b"a\\b", b"-", b"^", b"a-b", b"A", b"aa", b"ba", b"*", b"?", b"x]y", b"\xff",
              b"h\x00llo", b"hello", b"hallo", b"hillo", b"hllo", b"heeello", b"k1", b"{t}"]
GLOB_PATTERNS = [b"*", b"", b"?", b"??", b"a*", b"*a", b"*b*", b"h?llo", b"h*llo", b"h[ae]llo",
                 b"h[^e]llo", b"h[a-b]llo", b"h[b-a]llo", b"[", b"[a", b"a[", b"[a-]", b"[-a]",
                 b"[^a]", b"[^]", b"[]", b"[]]", b"[]a]", b"[\\]]", b"\\[*", b"\\*", b"\\?",
                 b"\\", b"a\\", b"*\\", b"a\\\\b", b"a\\b", b"[\\", b"[a-", b"[a-\\]", b"**",
                 b"*?", b"?*?", b"[!a]", b"x[]]y", b"x]y", b"[x]]y", b"h\x00*", b"\xff",
                 b"[\xfe-\xff]", b"[A-a]", b"[a-A]", b"[^-]", b"{t}", b"[{]t}"]


@pytest.mark.parametrize("seed", SEEDS)
def test_differential_glob(pair, seed):
    cr, ca, _, _ = pair
    r = random.Random(seed)
    run = Runner(seed, [(cr, ca)], touch_keys=GLOB_NAMES)
    setup = [[b"FLUSHALL"]] + [[b"SET", n, b"v"] for n in GLOB_NAMES]
    setup += [[b"SADD", b"gset"] + GLOB_NAMES, [b"SADD", b"gints", b"1", b"10", b"2", b"21"],
              [b"HSET", b"ghash"] + [a for n in GLOB_NAMES for a in (n, n + b"!")]]
    for i, args in enumerate(setup):
        run.act(-1 - i, args)
    tokens = GLOB_TOKENS + [b"h", b"e", b"l", b"o", b"x", b"y", b"\x00", b"\xff"]
    for i in range(120):
        if run.done():
            break
        x = r.random()
        if x < 0.4:
            p = r.choice(GLOB_PATTERNS)
        elif x < 0.6:
            p = r.choice(GLOB_NAMES)
        else:
            p = b"".join(r.choice(tokens) for _ in range(r.randint(0, 6)))
        count = r.choice([b"1", b"3", b"10", b"1000"])
        for args in ([b"KEYS", p], [b"SCAN", b"0", b"MATCH", p, b"COUNT", count],
                     [b"SSCAN", b"gset", b"0", b"MATCH", p, b"COUNT", count],
                     [b"SSCAN", b"gints", b"0", b"MATCH", p],
                     [b"HSCAN", b"ghash", b"0", b"COUNT", count, b"MATCH", p]):
            if not run.act(i, args):
                break
    run.check("test_differential_glob")


# ---------------------------------------------------------------------------
# databases: SELECT, MOVE, COPY ... DB, SWAPDB, FLUSHDB, with WATCH across them


DB_KEYS = [b"a", b"b", b"c", b"{t}d"]
DBS = 4


def _db_step(r, watching):
    """Actions for the databases mix (0: main connection, 1: the second one)."""
    k = r.choice(DB_KEYS)
    db = lambda: r.choice([b"0", b"1", b"2", b"3"] * 6 + [b"16", b"-1", b"x", b""])
    c = r.randrange(20)
    if c < 3:
        return [(r.choice([0, 0, 1]), [b"SELECT", db()])]
    if c < 6:
        return [(0, r.choice([[b"SET", k, r.choice([b"1", b"x", b"22"])],
                              [b"SADD", k, r.choice([b"1", b"m"])],
                              [b"HSET", k, b"f", b"v"], [b"DEL", k],
                              [b"EXPIRE", k, b"100000"], [b"PERSIST", k]]))]
    if c < 9:
        return [(0, r.choice([[b"GET", k], [b"TYPE", k], [b"EXISTS"] + DB_KEYS, [b"TTL", k],
                              [b"DBSIZE"], [b"KEYS", b"*"], [b"RANDOMKEY"]]))]
    if c < 11:
        return [(0, [b"MOVE", k, db()])]
    if c < 13:
        opts = [b"DB", db()] if r.random() < 0.8 else []
        if r.random() < 0.4:
            opts.append(b"REPLACE")
        return [(0, [b"COPY", k, r.choice(DB_KEYS)] + opts)]
    if c < 15:
        return [(r.choice([0, 1]), [b"SWAPDB", db(), db()])]
    if c == 15:
        return [(r.choice([0, 1]), r.choice([[b"FLUSHDB"], [b"FLUSHDB", b"ASYNC"],
                                             [b"FLUSHDB", b"SYNC"], [b"FLUSHDB", b"x"]]))]
    # WATCH on the main connection, something on the second one, MULTI ... EXEC
    # (no MOVE on the second connection: a MOVE that moves nothing raises the flag in
    # Abacus only, see Gen.other_command)
    acts = [(0, [b"WATCH", k])]
    acts.append((1, r.choice([[b"SWAPDB", db(), db()], [b"FLUSHDB"], [b"SET", k, b"2"],
                              [b"GET", k], [b"SELECT", db()]])))
    acts += [(0, [b"MULTI"]), (0, [b"SELECT", db()]), (0, [b"GET", k]),
             (0, [b"SET", r.choice(DB_KEYS), b"t"]), (0, [b"EXEC"])]
    return acts


@pytest.mark.parametrize("seed", SEEDS)
def test_differential_databases(pair, seed):
    cr, ca, cr2, ca2 = pair
    r = random.Random(seed)
    conns = [(cr, ca), (cr2, ca2)]
    run = Runner(seed, conns, touch_keys=DB_KEYS)

    def reset_dbs():
        for pr in conns:
            for c in pr:
                _run(c, [b"SELECT", b"0"])
    run.after_reset = reset_dbs
    cr.flushall()
    ca.flushall()
    reset_dbs()
    i = 0
    while i < 600 and not run.done():
        for conn, args in _db_step(r, False):
            ok = run.act(i, args, conn)
            i += 1
            if not ok:
                break
    if not run.mismatches:
        for d in range(DBS):
            for c in (cr, ca):
                _run(c, [b"SELECT", str(d).encode()])
            run.final_state(i, DB_KEYS, " of db %d" % d)
    reset_dbs()
    run.check("test_differential_databases")
