"""Differential test over RESP3, at the byte level.

The same idea as test_differential.py (seeded random command sequences sent to a real
redis-server, the reference, and to Abacus), but each connection is a raw socket that
sent `HELLO 3`, and replies are parsed into typed trees that keep every RESP type
marker: `+` simple, `-` error, `:` integer, `$` bulk (`$-1` kept apart from `_`), `*`
array (`*-1` likewise), `%` map, `~` set, `_` null, `,` double (its text), `#`
boolean, `=` verbatim (format and text), `(` big number, `>` push, `|` attribute, `!`
blob error. Trees are compared exactly, except:
  - maps and sets are compared order-insensitively (at every depth);
  - HKEYS, HVALS (arrays) sorted, KEYS as a set of names;
  - random replies (SRANDMEMBER, HRANDFIELD, SPOP, RANDOMKEY) by shape (markers and
    lengths) plus membership / popped+remaining checks, as test_differential.py;
  - time-, policy- or build-dependent replies by shape: TTL/PTTL/EXPIRETIME/PEXPIRETIME
    (-2, -1 or positive), OBJECT FREQ/IDLETIME/REFCOUNT, TIME, LASTSAVE, CLIENT ID,
    COMMAND COUNT (Abacus implements fewer commands), INFO / CLIENT INFO / CLIENT LIST
    (a verbatim string `=...txt:`, compared by marker and format only);
  - HELLO: a map with the same keys and the same `proto` (server, version, id, mode,
    role legitimately differ);
  - SCAN/SSCAN/HSCAN from cursor 0: iterated to cursor 0 on each server; every page must
    be `*2` of a `$` cursor and a `*` of `$` elements, and the sets of elements must be
    equal (cursors and page boundaries legitimately differ).

The mix is test_differential.py's generator (strings, hashes, sets, keys, expiry,
transactions with WATCH and a second connection, SCAN family, KEYS, OBJECT, error
and arity cases), plus RESP3-relevant commands: HELLO (errors, no-argument, SETNAME),
CONFIG GET of a few parameters (a map), COMMAND COUNT / INFO / DOCS of a few commands
(DOCS is a map of maps), PFADD / PFCOUNT / PFMERGE, PING, ECHO, INFO, CLIENT
GETNAME/SETNAME/INFO/ID, TIME, LASTSAVE, SELECT 0, and errors that quote an argument
(HELLO option, CLIENT KILL/LIST TYPE, DEBUG, EXPIRE option: non-UTF-8 bytes are sent
back as they are, as Redis's %s). Replies of every RESP3 type Redis
7.0 sends for these commands appear: nulls (`_`: GET of a missing key, MGET/HMGET
holes, SET NX that did not set, aborted EXEC, COMMAND INFO of an unknown command),
maps (HGETALL, CONFIG GET, HELLO, LCS IDX, COMMAND DOCS), sets (SMEMBERS, SINTER,
SUNION, SDIFF, SPOP/SRANDMEMBER with a count >= the size), verbatim strings (INFO,
CLIENT INFO/LIST). Redis 7.0 sends no double for these commands (INCRBYFLOAT and
HINCRBYFLOAT reply a bulk string in RESP3 too), no boolean, no big number, no push.

After the RESP3 run of each seed, both main connections send `HELLO 2` (a flat array
with the same keys, proto 2), then a few hundred commands of the mix, compared the
same way, whose replies must carry no RESP3-only marker; then `HELLO 3` again.

Left out of the mix (besides what test_differential.py leaves out, see its docstring):
  - OBJECT ENCODING: deliberately different (README, "sets": integer sets are `bitmap`).
  - PFADD/PFMERGE/PFCOUNT, HELLO, TIME, ... inside transactions or on the second
    connection between WATCH and EXEC: a PFADD that changes nothing raises the WATCH
    flag in Abacus only (README: a conservative WATCH), and PFCOUNT may rewrite the
    cached cardinality (a modification for Redis's WATCH).
  - CONFIG GET of port, dir, bind, save, ...: these differ by construction (each server
    is started with its own); glob patterns: Redis has many more parameters.
  - `HELLO 2` inside the mix (switching is tested at the end of each seed).
  - COMMAND INFO without names (Redis has more commands), and in COMMAND INFO the flags,
    tips and key specs' contents and CONFIG REWRITE (see command_info_view); COMMAND DOCS
    beyond names, group and which fields exist (see command_docs_view).
  - Non-UTF-8 names of unknown subcommands (OBJECT \xff ...): that error is built in
    conn.rs, which still sends a lossy UTF-8 copy of the name.
  - CONFIG SET of a non-UTF-8 parameter name (the same lossy copy, in config.rs).

On a mismatch the assertion message names the seed, the command's index, the command,
both raw replies (repr of the bytes) and the ten commands before it. Rerun one seed
with `-k 'test_differential_resp3[SEED]'`. Environment: DIFF3_SEEDS=1,2,3,
DIFF3_COMMANDS=N. The file starts both servers itself, so it is skipped with
`--target redis`.
"""

