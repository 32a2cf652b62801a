"""Differential test of blocking commands: the same random scenario, with several clients
blocked at once, run against the real redis-server 7.0 and Abacus in lockstep.

Each seed's `random.Random(seed)` drives a scenario over a small key space, three keys per
family: lists {a}l1 {a}l2 l0, sorted sets {a}z1 {a}z2 z3, streams {a}s1 {a}s2 s3 (so blocked
clients collide on keys, and keys change type under them). Abacus runs with two threads:
the two {a} keys of a family share a shard and the third key lives on the other one, so
multi-key blocking commands run on one shard and across shards, and so do the writers.
Per server there are SLOTS blocking clients, one actor and one observer connection (each
slot speaks RESP2 or RESP3, drawn per seed; all work in db 0). A step is either

  * a blocking command on an idle slot: BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN,
    BZPOPMAX, BZMPOP, XREAD BLOCK ($, 0 or an explicit ID), XREADGROUP BLOCK (mostly `>`,
    often right after an XGROUP CREATE ... MKSTREAM step so that it can block), with
    timeout 0 or a long one (nothing ever times out by the clock). The step waits until the
    server either answers the client or lists it as blocked (`flags=b` in CLIENT LIST), so
    clients block in the same order on both servers; answered or blocked must be the same
    on both, and so must the answer; or
  * an actor step: LPUSH/RPUSH(X), ZADD, XADD (explicit, ever increasing IDs), pops, LMOVE,
    RPOPLPUSH, XTRIM, XDEL, XSETID, ZUNIONSTORE, DEL, SET (type change), EXPIRE 0 /
    PEXPIRE -1 (immediate deletion) or EXPIRE 100000 (no expiry in between, to stay off
    the clock), FLUSHDB, FLUSHALL, SWAPDB 0 1 (db 1 is filled too), RENAME(NX), MOVE
    (both ways), COPY (into db 0 and db 1), XGROUP CREATE / DESTROY / SETID / DELCONSUMER
    (mostly on a blocked reader's key and group), CLIENT UNBLOCK <slot> [TIMEOUT|ERROR],
    CLIENT KILL ID <slot> (each server is given its own client ID for the slot), or a
    MULTI ... EXEC of writes (sometimes with a blocking command inside, which never
    blocks).

After every step the state of every slot is settled, Redis first: the observer's CLIENT
LIST says which slots are blocked, idle or gone (killed). Abacus may wake clients
asynchronously, so its CLIENT LIST is polled (up to REPLY_DEADLINE seconds) until it
shows the same states; then every slot that stopped being blocked (or was killed) must
have its reply (or EOF) on both servers, byte for byte the same, and every slot still
blocked or idle must have nothing to read. Then the whole keyspace of db 0 and db 1 is
compared (KEYS, TYPE, LRANGE, ZRANGE WITHSCORES, XRANGE, XINFO GROUPS, XPENDING, GET).
At the end the remaining blocked clients are released with CLIENT UNBLOCK (replies
compared) and the keyspace is compared once more.

What the generator keeps out, so that each scenario has one right answer:
  - Redis's own nondeterminism. Redis serves ready keys in the order they were signalled,
    which is deterministic for single commands and for EXEC, but SWAPDB readies keys in the
    order of an internal hash table (randomly seeded per process). So SWAPDB only comes
    while every blocked client waits on a single key and none is a BLMOVE / BRPOPLPUSH (a
    move chains into another key). FLUSHDB/FLUSHALL only end XREADGROUP waits, with the
    same error whichever key goes first. BLOCK_DIFF_PEER=redis checks this: two Redis
    servers must agree on every seed.
  - The documented limits of Abacus's clients blocked on keys of both shards
    (crates/engine/src/blocking.rs, "Keys on several shards": such a client is woken to
    try again, so the order among waiters is not kept, nor which of its keys serves it
    when two become ready at once). Such a client waits alone on its keys (no other client
    waits on any of them, before or after it), and no step may ready two of its keys
    (`block_fits`, `step_fits`). Clients blocked on one shard share keys freely.

A failure names the seed and prints every step (who sent what, and what each server
answered); the scenario depends only on the seed, STEPS and SLOTS, so it replays with the
printed settings.

Environment:
    BLOCK_DIFF_SEEDS=1,2,7 or 1-200   seeds (default 1-12)
    BLOCK_DIFF_STEPS=N                steps per seed (default 300)
    BLOCK_DIFF_SLOTS=N                blocking clients per server (default 4)
    BLOCK_DIFF_PEER=redis             compare Redis with a second Redis instead of Abacus
                                      (checks that the generated scenarios are deterministic)
    BLOCK_DIFF_KNOWN=a,b              step around known divergences, to look for others
                                      (default: store-overwrite,stream-wake, the two that
                                      remain; BLOCK_DIFF_KNOWN=none checks everything):
        store-overwrite leave ZUNIONSTORE out (Redis 7.0 does not wake a pop blocked on a
                        key that a STORE command overwrites with the right type; Abacus
                        does, and serves it)
        cross-shard     no client blocks on keys of both shards (kept as an option: Abacus
                        used to lose the wake-up of such a client when a write to its other
                        key woke it just before; fixed, `conn/block.rs`'s `try_across`)
        stream-wake     leave XTRIM, XDEL, XSETID and XGROUP SETID out (Abacus wakes a
                        blocked stream reader on any write to its stream, EXPIRE included,
                        where Redis 7.0 wakes it only for an added entry or a new key, and
                        serves it, even with no entries, when the stream's last ID is past
                        the one it waits after: an emptied stream, XSETID, a group set back)

e.g. `BLOCK_DIFF_SEEDS=1-200 python -m pytest tests/e2e/test_differential_blocking.py -x`.
The file starts both servers itself, so it is skipped with `--target redis`.
"""

