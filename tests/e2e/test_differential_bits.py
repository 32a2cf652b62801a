"""Differential test of BITOP, BITFIELD and BITFIELD_RO: seeded random sequences against
the real Redis and Abacus (the server pair, client and exact error parsing of
test_differential.py).

Each seed's `random.Random(seed)` generates a fixed number of commands (no time bound) over
a small pool of keys: SET (random bytes, empty strings, integers), SETBIT (offsets up to
~25 KB, so BITOP's results cross its 8-byte words and 16 KiB blocks), APPEND, BITOP (every
operation, 1 to 4 sources, missing keys, empty strings, a set for WRONGTYPE, the destination
among the sources, bad operations, NOT with two sources), BITFIELD and BITFIELD_RO (random
types and offsets, `#` offsets, OVERFLOW modes, values at the types' edges, bad types,
offsets, values and truncated subcommands). After each command the touched key is read back
with GET, STRLEN, TYPE, OBJECT ENCODING (of strings: set encodings
differ by design) and TTL (TTL by class: -2, -1 or positive), and every reply
must be equal.

Half the keys carry the `{bt}` tag and half do not: Abacus runs with `--threads 2`, so a
BITOP over untagged keys mostly spans both shards (the executor's cross-shard path) and one
over tagged keys runs on one shard. Rerun a seed with `-k 'test_differential_bits[SEED]'`.
"""

import os
import random

import pytest

from test_differential import Err, _client, _run, redis_and_abacus  # noqa: F401 (Err: reprs)

pytestmark = pytest.mark.abacus_only("starts its own redis-server and abacus and compares them")

SEEDS = [int(x) for x in os.environ.get("DIFF_BITS_SEEDS", "11,12,13").split(",")]
COMMANDS_PER_SEED = int(os.environ.get("DIFF_BITS_COMMANDS", "300"))
HISTORY = 12

TAGGED = [b"{bt}a", b"{bt}b", b"{bt}c", b"{bt}d"]
UNTAGGED = [b"ba", b"bb", b"bc", b"bd", b"be"]
SETS = [b"{bt}set", b"bset"]           # non-string keys, for WRONGTYPE
MISSING = [b"{bt}missing", b"bmissing"]  # never written
EDGE_INTS = [0, 1, -1, 2, -2, 7, 8, 127, 128, -128, -129, 255, 256, 2**15, 2**31 - 1, 2**31,
             2**32, 2**62, 2**63 - 1, -2**63, -2**63 + 1, 2**62 - 1, -2**62, 1000, -1000]
BAD_TYPES = [b"u64", b"i65", b"i0", b"u0", b"x8", b"I8", b"U8", b"u", b"", b"i08", b"u-1",
             b"i+8", b"u 8", b"8", b"u8\x00x"]
BAD_OFFSETS = [b"-1", b"#-1", b"abc", b"", b"1.5", b"4294967296", b"#9223372036854775807",
               b"#4294967296", b"##1", b"+1", b"01", b"#", b" 1"]
BAD_VALUES = [b"x", b"1.5", b"", b"9223372036854775808", b" 1", b"0x10"]