import os
import random
import select
import socket

import pytest

from helpers import encode_command
from test_differential import (HASH_KEYS, KEYS, SET_KEYS, STRING_KEYS,
                               JUNK, TTL_LIKE, ZERO_CURSORS, Gen, _fmt, _short,
                               redis_and_abacus)

pytestmark = pytest.mark.abacus_only("starts its own redis-server and abacus and compares them")

SEEDS = [int(x) for x in os.environ.get("DIFF3_SEEDS", "1,2,3,4,5,6,7,8").split(",")]
COMMANDS_PER_SEED = int(os.environ.get("DIFF3_COMMANDS", "4000"))
RESP2_COMMANDS = 400  # per seed, after HELLO 2
HISTORY = 10
MAX_MISMATCHES = 5

PF_KEYS = [b"pf0", b"pf1", b"{t}pf"]
ALL_KEYS = KEYS + PF_KEYS

# CONFIG GET parameters whose value is the same on both servers as started here
CONFIG_PARAMS = [b"maxmemory", b"maxmemory-policy", b"hz", b"timeout", b"databases",
                 b"appendonly", b"appendfsync", b"maxmemory-samples", b"lfu-log-factor",
                 b"lfu-decay-time", b"hash-max-listpack-value",
                 b"proto-max-bulk-len", b"tcp-keepalive", b"MAXMEMORY", b"Hz",
                 b"nosuch-parameter"]
# (not set-max-listpack-entries/-value: Redis 7.2's parameters, that Abacus has and Redis
# 7.0 does not, README "Configuration")
COMMAND_NAMES = [b"get", b"set", b"hgetall", b"smembers", b"incrbyfloat", b"pfadd",
                 b"GET", b"mset", b"nosuchcommand", b"object|freq", b"config|get",
                 b"config", b"object"]

# replies compared by shape only (markers and lengths, no values)
SHAPE_ONLY = {b"RANDOMKEY", b"OBJECT|FREQ", b"OBJECT|IDLETIME", b"OBJECT|REFCOUNT",
              b"TIME", b"LASTSAVE", b"CLIENT|ID", b"COMMAND|COUNT", b"SRANDMEMBER",
              b"HRANDFIELD", b"SPOP"}
VERBATIM = {b"INFO", b"CLIENT|INFO", b"CLIENT|LIST"}
SORTED_ARRAYS = {b"HKEYS", b"HVALS"}
# RESP2 replies of these are arrays (RESP3: sets); compared sorted
SETS2 = {b"SMEMBERS", b"SINTER", b"SUNION", b"SDIFF"}
# RESP2 replies of these are arrays of pairs (RESP3: maps); compared as sorted pairs
PAIRS2 = {b"HGETALL", b"CONFIG|GET"}
# commands of the RESP3 extras that must not go into transactions or to the second
# connection (see the docstring)
NO_TX = {b"SPOP", b"DBSIZE", b"RANDOMKEY", b"HELLO", b"PFADD", b"PFMERGE", b"PFCOUNT",
         b"CLIENT", b"TIME", b"LASTSAVE", b"INFO"}
RESP3_ONLY_MARKERS = set(b"%~_,#=(>|!")


# ---------------------------------------------------------------------------
# raw RESP parsing into typed trees


class Incomplete(Exception):
    pass


def _line(buf, pos):
    i = buf.find(b"\r\n", pos)
    if i < 0:
        raise Incomplete
    return buf[pos:i], i + 2