import binascii
import contextlib
import os
import random
import select
import socket
import time

import pytest

from conftest import ServerProcess
from helpers import encode_command
from test_differential import redis_and_abacus

pytestmark = pytest.mark.abacus_only("starts its own redis-server and abacus and compares them")


def _seeds(spec):
    out = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part[1:]:
            lo, hi = part.split("-", 1)
            out.extend(range(int(lo), int(hi) + 1))
        else:
            out.append(int(part))
    return out


SEEDS = _seeds(os.environ.get("BLOCK_DIFF_SEEDS", "1-12"))
STEPS = int(os.environ.get("BLOCK_DIFF_STEPS", "300"))
SLOTS = int(os.environ.get("BLOCK_DIFF_SLOTS", "4"))
PEER = os.environ.get("BLOCK_DIFF_PEER", "abacus")
# Known divergences to step around while looking for others (see the module docstring).
KNOWN = {x.strip() for x in os.environ.get("BLOCK_DIFF_KNOWN", "store-overwrite,stream-wake").split(",") if x.strip() and x.strip() != "none"}

# How long a server may take to answer a client, or to show the expected client states.
# Only ever waited for in full when something is wrong.
REPLY_DEADLINE = 5.0

# Per family, two keys that share a hash tag (so one shard of Abacus's two) and one key on
# the other shard: multi-key blocking commands run both on one shard and across shards.
L = [b"{a}l1", b"{a}l2", b"l0"]
Z = [b"{a}z1", b"{a}z2", b"z3"]
S = [b"{a}s1", b"{a}s2", b"s3"]
ALL = L + Z + S
ALL_SET = set(ALL)
GROUPS = [b"g1", b"g2"]
CONSUMERS = [b"c1", b"c2"]
MEMBERS = [b"a", b"b", b"c", b"d", b"e", b"f"]


def shard(key):
    """The shard of `key` in an Abacus with two threads: its Redis Cluster slot (hash tags
    included) mod 2."""
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            key = key[start + 1:end]
    return (binascii.crc_hqx(key, 0) % 16384) % 2


assert all(shard(pool[0]) == shard(pool[1]) != shard(pool[2]) for pool in (L, Z, S))

CLOSED = b"<connection closed>"
BLOCKED = "blocked"


class ClientRef:
    """A client ID in a command, resolved per server (IDs differ between servers)."""

    def __init__(self, slot):
        self.slot = slot  # an int, "actor", or None (an ID no client has)

    def __repr__(self):
        return "<id of %s>" % (("c%d" % self.slot) if isinstance(self.slot, int) else self.slot)


def fmt(args):
    return " ".join(repr(a) if isinstance(a, ClientRef) else a.decode(errors="replace") for a in args)


def short(reply, n=300):
    if reply is None:
        return "(nothing)"
    if reply == BLOCKED:
        return "(blocked)"
    s = repr(reply)
    return s if len(s) <= n else s[:n] + "..."


def _reply_end(buf, pos):
    """The offset just past the RESP2/RESP3 reply that starts at `pos`, or None if `buf`
    does not hold all of it yet."""
    nl = buf.find(b"\r\n", pos)
    if nl < 0:
        return None
    t = buf[pos:pos + 1]
    after = nl + 2
    if t in (b"$", b"=", b"!"):
        n = int(buf[pos + 1:nl])
        if n < 0:
            return after
        end = after + n + 2
        return end if len(buf) >= end else None
    if t in (b"*", b"~", b">", b"%", b"|"):
        n = int(buf[pos + 1:nl])
        if n < 0:
            return after
        p = after
        for _ in range(n * 2 if t in (b"%", b"|") else n):
            p = _reply_end(buf, p)
            if p is None:
                return None
        if t == b"|":  # an attribute precedes the reply it describes
            return _reply_end(buf, p)
        return p
    return after