class Gen:
    def __init__(self, rnd):
        self.r = rnd

    def string_key(self):
        pool = self.r.choice([TAGGED, UNTAGGED])
        return self.r.choice(pool)

    def source_key(self):
        x = self.r.random()
        if x < 0.1:
            return self.r.choice(MISSING)
        if x < 0.13:
            return self.r.choice(SETS)
        return self.string_key()

    def value(self):
        r = self.r
        x = r.random()
        if x < 0.1:
            return b""
        if x < 0.25:
            return str(r.choice(EDGE_INTS + [r.randint(-999, 999)])).encode()
        return r.randbytes(r.randint(1, r.choice([4, 12, 40])))

    def ftype(self):
        r = self.r
        if r.random() < 0.06:
            return r.choice(BAD_TYPES)
        if r.random() < 0.5:
            return b"i%d" % r.choice([1, 2, 7, 8, 9, 15, 16, 31, 32, 33, 63, 64, r.randint(1, 64)])
        return b"u%d" % r.choice([1, 2, 7, 8, 9, 15, 16, 31, 32, 33, 62, 63, r.randint(1, 63)])

    def offset(self):
        r = self.r
        x = r.random()
        if x < 0.05:
            return r.choice(BAD_OFFSETS)
        if x < 0.3:
            return b"#%d" % r.randint(0, 40)
        return b"%d" % r.choice([r.randint(0, 70), r.randint(0, 400)])

    def int_value(self):
        r = self.r
        x = r.random()
        if x < 0.04:
            return r.choice(BAD_VALUES)
        if x < 0.6:
            return b"%d" % r.choice(EDGE_INTS)
        return b"%d" % (r.getrandbits(64) - 2**63 >> r.randint(0, 63))

    def bitfield_ops(self, readonly):
        r = self.r
        ops = []
        for _ in range(r.randint(0, 5)):
            x = r.random()
            if x < (0.8 if readonly else 0.3):
                ops += [b"GET", self.ftype(), self.offset()]
            elif x < (0.85 if readonly else 0.6):
                ops += [r.choice([b"SET", b"set"]), self.ftype(), self.offset(), self.int_value()]
            elif x < (0.9 if readonly else 0.85):
                ops += [r.choice([b"INCRBY", b"incrby"]), self.ftype(), self.offset(), self.int_value()]
            else:
                mode = r.choice([b"WRAP", b"SAT", b"FAIL", b"sat", b"fail", b"wrap"] * 5 + [b"FOO", b""])
                ops += [b"OVERFLOW", mode]
        if ops and r.random() < 0.04:
            ops = ops[:-1]  # a truncated subcommand (or a dangling OVERFLOW): syntax error
        if r.random() < 0.02:
            ops.append(r.choice([b"GETX", b"overflow"]))
        return ops

    def command(self):
        """(the command, the key to read back after it)."""
        r = self.r
        x = r.random()
        if x < 0.1:
            k = self.string_key()
            return [b"SET", k, self.value()], k
        if x < 0.2:
            k = self.string_key()
            off = r.choice([r.randint(0, 64), r.randint(0, 600), r.randint(0, 6000), r.randint(0, 200000)]
                           if r.random() < 0.05 else [r.randint(0, 64), r.randint(0, 600)])
            return [b"SETBIT", k, b"%d" % off, r.choice([b"0", b"1"])], k
        if x < 0.25:
            k = self.string_key()
            return [b"APPEND", k, self.value()], k
        if x < 0.28:
            k = r.choice(SETS)  # (re)creates the set a BITOP may have overwritten
            return [b"SADD", k, b"m"], k
        if x < 0.31:
            k = self.string_key()
            return [b"EXPIRE", k, b"100000"], k
        if x < 0.62:
            op = r.choice([b"AND", b"OR", b"XOR", b"NOT", b"and", b"Or", b"xor", b"not"] * 4
                          + [b"NAND", b""])
            tagged = r.random() < 0.5
            pool = TAGGED if tagged else UNTAGGED
            if op.upper() == b"NOT" and r.random() < 0.9:
                n = 1
            else:
                n = r.randint(1, 4)
            srcs = []
            for _ in range(n):
                y = r.random()
                if y < 0.08:
                    srcs.append(MISSING[0] if tagged else MISSING[1])
                elif y < 0.11:
                    srcs.append(SETS[0] if tagged else SETS[1])
                else:
                    srcs.append(r.choice(pool))
            dest = r.choice(srcs) if r.random() < 0.15 else r.choice(pool + ([SETS[0]] if tagged else [SETS[1]]))
            if r.random() < 0.05:  # mixed tags: the executor's cross-shard path either way
                srcs.append(r.choice(UNTAGGED if tagged else TAGGED))
            return [b"BITOP", op, dest] + srcs, dest
        if x < 0.87:
            k = self.source_key()
            return [b"BITFIELD", k] + self.bitfield_ops(False), k
        k = self.source_key()
        return [b"BITFIELD_RO", k] + self.bitfield_ops(True), k


def _ttl_class(v):
    return v if isinstance(v, Err) or v in (-2, -1) else "positive"


@pytest.fixture(scope="module")
def bits_pair():
    with redis_and_abacus() as (rs, ab):
        cr, ca = _client(rs), _client(ab)
        yield cr, ca
        cr.close()
        ca.close()


@pytest.mark.parametrize("seed", SEEDS)
def test_differential_bits(bits_pair, seed):
    cr, ca = bits_pair
    for c in (cr, ca):
        c.execute_command("FLUSHALL")
        for k in SETS:
            c.execute_command("SADD", k, "m")
    gen = Gen(random.Random(seed))
    history = []
    for i in range(COMMANDS_PER_SEED):
        args, key = gen.command()
        history.append(args)
        checks = [args, [b"GET", key], [b"STRLEN", key], [b"TYPE", key], [b"OBJECT", b"ENCODING", key],
                  [b"TTL", key]]
        for check in checks:
            if check[0] == b"OBJECT" and _run(cr, [b"TYPE", key]) != b"string":
                continue  # set encodings differ by design (README "sets")
            ra, aa = _run(cr, check), _run(ca, check)
            if check[0] == b"TTL":
                ra, aa = _ttl_class(ra), _ttl_class(aa)
            if ra != aa:
                past = "\n".join("  " + repr(h)[:300] for h in history[-HISTORY:])
                pytest.fail("seed %d, command %d: %r\n  after %r\n  redis:  %r\n  abacus: %r\nrecent commands:\n%s"
                            % (seed, i, check[:12], args[:12], repr(ra)[:600], repr(aa)[:600], past))