def parse(buf, pos=0):
    """One reply from buf[pos:]: (tree, end). A tree is a tuple (marker, ...)."""
    if pos >= len(buf):
        raise Incomplete
    m = chr(buf[pos])
    line, pos = _line(buf, pos + 1)
    if m in "+-":
        return (m, line), pos
    if m == ":":
        return (m, int(line)), pos
    if m in "$!=":
        n = int(line)
        if n < 0:
            return (m, None), pos
        if len(buf) < pos + n + 2:
            raise Incomplete
        data = buf[pos:pos + n]
        assert buf[pos + n:pos + n + 2] == b"\r\n", "payload not followed by CRLF"
        if m == "=":
            return (m, data[:3], data[4:]), pos + n + 2
        return (m, data), pos + n + 2
    if m in "_":
        assert line == b"", "bad null"
        return (m,), pos
    if m in ",(":
        return (m, line), pos
    if m == "#":
        assert line in (b"t", b"f"), "bad boolean"
        return (m, line == b"t"), pos
    if m in "*~>":
        n = int(line)
        if n < 0:
            return (m, None), pos
        items = []
        for _ in range(n):
            t, pos = parse(buf, pos)
            items.append(t)
        return (m, items), pos
    if m in "%|":
        n = int(line)
        pairs = []
        for _ in range(n):
            k, pos = parse(buf, pos)
            v, pos = parse(buf, pos)
            pairs.append((k, v))
        if m == "|":
            t, pos = parse(buf, pos)  # the attribute describes the next reply
            return (m, pairs, t), pos
        return (m, pairs), pos
    raise AssertionError("unknown RESP type %r in %r" % (m, buf[:200]))


def canon(t):
    """Maps and sets sorted (recursively): compared order-insensitively."""
    m = t[0]
    if m in "*>" and t[1] is not None:
        return (m, [canon(c) for c in t[1]])
    if m == "~":
        return (m, sorted((canon(c) for c in t[1]), key=repr))
    if m == "%":
        return (m, sorted(((canon(k), canon(v)) for k, v in t[1]), key=repr))
    if m == "|":
        return (m, sorted(((canon(k), canon(v)) for k, v in t[1]), key=repr), canon(t[2]))
    return t


def shape(t):
    """Markers and lengths only (errors in full: their text is deterministic)."""
    m = t[0]
    if m == "-":
        return t
    if m in "*~>" and t[1] is not None:
        return (m, sorted((shape(c) for c in t[1]), key=repr) if m == "~" else
                [shape(c) for c in t[1]])
    if m == "%":
        return (m, len(t[1]))
    if m in "$*" and t[1] is None:
        return t
    return (m,)


def markers(t):
    """Every type marker in a tree."""
    m = t[0]
    out = {m}
    if m in "*~>" and t[1] is not None:
        for c in t[1]:
            out |= markers(c)
    elif m in "%|":
        for k, v in t[1]:
            out |= markers(k) | markers(v)
        if m == "|":
            out |= markers(t[2])
    return out


def bulks(t):
    """The payloads of a flat aggregate of bulk strings (SMEMBERS, SPOP, ...)."""
    if t[0] == "$" and t[1] is not None:
        return [t[1]]
    if t[0] in "*~" and t[1] is not None:
        return [c[1] for c in t[1] if c[0] == "$"]
    return []