def decode(raw):
    """A RESP2 bulk string, or an array of them, as Python bytes / list (observer replies)."""
    def one(at):
        nl = raw.index(b"\r\n", at)
        t, line, at = raw[at:at + 1], raw[at + 1:nl], nl + 2
        if t == b"$":
            n = int(line)
            return (None, at) if n < 0 else (raw[at:at + n], at + n + 2)
        if t == b"*":
            out = []
            for _ in range(max(int(line), 0)):
                v, at = one(at)
                out.append(v)
            return out, at
        return (t, line), at
    return one(0)[0]


class Conn:
    """A raw RESP connection; replies are returned as their exact bytes."""

    def __init__(self, proc, resp3=False):
        self.s = socket.create_connection((proc.host, proc.port), timeout=10)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.eof = False
        self.resp3 = resp3
        if resp3:
            hello = self.call([b"HELLO", b"3"])
            assert hello.startswith(b"%"), hello
        reply = self.call([b"CLIENT", b"ID"])
        assert reply.startswith(b":"), reply
        self.id = int(reply[1:-2])

    def send(self, args):
        self.s.sendall(encode_command(*args))

    def read(self, timeout):
        """One whole reply; None if none is complete within `timeout` seconds (0: only
        what has arrived); CLOSED once the server closed the connection."""
        deadline = time.monotonic() + timeout
        while True:
            end = _reply_end(self.buf, 0) if self.buf else None
            if end is not None:
                out, self.buf = self.buf[:end], self.buf[end:]
                return out
            if self.eof:
                if self.buf:
                    out, self.buf = CLOSED + b" after " + self.buf, b""
                    return out
                return CLOSED
            left = max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.s], [], [], left)
            if not ready:
                if time.monotonic() >= deadline:
                    return None
                continue
            try:
                chunk = self.s.recv(1 << 16)
            except (ConnectionResetError, BrokenPipeError):
                chunk = b""
            if chunk:
                self.buf += chunk
            else:
                self.eof = True

    def call(self, args, timeout=REPLY_DEADLINE * 2):
        self.send(args)
        reply = self.read(timeout)
        if reply is None:
            raise AssertionError("no reply to %s within %ss" % (fmt(args), timeout))
        return reply

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


class Side:
    """One server's connections: the actor, the observer and the blocking slots."""

    def __init__(self, name, proc, resp3_slots):
        self.name = name
        self.proc = proc
        self.actor = Conn(proc)
        self.observer = Conn(proc)
        self.slots = [Conn(proc, resp3) for resp3 in resp3_slots]

    def resolve(self, args):
        out = []
        for a in args:
            if isinstance(a, ClientRef):
                if a.slot is None:
                    a = b"987654321"
                elif a.slot == "actor":
                    a = b"%d" % self.actor.id
                else:
                    a = b"%d" % self.slots[a.slot].id
            out.append(a)
        return out

    def reconnect(self, slot):
        old = self.slots[slot]
        old.close()
        self.slots[slot] = Conn(self.proc, old.resp3)

    def client_states(self):
        """{client id: 'blocked' | 'idle'} from CLIENT LIST (a missing ID: gone)."""
        raw = self.observer.call([b"CLIENT", b"LIST"])
        text = decode(raw)
        out = {}
        for line in text.decode().splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            out[int(fields["id"])] = "blocked" if "b" in fields.get("flags", "") else "idle"
        return out

    def slot_states(self):
        states = self.client_states()
        return [states.get(c.id, "gone") for c in self.slots]

    def close(self):
        for c in [self.actor, self.observer] + self.slots:
            c.close()


# ---------------------------------------------------------------------------
# scenario generation