class Conn:
    def __init__(self, proc):
        self.sock = socket.create_connection((proc.host, proc.port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def call(self, args):
        """Send a command, return (raw reply bytes, tree)."""
        self.sock.sendall(encode_command(*args))
        while True:
            try:
                tree, end = parse(self.buf)
            except Incomplete:
                # read all that has arrived before parsing again (a reply of a million
                # elements, SRANDMEMBER k -123456, would be re-parsed per 64 KB otherwise)
                chunks = [self.buf]
                while True:
                    chunk = self.sock.recv(1 << 16)
                    if not chunk:
                        raise ConnectionError("connection closed by the server")
                    chunks.append(chunk)
                    if not select.select([self.sock], [], [], 0)[0]:
                        break
                self.buf = b"".join(chunks)
                continue
            raw, self.buf = self.buf[:end], self.buf[end:]
            return raw, tree

    def tree(self, args):
        return self.call(args)[1]

    def close(self):
        self.sock.close()


# ---------------------------------------------------------------------------
# comparison


def cmp_name(args):
    name = args[0].upper()
    if name in (b"OBJECT", b"CONFIG", b"COMMAND", b"CLIENT") and len(args) > 1:
        return name + b"|" + args[1].upper()
    return name


def hello_view(t):
    """HELLO: the keys of the map (or of the RESP2 flat array) and the proto value."""
    if t[0] == "%":
        pairs = t[1]
    elif t[0] == "*" and t[1] is not None and len(t[1]) % 2 == 0:
        pairs = list(zip(t[1][0::2], t[1][1::2]))
    else:
        return canon(t)
    proto = [v for k, v in pairs if k == ("$", b"proto")]
    return (t[0], sorted(repr(k) for k, _ in pairs), proto)


def command_info_view(t):
    """COMMAND INFO: each command's name, arity, key positions and ACL categories exactly;
    the aggregate types of flags, tips, key specs and subcommands (sets in RESP3); the
    names of the subcommands. Not the flags' nor the tips' nor the key specs' contents:
    Abacus's command table has no key specs, no tips, and not Redis's noscript,
    allow_busy, no_async_loading, skip_slowlog flags (nor every loading/stale)."""
    if t[0] != "*" or t[1] is None:
        return canon(t)
    out = []
    for e in t[1]:
        if e[0] != "*" or e[1] is None or len(e[1]) != 10:
            out.append(canon(e))
            continue
        f = e[1]
        # subcommands (full entries), by name; less CONFIG REWRITE, not in Abacus
        subs = f[9][1]
        if subs:
            subs = sorted((command_info_view(("*", [s]))[1] for s in subs
                           if s[0] == "*" and s[1] and s[1][0] != ("$", b"config|rewrite")),
                          key=repr)
        out.append([canon(f[0]), canon(f[1]), f[2][0], canon(f[3]), canon(f[4]), canon(f[5]),
                    canon(f[6]), f[7][0], f[8][0], f[9][0], subs])
    return (t[0], out)


def command_docs_view(t):
    """COMMAND DOCS: the documented names, and for each its group and which of the fields
    summary/since/group it has. Not the rest: Abacus's docs are its own short ones
    (summary, since, group), without Redis's complexity, history and arguments."""
    if t[0] == "*" and t[1] is not None and len(t[1]) % 2 == 0:  # RESP2: flat arrays
        t = ("%", [(k, ("%", list(zip(v[1][0::2], v[1][1::2]))) if v[0] == "*" and v[1]
                        else v) for k, v in zip(t[1][0::2], t[1][1::2])])
    if t[0] != "%":
        return canon(t)
    out = []
    for k, v in t[1]:
        if v[0] != "%":
            out.append((canon(k), canon(v)))
            continue
        fields = {f[1]: x for f, x in v[1] if f[0] == "$"}
        out.append((canon(k), v[0], fields.get(b"group"),
                    sorted(f for f in fields if f in (b"summary", b"since", b"group"))))
    return (t[0], sorted(out, key=repr))


def view(name, t):
    """The part of reply `t` of command `name` that must be equal on both servers."""
    m = t[0]
    if name in TTL_LIKE and m == ":":
        return (m, t[1] if t[1] < 0 else "positive")
    if name in SHAPE_ONLY:
        return shape(t)
    if name in VERBATIM and m == "=":
        return (m, t[1])
    if name in VERBATIM and m == "$" and t[1] is not None:  # RESP2: a bulk string
        return (m,)
    if name == b"HELLO":
        return hello_view(t)
    if name == b"COMMAND|INFO":
        return command_info_view(t)
    if name == b"COMMAND|DOCS":
        return command_docs_view(t)
    if (name in SORTED_ARRAYS or name in SETS2) and m == "*" and t[1] is not None:
        return (m, sorted(t[1], key=repr))
    if name == b"KEYS" and m == "*" and t[1] is not None:
        return (m, sorted(set(t[1]), key=repr))
    if name in PAIRS2 and m == "*" and t[1] is not None:
        return (m, sorted(zip(t[1][0::2], t[1][1::2]), key=repr))
    return canon(t)


def scan_all(conn, args):
    """Iterate a SCAN/SSCAN/HSCAN from cursor 0 to cursor 0: ("elements", sorted set),
    the first reply's tree if it is not a page (an error), or ("bad page", tree)."""
    ci = 1 if args[0].upper() == b"SCAN" else 2
    args = list(args)
    seen = set()
    for calls in range(100000):
        raw, t = conn.call(args)
        page_ok = (t[0] == "*" and t[1] is not None and len(t[1]) == 2
                   and t[1][0][0] == "$" and t[1][1][0] == "*" and t[1][1][1] is not None
                   and all(c[0] == "$" for c in t[1][1][1]))
        if not page_ok:
            return canon(t) if calls == 0 else ("bad page", raw)
        cursor, items = t[1][0][1], [c[1] for c in t[1][1][1]]
        if args[0].upper() == b"HSCAN":
            seen.update(zip(items[0::2], items[1::2]))
        else:
            seen.update(items)
        if cursor == b"0":
            return ("elements", sorted(seen))
        args[ci] = cursor
    return ("no end", sorted(seen))


# ---------------------------------------------------------------------------
# generation: test_differential.Gen plus RESP3-relevant commands


class Gen3(Gen):
    def extra_cmd(self):
        r = self.r
        c = r.randrange(25)
        if c < 3:
            ps = [r.choice(CONFIG_PARAMS) for _ in range(r.choice([1, 1, 1, 2, 3]))]
            return [b"CONFIG", r.choice([b"GET", b"get"])] + ps
        if c == 3:
            return r.choice([[b"CONFIG", b"GET"], [b"CONFIG"], [b"CONFIG", b"FOO"]])
        if c == 4:
            return r.choice([[b"COMMAND", b"COUNT"], [b"COMMAND", b"COUNT", b"x"]])
        if c in (5, 6):
            # (not COMMAND INFO without names: every command, and Redis has more)
            return [b"COMMAND", b"INFO"] + [r.choice(COMMAND_NAMES)
                                            for _ in range(r.randint(1, 2))]
        if c == 7:
            return [b"COMMAND", b"DOCS"] + [r.choice(COMMAND_NAMES)
                                            for _ in range(r.randint(1, 2))]
        if c in (8, 9, 10):
            k = r.choice(PF_KEYS + [r.choice(STRING_KEYS)] * (c == 10))
            return [b"PFADD", k] + [self.member() for _ in range(r.randint(0, 4))]
        if c in (11, 12):
            return [b"PFCOUNT"] + [r.choice(PF_KEYS) for _ in range(r.randint(0, 2))] + \
                ([r.choice(STRING_KEYS)] if r.random() < 0.15 else [])
        if c == 13:
            return [b"PFMERGE", r.choice(PF_KEYS)] + [r.choice(PF_KEYS)
                                                       for _ in range(r.randint(0, 2))]
        if c == 14:
            return r.choice([[b"HELLO", b"3"], [b"HELLO"], [b"HELLO", b"4"],
                             [b"HELLO", b"x"], [b"HELLO", b"3", b"SETNAME", b"n1"],
                             [b"HELLO", b"3", b"SETNAME", b"a b"], [b"HELLO", b"3", b"FOO"],
                             [b"HELLO", b"0"], [b"HELLO", b"-1"], [b"HELLO", b"1"]])
        if c == 15:
            return r.choice([[b"PING"], [b"PING", self.value()], [b"PING", b"a", b"b"],
                             [b"ECHO", self.value()], [b"ECHO"]])
        if c == 16:
            return r.choice([[b"INFO"], [b"INFO", b"server"], [b"INFO", b"keyspace"],
                             [b"CLIENT", b"INFO"], [b"CLIENT", b"LIST"]])
        if c == 17:
            return r.choice([[b"CLIENT", b"GETNAME"], [b"CLIENT", b"GETNAME"],
                             [b"CLIENT", b"SETNAME", r.choice([b"x", b"", b"a b"])],
                             [b"CLIENT", b"ID"]])
        if c == 18:
            return r.choice([[b"TIME"], [b"LASTSAVE"], [b"SELECT", b"0"],
                             [b"TYPE", r.choice(ALL_KEYS)], [b"DBSIZE"]])
        if c == 19:
            # replies with nulls
            return r.choice([[b"GET", b"missing"], [b"MGET", b"missing", r.choice(KEYS)],
                             [b"HMGET", r.choice(HASH_KEYS), b"nofield", self.field()],
                             [b"HGET", r.choice(HASH_KEYS), b"nofield"],
                             [b"SET", r.choice(STRING_KEYS), b"v", b"NX"],
                             [b"SET", b"missing", b"v", b"XX"],
                             [b"SRANDMEMBER", b"missing"], [b"HRANDFIELD", b"missing"],
                             [b"SPOP", b"missing"], [b"GETDEL", b"missing"],
                             [b"GETEX", b"missing"], [b"SET", b"missing", b"v", b"XX", b"GET"],
                             [b"CLIENT", b"GETNAME"]])
        if c == 20:
            # maps and sets
            return r.choice([[b"HGETALL", r.choice(HASH_KEYS)], [b"HGETALL", b"missing"],
                             [b"SMEMBERS", r.choice(SET_KEYS)], [b"SMEMBERS", b"missing"],
                             [b"SINTER", r.choice(SET_KEYS), r.choice(SET_KEYS)],
                             [b"SUNION"] + [r.choice(SET_KEYS) for _ in range(3)],
                             [b"SDIFF", r.choice(SET_KEYS), b"missing"],
                             [b"LCS", r.choice(STRING_KEYS), r.choice(STRING_KEYS), b"IDX",
                              b"WITHMATCHLEN"]])
        if c == 21:
            # random replies that are whole sets (count >= size) or empty
            k = r.choice(SET_KEYS)
            return r.choice([[b"SRANDMEMBER", k, b"1000"], [b"SRANDMEMBER", k, b"0"],
                             [b"SRANDMEMBER", k, b"-3"], [b"SPOP", k, b"1000"],
                             [b"SPOP", k, b"0"], [b"HRANDFIELD", r.choice(HASH_KEYS),
                                                  b"1000", b"WITHVALUES"],
                             [b"HRANDFIELD", r.choice(HASH_KEYS), b"-2", b"WITHVALUES"]])
        if c == 22:
            # doubles in Redis 7.0 are bulk strings; check the markers match
            return r.choice([[b"INCRBYFLOAT", r.choice(STRING_KEYS), r.choice([b"1.5", b"0.1",
                                                                               b"-2"])],
                             [b"HINCRBYFLOAT", r.choice(HASH_KEYS), self.field(), b"2.5"]])
        if c == 23:
            # errors that quote an argument (non-UTF-8 bytes included: sent back as is)
            junk = r.choice(JUNK)
            return r.choice([[b"HELLO", b"3", junk], [b"CLIENT", b"KILL", b"TYPE", junk],
                             [b"CLIENT", b"LIST", b"TYPE", junk], [b"DEBUG", junk],
                             [b"EXPIRE", r.choice(KEYS), b"100000", junk],
                             # (ASCII only: the unknown-subcommand error of containers is
                             # built in conn.rs, which still sends a lossy UTF-8 copy)
                             [r.choice([b"OBJECT", b"CONFIG", b"CLIENT", b"COMMAND"]),
                              r.choice([b"nosuch", b"x y"]), b"k"]])
        return [b"OBJECT", b"HELP"]

    def command(self):
        if self.r.random() < 0.1:
            self.pool = KEYS
            return self.extra_cmd()
        return Gen.command(self)

    def tx_command(self):
        while True:
            cmd = self.command()
            if cmd[0].upper() not in NO_TX:
                return cmd


# ---------------------------------------------------------------------------
# servers and the runner


@pytest.fixture(scope="module")
def servers():
    with redis_and_abacus() as (rs, ab):
        yield rs, ab


def _fmt_raw(raw):
    return _short(repr(raw), 1500)


class Runner:
    """`conns` are (redis, abacus) pairs of raw connections: [main, second]."""

    def __init__(self, seed, conns, resp):
        self.seed = seed
        self.conns = conns
        self.resp = resp   # the protocol the main connections speak now
        self.history = []
        self.mismatches = []
        self.queued = None

    def done(self):
        return len(self.mismatches) >= MAX_MISMATCHES

    def report(self, i, args, rraw, araw, note="", conn=0):
        label = " (second connection)" if conn else ""
        lines = ["seed=%d RESP%d command #%d: %s%s%s" % (self.seed, self.resp, i, _fmt(args),
                                                       label, note),
                 "  redis : " + _fmt_raw(rraw), "  abacus: " + _fmt_raw(araw),
                 "  preceding commands:"]
        lines += ["    #%d %s%s" % (j, _fmt(a), " (second connection)" if c else "")
                  for j, a, c in self.history[-HISTORY:]]
        self.mismatches.append(lines)
        try:
            for pr in self.conns:
                for c in pr:
                    c.call([b"DISCARD"])
                    c.call([b"UNWATCH"])
            cr, ca = self.conns[0]
            kr = set(bulks(cr.tree([b"KEYS", b"*"])))
            ka = set(bulks(ca.tree([b"KEYS", b"*"])))
            if kr != ka:
                lines.append("  keys only in redis: %r, only in abacus: %r"
                             % (sorted(kr - ka), sorted(ka - kr)))
            cr.call([b"FLUSHALL"])
            ca.call([b"FLUSHALL"])
        except (OSError, ConnectionError) as e:
            lines.append("  (a server is unreachable: %s)" % e)
            self.check("connection lost")
        self.history.clear()
        self.queued = None

    def touch(self, conn=0):
        # see test_differential.Runner.touch: count only live keys in DBSIZE
        for c in self.conns[conn]:
            c.call([b"EXISTS"] + ALL_KEYS)

    def pair_call(self, i, args, conn):
        cr, ca = self.conns[conn]
        rraw, rt = cr.call(args)
        try:
            araw, at = ca.call(args)
        except (OSError, ConnectionError) as e:
            self.report(i, args, rraw, "connection error: %s" % e, conn=conn)
            return None
        if self.resp == 2:
            for raw, t in ((rraw, rt), (araw, at)):
                bad = markers(t) & RESP3_ONLY_MARKERS
                if bad:
                    self.report(i, args, rraw, araw, " (RESP3 marker %s after HELLO 2)"
                                % sorted(bad), conn=conn)
                    return None
        return rraw, rt, araw, at

    def act(self, i, args, conn=0):
        cr, ca = self.conns[conn]
        name = cmp_name(args)
        in_multi = self.queued is not None and conn == 0
        if name in (b"DBSIZE", b"RANDOMKEY") and not in_multi:
            self.touch(conn)
        if name in (b"SCAN", b"SSCAN", b"HSCAN") and not in_multi and \
                len(args) > (1 if name == b"SCAN" else 2) and \
                args[1 if name == b"SCAN" else 2] in ZERO_CURSORS:
            rv = scan_all(cr, args)
            try:
                av = scan_all(ca, args)
            except (OSError, ConnectionError) as e:
                self.report(i, args, rv, "connection error: %s" % e, conn=conn)
                return False
            if rv != av:
                self.report(i, args, rv, av, " (iterated to cursor 0)", conn=conn)
                return False
            self.history.append((i, args, conn))
            return True
        got = self.pair_call(i, args, conn)
        if got is None:
            return False
        rraw, rt, araw, at = got
        if in_multi and name not in (b"EXEC", b"DISCARD", b"MULTI", b"WATCH"):
            if canon(rt) != canon(at):
                self.report(i, args, rraw, araw, " (inside MULTI)", conn=conn)
                return False
            if rt == ("+", b"QUEUED"):
                self.queued.append(name)
            self.history.append((i, args, conn))
            return True
        if name == b"EXEC" and self.queued is not None and rt[0] == at[0] == "*" \
                and rt[1] is not None and at[1] is not None \
                and len(rt[1]) == len(at[1]) == len(self.queued):
            ok = all(view(n, x) == view(n, y) for n, x, y in zip(self.queued, rt[1], at[1]))
        else:
            ok = view(name, rt) == view(name, at)
        if conn == 0:
            if name == b"MULTI" and rt == at == ("+", b"OK"):
                self.queued = []
            elif name in (b"EXEC", b"DISCARD") and self.queued is not None:
                self.queued = None
        if not ok:
            self.report(i, args, rraw, araw, conn=conn)
            return False
        if name == b"SPOP" and rt[0] in "$*~" and rt[1] is not None:
            rest_r = bulks(cr.tree([b"SMEMBERS", args[1]]))
            rest_a = bulks(ca.tree([b"SMEMBERS", args[1]]))
            if sorted(bulks(rt) + rest_r) != sorted(bulks(at) + rest_a):
                self.report(i, args, (rraw, rest_r), (araw, rest_a), " (popped, remaining)",
                            conn=conn)
                return False
            cr.call([b"DEL", args[1]])
            ca.call([b"DEL", args[1]])
            self.history.append((i, args, conn))
            self.history.append((i, [b"DEL", args[1]], conn))
            return True
        if name in (b"SRANDMEMBER", b"HRANDFIELD"):
            bad = [self.not_members(c, name, args, t) for c, t in ((cr, rt), (ca, at))]
            if any(bad):
                self.report(i, args, rraw, araw, " (not in the key: redis %r abacus %r)"
                            % tuple(bad), conn=conn)
                return False
        self.history.append((i, args, conn))
        return True

    @staticmethod
    def not_members(conn, name, args, t):
        if t[0] not in "$*~" or t[1] is None:
            return None
        if name == b"SRANDMEMBER":
            universe = set(bulks(conn.tree([b"SMEMBERS", args[1]])))
            return [m for m in bulks(t) if m not in universe] or None
        h = conn.tree([b"HGETALL", args[1]])
        if h[0] == "%":
            fields = {k[1]: v[1] for k, v in h[1]}
        else:
            flat = bulks(h)
            fields = dict(zip(flat[0::2], flat[1::2]))
        if t[0] == "$":
            items = [(t[1], None)]
        elif t[1] and t[1][0][0] == "*":  # RESP3 WITHVALUES: [field, value] pairs
            items = [(p[1][0][1], p[1][1][1]) for p in t[1]]
        elif len(args) > 3 and args[3].upper() == b"WITHVALUES":
            flat = bulks(t)
            items = list(zip(flat[0::2], flat[1::2]))
        else:
            items = [(f, None) for f in bulks(t)]
        return [(f, v) for f, v in items
                if f not in fields or (v is not None and fields[f] != v)] or None

    def final_state(self, i):
        cr, ca = self.conns[0]
        for k in ALL_KEYS:
            (rraw, rt), (araw, at) = cr.call([b"TYPE", k]), ca.call([b"TYPE", k])
            if rt != at:
                self.report(i, [b"TYPE", k], rraw, araw, " (final state)")
                continue
            cmd = {b"string": [b"GET", k], b"hash": [b"HGETALL", k],
                   b"set": [b"SMEMBERS", k]}.get(rt[1])
            if cmd is not None:
                (rraw, rt), (araw, at) = cr.call(cmd), ca.call(cmd)
                if view(cmd[0], rt) != view(cmd[0], at):
                    self.report(i, cmd, rraw, araw, " (final state)")
        self.touch()
        for cmd in ([b"DBSIZE"], [b"KEYS", b"*"]):
            (rraw, rt), (araw, at) = cr.call(cmd), ca.call(cmd)
            if view(cmd[0], rt) != view(cmd[0], at):
                self.report(i, cmd, rraw, araw, " (final state)")

    def hello(self, i, proto):
        """HELLO <proto> on both connections of each pair: same keys, same proto."""
        for conn in range(len(self.conns)):
            args = [b"HELLO", str(proto).encode()]
            (rraw, rt), (araw, at) = [c.call(args) for c in self.conns[conn]]
            want = ("%" if proto == 3 else "*")
            if rt[0] != want or view(b"HELLO", rt) != view(b"HELLO", at) \
                    or hello_view(rt)[2] != [(":", proto)]:
                self.report(i, args, rraw, araw, " (protocol switch)", conn=conn)
        self.resp = proto

    def check(self, what):
        assert not self.mismatches, (
            "%d divergence(s) between redis and abacus (%s, seed %d; after each one both "
            "servers were flushed and the run went on):\n\n%s"
            % (len(self.mismatches), what, self.seed,
               "\n\n".join("\n".join(m) for m in self.mismatches)))


def _run_mix(run, gen, start, n):
    i = start
    while i < start + n and not run.done():
        for conn, args in gen.step():
            ok = run.act(i, args, conn)
            i += 1
            if not ok:
                break
    return i


@pytest.mark.parametrize("seed", SEEDS)
def test_differential_resp3(servers, seed):
    rs, ab = servers
    conns = [(Conn(rs), Conn(ab)), (Conn(rs), Conn(ab))]
    try:
        run = Runner(seed, conns, 2)
        run.conns[0][0].call([b"FLUSHALL"])
        run.conns[0][1].call([b"FLUSHALL"])
        run.hello(-1, 3)
        run.check("HELLO 3")
        gen = Gen3(random.Random(seed))
        i = _run_mix(run, gen, 0, COMMANDS_PER_SEED)
        if not run.mismatches:
            run.final_state(i)
        run.check("RESP3 mix")
        # back to RESP2: the same mix, and no RESP3-only marker in any reply
        run.hello(i, 2)
        run.check("HELLO 2")
        i = _run_mix(run, gen, i, RESP2_COMMANDS)
        if not run.mismatches:
            run.final_state(i)
        run.check("RESP2 after HELLO 2")
        # and RESP3 once more
        run.hello(i, 3)
        for args in ([b"HGETALL", b"h3"], [b"HSET", b"h3", b"f", b"v"], [b"HGETALL", b"h3"],
                     [b"GET", b"missing"], [b"SADD", b"s3", b"a"], [b"SMEMBERS", b"s3"]):
            got = run.pair_call(i, args, 0)
            if got and view(args[0], got[1]) != view(args[0], got[3]):
                run.report(i, args, got[0], got[2], " (after HELLO 3 again)")
            i += 1
        run.check("RESP3 again")
    finally:
        for pr in conns:
            for c in pr:
                c.close()