class Gen:
    def __init__(self, rnd):
        self.r = rnd
        self.n = 0  # element names and stream IDs: unique and ever increasing

    def nxt(self):
        self.n += 1
        return self.n

    def key(self, pool, stray=0.1):
        return self.r.choice(ALL) if self.r.random() < stray else self.r.choice(pool)

    def keys(self, pool):
        r = self.r
        n = 1 if r.random() < 0.55 else r.randint(2, len(pool))
        ks = r.sample(pool, n)
        if r.random() < 0.15:
            ks[r.randrange(n)] = r.choice(ALL)  # another family's key (or a duplicate)
        return ks

    def where(self):
        return self.r.choice([b"LEFT", b"RIGHT", b"LEFT", b"RIGHT", b"left", b"Right"])

    def timeout(self):
        return self.r.choice([b"0", b"0", b"0", b"1000", b"0.0", b"3600.5"])

    def block_ms(self):
        return self.r.choice([b"0", b"0", b"1000000"])

    def count_opt(self, p=0.4):
        if self.r.random() < p:
            return [b"COUNT", b"%d" % self.r.choice([1, 2, 3, 10])]
        return []

    def element(self):
        return b"e%d" % self.nxt()

    def stream_id(self):
        return b"%d-0" % self.nxt()

    # -- blocking commands
    def blocking(self, blocked):
        """A blocking command for an idle slot, or None when none fits (`block_fits`)."""
        for _ in range(30):
            cmd = self._blocking()
            if block_fits(cmd, blocked):
                return cmd
        return None

    def _blocking(self):
        r = self.r
        kind = r.choices(
            ["BLPOP", "BRPOP", "BLMOVE", "BRPOPLPUSH", "BLMPOP", "BZPOPMIN", "BZPOPMAX",
             "BZMPOP", "XREAD", "XREADGROUP"],
            weights=[3, 2, 3, 2, 2, 2, 2, 2, 3, 4])[0]
        k = kind.encode()
        if kind in ("BLPOP", "BRPOP"):
            return [k] + self.keys(L) + [self.timeout()]
        if kind == "BLMOVE":
            return [k, self.key(L), self.key(L), self.where(), self.where(), self.timeout()]
        if kind == "BRPOPLPUSH":
            return [k, self.key(L), self.key(L), self.timeout()]
        if kind == "BLMPOP":
            ks = self.keys(L)
            return [k, self.timeout(), b"%d" % len(ks)] + ks + [self.where()] + self.count_opt()
        if kind in ("BZPOPMIN", "BZPOPMAX"):
            return [k] + self.keys(Z) + [self.timeout()]
        if kind == "BZMPOP":
            ks = self.keys(Z)
            return [k, self.timeout(), b"%d" % len(ks)] + ks + \
                [r.choice([b"MIN", b"MAX"])] + self.count_opt()
        if kind == "XREAD":
            ks = self.keys(S)
            ids = []
            for _ in ks:
                x = r.random()
                if x < 0.7:
                    ids.append(b"$")
                elif x < 0.8:
                    ids.append(b"0")
                else:
                    ids.append(b"%d-0" % r.randint(0, self.n))
            return [k] + self.count_opt(0.3) + [b"BLOCK", self.block_ms(), b"STREAMS"] + ks + ids
        ks = [self.key(S)] if r.random() < 0.5 else self.keys(S)
        group = GROUPS[0] if r.random() < 0.7 else r.choice(GROUPS)
        cmd = [k, b"GROUP", group, r.choice(CONSUMERS)] + self.count_opt(0.3)
        if r.random() < 0.15:
            cmd.append(b"NOACK")
        ids = [b">" if r.random() < 0.95 else b"0" for _ in ks]
        return cmd + [b"BLOCK", self.block_ms(), b"STREAMS"] + ks + ids

    # -- actor commands (each returns a list of commands run as one step)
    def push(self):
        r = self.r
        name = r.choice([b"LPUSH", b"RPUSH", b"LPUSH", b"RPUSH", b"LPUSHX", b"RPUSHX"])
        return [name, self.key(L)] + [self.element() for _ in range(r.randint(1, 3))]

    def zadd(self):
        r = self.r
        cmd = [b"ZADD", self.key(Z)]
        for _ in range(r.randint(1, 3)):
            cmd += [b"%d" % r.randint(0, 9), r.choice(MEMBERS)]
        return cmd

    def xadd(self):
        r = self.r
        cmd = [b"XADD", self.key(S)]
        if r.random() < 0.07:
            cmd.append(b"NOMKSTREAM")
        # now and then an ID that is too small (an error unless the stream is new)
        cmd.append(b"1-0" if r.random() < 0.03 else self.stream_id())
        return cmd + [b"f", b"v%d" % self.n]

    def drain(self):
        r = self.r
        options = [
            [b"LPOP", self.key(L)], [b"RPOP", self.key(L), b"2"], [b"ZPOPMIN", self.key(Z)],
            [b"ZPOPMAX", self.key(Z), b"2"], [b"XTRIM", self.key(S), b"MAXLEN", b"0"],
            [b"XDEL", self.key(S), b"%d-0" % r.randint(1, max(1, self.n))]]
        if "stream-wake" in KNOWN:
            options = options[:4]
        return r.choice(options)

    def write(self):
        """A plain write for a MULTI block or db 1."""
        r = self.r
        x = r.random()
        if x < 0.3:
            return self.push()
        if x < 0.5:
            return self.zadd()
        if x < 0.7:
            return self.xadd()
        if x < 0.78:
            return self.drain()
        if x < 0.85:
            return [b"DEL", r.choice(ALL)]
        if x < 0.9:
            return [b"SET", r.choice(ALL), b"str"]
        if x < 0.95:
            pool = r.choice([L, Z, S])
            return [b"RENAME", self.key(pool), self.key(pool)]
        return [b"XGROUP", b"CREATE", self.key(S), r.choice(GROUPS), r.choice([b"$", b"0"]),
                b"MKSTREAM"]

    def actor(self, blocked):
        """One actor step. `blocked`: {slot: the blocking command it waits in}."""
        for _ in range(30):
            cmds = self._actor(blocked)
            if step_fits(cmds, blocked):
                return cmds
        return [[b"PING"]]

    def _actor(self, blocked):
        r = self.r
        table = [
            (14, "push"), (10, "zadd"), (12, "xadd"), (3, "drain"), (3, "lmove"),
            (1, "zstore"), (5, "del"), (2.5, "set"), (1.5, "expire"), (1, "flushdb"),
            (0.7, "flushall"), (3, "swapdb"), (4, "rename"), (2, "move"), (2, "move_in"),
            (2, "copy"), (5, "db1"), (5, "xgroup_create"), (2.5, "xgroup_destroy"),
            (1, "xgroup_setid"), (1, "xgroup_delconsumer"), (0.7, "xsetid"), (6, "unblock"),
            (2, "kill"), (4, "multi")]
        what = r.choices([t[1] for t in table], weights=[t[0] for t in table])[0]
        if what in ("xgroup_setid", "xsetid") and "stream-wake" in KNOWN:
            return [self.xadd()]
        if what == "push":
            return [self.push()]
        if what == "zadd":
            return [self.zadd()]
        if what == "xadd":
            return [self.xadd()]
        if what == "drain":
            return [self.drain()]
        if what == "lmove":
            if r.random() < 0.3:
                return [[b"RPOPLPUSH", self.key(L), self.key(L)]]
            return [[b"LMOVE", self.key(L), self.key(L), self.where(), self.where()]]
        if what == "zstore":
            if "store-overwrite" in KNOWN:
                return [self.zadd()]
            return [[b"ZUNIONSTORE", self.key(Z), b"1", self.key(Z)]]
        if what == "del":
            return [[b"DEL"] + r.sample(ALL, r.randint(1, 2))]
        if what == "set":
            return [[b"SET", r.choice(ALL), b"str"]]
        if what == "expire":
            k = r.choice(ALL)
            return [r.choice([[b"EXPIRE", k, b"0"], [b"PEXPIRE", k, b"-1"],
                              [b"EXPIRE", k, b"100000"]])]
        if what == "flushdb":
            return [r.choice([[b"FLUSHDB"], [b"FLUSHDB", b"ASYNC"], [b"FLUSHDB", b"SYNC"]])]
        if what == "flushall":
            return [r.choice([[b"FLUSHALL"], [b"FLUSHALL", b"ASYNC"]])]
        if what == "swapdb":
            if swap_is_deterministic(blocked):
                return [[b"SWAPDB", b"0", b"1"] if r.random() < 0.7 else [b"SWAPDB", b"1", b"0"]]
            return [self.push()]
        if what == "rename":
            pool = r.choice([L, Z, S])
            return [[r.choice([b"RENAME", b"RENAME", b"RENAMENX"]), self.key(pool), self.key(pool)]]
        if what == "move":
            return [[b"MOVE", r.choice(ALL), b"1"]]
        if what == "move_in":
            return [[b"SELECT", b"1"], [b"MOVE", r.choice(ALL), b"0"], [b"SELECT", b"0"]]
        if what == "copy":
            pool = r.choice([L, Z, S])
            src, dst = self.key(pool), self.key(pool)
            x = r.random()
            rep = [b"REPLACE"] if r.random() < 0.5 else []
            if x < 0.4:
                return [[b"COPY", src, dst] + rep]
            if x < 0.7:
                return [[b"COPY", src, dst, b"DB", b"1"] + rep]
            return [[b"SELECT", b"1"], [b"COPY", src, dst, b"DB", b"0"] + rep, [b"SELECT", b"0"]]
        if what == "db1":
            return [[b"SELECT", b"1"]] + [self.write() for _ in range(r.randint(1, 3))] + \
                [[b"SELECT", b"0"]]
        if what == "xgroup_create":
            cmd = [b"XGROUP", b"CREATE", self.key(S), r.choice(GROUPS), r.choice([b"$", b"0"])]
            if r.random() < 0.6:
                cmd.append(b"MKSTREAM")
            return [cmd]
        if what == "xsetid":
            # a stream's last ID moves on without a new entry (smaller: an error)
            new_id = self.stream_id() if r.random() < 0.9 else b"1-0"
            return [[b"XSETID", self.key(S), new_id]]
        if what.startswith("xgroup_"):
            # mostly the key, group and consumer of a blocked XREADGROUP, if there is one
            readers = [c for _, c in sorted(blocked.items()) if c[0] == b"XREADGROUP"]
            if readers and r.random() < 0.7:
                c = r.choice(readers)
                key, group, consumer = r.choice(blocked_keys(c)), c[2], c[3]
            else:
                key, group, consumer = self.key(S), r.choice(GROUPS), r.choice(CONSUMERS)
            if what == "xgroup_destroy":
                return [[b"XGROUP", b"DESTROY", key, group]]
            if what == "xgroup_setid":
                return [[b"XGROUP", b"SETID", key, group, r.choice([b"$", b"0"])]]
            return [[b"XGROUP", b"DELCONSUMER", key, group, consumer]]
        if what in ("unblock", "kill"):
            x = r.random()
            if blocked and x < 0.8:
                ref = ClientRef(r.choice(sorted(blocked)))
            elif x < 0.92:
                ref = ClientRef(r.randrange(SLOTS))
            else:
                ref = ClientRef(r.choice(["actor", None]))
            if what == "kill":
                return [[b"CLIENT", b"KILL", b"ID", ref]]
            reason = r.choice([[], [b"TIMEOUT"], [b"ERROR"], [b"error"]])
            return [[b"CLIENT", b"UNBLOCK", ref] + reason]
        # multi
        body = [self.write() for _ in range(r.randint(1, 3))]
        if r.random() < 0.2:
            body.insert(r.randrange(len(body) + 1), self._blocking())  # never blocks in MULTI
        return [[b"MULTI"]] + body + [[b"DISCARD"] if r.random() < 0.08 else [b"EXEC"]]


def is_mover(cmd):
    return cmd[0].upper() in (b"BLMOVE", b"BRPOPLPUSH")


def all_keys(cmd):
    """Every key a blocking command names (BLMOVE's destination too)."""
    return blocked_keys(cmd) + ([cmd[2]] if is_mover(cmd) else [])


def cross_shard(cmd):
    return len({shard(k) for k in all_keys(cmd)}) > 1


def readied(touched, blocked):
    """`touched` plus the keys blocked BLMOVE / BRPOPLPUSH clients may push to once a
    touched key feeds them (a chain)."""
    touched = set(touched)
    while True:
        more = {cmd[2] for cmd in blocked.values()
                if is_mover(cmd) and cmd[1] in touched and cmd[2] not in touched}
        if not more:
            return touched
        touched |= more


def no_two_ready(touched, blocked):
    """No client blocked across shards may find two of its keys ready after one step."""
    touched = readied(touched, blocked)
    return all(len(touched & set(blocked_keys(c))) <= 1
               for c in blocked.values() if cross_shard(c))


def block_fits(cmd, blocked):
    """Abacus serves a client blocked on keys of both shards by waking it to try again
    (crates/engine/src/blocking.rs, "Keys on several shards"), which keeps neither the
    order among waiters nor, when two of its keys become ready at once, which key serves
    it; Redis does both. So a client blocked across shards waits alone on its keys (no
    other client waits on any of them, before or after it), and no step readies two of
    its keys (`no_two_ready`). Clients blocked on one shard share keys freely."""
    if "cross-shard" in KNOWN and cross_shard(cmd):
        return False
    keys = set(blocked_keys(cmd))
    others = [c for c in blocked.values() if cross_shard(cmd) or cross_shard(c)]
    if any(keys & set(blocked_keys(c)) for c in others):
        return False
    return no_two_ready([cmd[2]] if is_mover(cmd) else [], blocked)


def step_fits(cmds, blocked):
    touched = set()
    for cmd in cmds:
        name = cmd[0].upper()
        if name == b"SWAPDB":
            touched |= ALL_SET
        elif name not in (b"FLUSHDB", b"FLUSHALL"):
            # (a flush only ends XREADGROUP waits, with the same error whichever key)
            touched |= {a for a in cmd if isinstance(a, bytes) and a in ALL_SET}
    return no_two_ready(touched, blocked)


def swap_is_deterministic(blocked):
    """Whether SWAPDB serves the blocked clients the same whatever order it readies keys
    in: every blocked client waits on one key only, and none moves an element on."""
    for cmd in blocked.values():
        name = cmd[0].upper()
        if name in (b"BLMOVE", b"BRPOPLPUSH"):
            return False
        if len(set(blocked_keys(cmd))) > 1:
            return False
    return True


def blocked_keys(cmd):
    name = cmd[0].upper()
    if name in (b"BLPOP", b"BRPOP", b"BZPOPMIN", b"BZPOPMAX"):
        return cmd[1:-1]
    if name in (b"BLMPOP", b"BZMPOP"):
        return cmd[3:3 + int(cmd[2])]
    if name in (b"XREAD", b"XREADGROUP"):
        rest = cmd[cmd.index(b"STREAMS") + 1:]
        return rest[:len(rest) // 2]
    return [cmd[1]]


# ---------------------------------------------------------------------------
# running a scenario in lockstep


class Divergence(AssertionError):
    pass


class Scenario:
    def __init__(self, seed, procs):
        self.seed = seed
        self.rnd = random.Random(seed)
        self.gen = Gen(self.rnd)
        resp3 = [self.rnd.random() < 0.35 for _ in range(SLOTS)]
        self.sides = [Side(name, proc, resp3) for name, proc in procs]
        self.blocked = {}  # slot -> the blocking command it waits in
        self.log = []
        self.step_no = 0

    def close(self):
        for side in self.sides:
            side.close()

    def fail(self, what):
        steps = "\n".join(self.log)
        raise Divergence(
            "seed %d, step %d: %s\n(replay: BLOCK_DIFF_SEEDS=%d BLOCK_DIFF_STEPS=%d BLOCK_DIFF_SLOTS=%d%s; "
            "%s is the reference, %s the peer)\nsteps so far:\n%s"
            % (self.seed, self.step_no, what, self.seed, STEPS, SLOTS,
               " BLOCK_DIFF_KNOWN=" + (",".join(sorted(KNOWN)) or "none"),
               self.sides[0].name, self.sides[1].name, steps))

    def both(self, a, b, what):
        if a != b:
            self.fail("%s\n  %s: %s\n  %s: %s" % (what, self.sides[0].name, short(a, 1000),
                                                  self.sides[1].name, short(b, 1000)))

    # -- steps
    def block_step(self, slot, cmd):
        self.log.append("[%d] c%d> %s" % (self.step_no, slot, fmt(cmd)))
        outcomes = []
        for i, side in enumerate(self.sides):
            conn = side.slots[slot]
            stray = conn.read(0)
            if stray is not None:
                self.fail("%s: idle client c%d had an unexpected reply %s" % (side.name, slot, short(stray)))
            conn.send(side.resolve(cmd))
            expect = outcomes[0] if i else None
            outcomes.append(self.await_outcome(side, conn, expect))
        self.both(outcomes[0], outcomes[1], "blocking command on c%d: %s" % (slot, fmt(cmd)))
        if not isinstance(outcomes[0], bytes) and outcomes[0] != BLOCKED:
            self.fail("c%d: %s on both servers" % (slot, outcomes[0]))
        if outcomes[0] == BLOCKED:
            self.blocked[slot] = cmd
            self.log.append("      c%d blocked" % slot)
        else:
            self.log.append("      c%d <- %s" % (slot, short(outcomes[0])))
            if outcomes[0].startswith(CLOSED):
                self.fail("c%d lost its connection" % slot)

    def await_outcome(self, side, conn, expect):
        """The reply to a blocking command just sent, or BLOCKED once the server lists the
        client as blocked. On the peer, when the reference answered, its answer is awaited
        even if the peer shows the client blocked for a moment."""
        deadline = time.monotonic() + REPLY_DEADLINE
        while True:
            reply = conn.read(0.002)
            if reply is not None:
                return reply
            if expect is None or expect == BLOCKED:
                if side.client_states().get(conn.id) == "blocked":
                    return BLOCKED
            if time.monotonic() > deadline:
                return reply if expect not in (None, BLOCKED) else "(no reply and not blocked)"

    def actor_step(self, cmds):
        replies = [[], []]
        for i, side in enumerate(self.sides):
            for cmd in cmds:
                reply = side.actor.call(side.resolve(cmd))
                if reply == CLOSED:
                    self.fail("%s closed the actor's connection (crashed?)\n%s"
                              % (side.name, side.proc.log()[-3000:]))
                replies[i].append(reply)
        for cmd, a in zip(cmds, replies[0]):
            self.log.append("[%d] actor> %s  -> %s" % (self.step_no, fmt(cmd), short(a, 200)))
        for cmd, a, b in zip(cmds, replies[0], replies[1]):
            self.both(a, b, "actor command %s" % fmt(cmd))

    def settle(self):
        """Compare what happened to every slot after a step (see the module docstring)."""
        ref = self.sides[0].slot_states()
        peer_side = self.sides[1]
        deadline = time.monotonic() + REPLY_DEADLINE
        while True:
            peer = peer_side.slot_states()
            if peer == ref or time.monotonic() > deadline:
                break
            time.sleep(0.002)
        if peer != ref:
            self.fail("client states after the step (was blocked: %s)" % sorted(self.blocked)
                      + "\n  %s: %s\n  %s: %s" % (self.sides[0].name, ref, peer_side.name, peer))
        for slot, state in enumerate(ref):
            was_blocked = slot in self.blocked
            got = []
            for side in self.sides:
                conn = side.slots[slot]
                if state == "gone" or (was_blocked and state != "blocked"):
                    reply = conn.read(REPLY_DEADLINE)
                    if reply is None:
                        now = side.slot_states()[slot]
                        self.fail("%s: c%d is %s but no reply came within %ss (now: %s)"
                                  % (side.name, slot, state, REPLY_DEADLINE, now))
                else:
                    reply = conn.read(0)
                    if reply is not None:
                        self.fail("%s: c%d is %s but got %s" % (side.name, slot, state, short(reply)))
                got.append(reply)
            if got[0] is not None:
                self.both(got[0], got[1], "reply to c%d (%s)" % (
                    slot, fmt(self.blocked[slot]) if was_blocked else "idle"))
                self.log.append("      c%d <- %s" % (slot, short(got[0])))
            if state != "blocked":
                self.blocked.pop(slot, None)
            if state == "gone":
                for side in self.sides:
                    side.reconnect(slot)
                self.log.append("      c%d reconnected" % slot)

    def dump(self, side):
        """Every key of db 0 and db 1 with its type and contents, as raw replies."""
        obs = side.observer
        out = []
        try:
            for db in (b"0", b"1"):
                obs.call([b"SELECT", db])
                for key in sorted(decode(obs.call([b"KEYS", b"*"]))):
                    t = obs.call([b"TYPE", key])
                    out.append((db, key, t))
                    if t == b"+list\r\n":
                        out.append((db, key, obs.call([b"LRANGE", key, b"0", b"-1"])))
                    elif t == b"+zset\r\n":
                        out.append((db, key, obs.call([b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"])))
                    elif t == b"+stream\r\n":
                        out.append((db, key, obs.call([b"XRANGE", key, b"-", b"+"])))
                        out.append((db, key, obs.call([b"XINFO", b"GROUPS", key])))
                        for g in GROUPS:
                            out.append((db, key, g, obs.call([b"XPENDING", key, g])))
                    elif t == b"+string\r\n":
                        out.append((db, key, obs.call([b"GET", key])))
        finally:
            obs.call([b"SELECT", b"0"])
        return out

    def compare_keyspace(self):
        a, b = self.dump(self.sides[0]), self.dump(self.sides[1])
        if a != b:
            for x, y in zip(a + [None] * len(b), b + [None] * len(a)):
                if x != y:
                    self.fail("keyspace differs\n  %s: %s\n  %s: %s" % (
                        self.sides[0].name, short(x, 1000), self.sides[1].name, short(y, 1000)))

    # -- the whole scenario
    def run(self):
        for side in self.sides:
            assert side.actor.call([b"FLUSHALL"]) == b"+OK\r\n"
        for self.step_no in range(STEPS):
            idle = [s for s in range(SLOTS) if s not in self.blocked]
            p_block = 0.6 if not self.blocked else 0.35
            cmd = None
            if idle and self.rnd.random() < p_block:
                cmd = self.gen.blocking(self.blocked)
            if cmd is not None:
                if cmd[0] == b"XREADGROUP" and self.rnd.random() < 0.6:
                    # most often the group is there: create it first (or get BUSYGROUP)
                    group, keys = cmd[2], blocked_keys(cmd)
                    prep = [[b"XGROUP", b"CREATE", k, group, b"$", b"MKSTREAM"] for k in keys]
                    if step_fits(prep, self.blocked):
                        self.actor_step(prep)
                        self.settle()
                        self.compare_keyspace()
                self.block_step(self.rnd.choice(idle), cmd)
            else:
                self.actor_step(self.gen.actor(self.blocked))
            self.settle()
            self.compare_keyspace()
        self.step_no = STEPS
        for slot in sorted(self.blocked):
            cmd = [b"CLIENT", b"UNBLOCK", ClientRef(slot)] + self.rnd.choice([[], [b"ERROR"]])
            self.actor_step([cmd])
            self.settle()
        if self.blocked:
            self.fail("clients still blocked after CLIENT UNBLOCK: %s" % sorted(self.blocked))
        self.compare_keyspace()


@contextlib.contextmanager
def two_redis():
    a = ServerProcess("redis")
    a.start()
    try:
        b = ServerProcess("redis")
        b.start()
        try:
            yield a, b
        finally:
            b.stop()
    finally:
        a.stop()


@pytest.fixture(scope="module")
def servers():
    if PEER == "redis":
        with two_redis() as (a, b):
            yield [("redis", a), ("redis#2", b)]
    else:
        with redis_and_abacus() as (rs, ab):
            yield [("redis", rs), ("abacus", ab)]


@pytest.mark.parametrize("seed", SEEDS)
def test_differential_blocking(servers, seed):
    sc = Scenario(seed, servers)
    try:
        sc.run()
    finally:
        sc.close()
