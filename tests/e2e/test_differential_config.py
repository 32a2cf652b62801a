"""Differential test of CONFIG GET / CONFIG SET / CONFIG RESETSTAT against the real Redis.

The parameters compared are those both servers have: Abacus's table (PARAMS and ALIASES
in crates/engine/src/config.rs, read from the source so that a new parameter is picked up
by itself) intersected with Redis's `CONFIG GET *` at run time, minus the ones that would
break the test servers or that differ by design (SKIP, below). Each parameter's kind
(integer and its range, memory amount, yes/no, enum) also comes from config.rs and decides
which values are generated: valid ones (memory units 100mb, 1gb, 4GB, 1k, 0, `gb`, enum
values in any case, the range's bounds) and invalid ones (out of range, negative, wrong
type, garbage, empty, 2^63, 2^64, units on a non-memory parameter, spaces, signs).

For each seed a `random.Random(seed)` generates a sequence of
  - CONFIG SET of one parameter, then CONFIG GET of it (as given, in another case, or
    through a glob pattern);
  - CONFIG SET of several parameters: all valid, one invalid among valid ones (Redis 7.0
    applies none), the same parameter twice (in another case, or under its 7.0 alias),
    an immutable or unknown name among them, an odd argument count; then CONFIG GET of
    all of them;
  - CONFIG GET with glob patterns (`max*`, `*policy*`, `*`, `?z`, `[ht]*`, ...) and
    several patterns at once;
  - CONFIG RESETSTAT (with and without a stray argument), CONFIG GET without argument.
Replies are compared exactly (error messages in full, with the redis-py parser that keeps
the whole error line); CONFIG GET replies are maps, compared order-insensitively and
restricted to the compared parameters (the other names a glob matches exist on one side
only). At the end of a seed every compared parameter is read back on both, then all are
reset to their start-up values.

Left out, and why:
  - port, tls-port, bind, dir, dbfilename, appendfilename, unixsocket, logfile, daemonize,
    requirepass, save, appendonly: would move, lock out or make persistent a test server.
    (Abacus also refuses to change port, tls-port, bind and appendonly at run time, which
    Redis allows: a documented "runtime: no" in README's configuration table.)
  (tls-replication and tls-cluster are compared: turning either on without certificates
    fails the CONFIG SET on both with "Unable to update TLS configuration", and both must
    then put every value of the command back. Seed 8 once caught Abacus not doing so when
    the command named a parameter and its 7.0 alias: see cmd/server.rs, CONFIG SET.)
  - maxclients below 100 (would refuse our own connections) and above 10000 (Redis
    refuses with "The operating system is not able to handle ..." depending on the open
    file limit).
  - timeout between 1 and 59 seconds: a test connection idle for a moment between seeds
    would be closed.
  - loglevel `nothing` and maxmemory-policy `allkeys-fifo`: values only Abacus has
    (README's configuration table), so for invalid values of these two the errors are
    compared up to the list of accepted values (which names them, in Abacus's order).
  - CONFIG HELP: Abacus lists no REWRITE (it has none).

On a mismatch the message names the seed, the command's index, the command, both replies
and the commands before it; both servers are then reset to the start-up values and the
run goes on (at most MAX_MISMATCHES reported). Rerun one seed with
`-k 'test_differential_config[SEED]'`; DIFF_CONFIG_SEEDS=1,2,3 picks seeds and
DIFF_CONFIG_COMMANDS=N the commands per seed.
"""

import os
import random
import re

import pytest

from conftest import REPO_ROOT
# The clients of test_differential.py: raw replies, errors with their whole text.
from test_differential import Err, _client, _run, redis_and_abacus

pytestmark = pytest.mark.abacus_only("starts its own redis-server and abacus and compares them")

SEEDS = [int(x) for x in os.environ.get("DIFF_CONFIG_SEEDS", "1,2,3,4,5,6,7,8").split(",")]
COMMANDS_PER_SEED = int(os.environ.get("DIFF_CONFIG_COMMANDS", "2000"))
HISTORY = 10
MAX_MISMATCHES = 5

# would break the test servers (see the module docstring)
SKIP = {"port", "tls-port", "bind", "dir", "dbfilename", "appendfilename", "requirepass", "save",
        "appendonly", "daemonize", "logfile", "unixsocket", "unixsocketperm"}
# enums with a value only Abacus has (README): that value is never sent, and the
# "must be one of the following" errors are compared up to the list
EXTRA_ENUM_VALUES = {"loglevel": {"nothing"}, "maxmemory-policy": {"allkeys-fifo"}}
ONE_OF = "argument(s) must be one of the following: "

I64_MAX = 2**63 - 1

GLOBS = ["max*", "*policy*", "*", "?z", "[ht]*", "hash-*", "*-max-*", "lfu-*", "*ziplist*",
         "*listpack*", "MAX*", "*Memory*", "[a-d]*", "[^a-m]*", "*-size", "*o*", "time?ut",
         "hz", "*a*e*", "no-such-*", "", "[", "\\*", "*[", "t*", "*keepalive*", "aof*",
         "*append*", "client-*", "proto-*", "?????", "*s", "h\\z", "H\\Z*", "hz\\"]
JUNK = ["", "abc", " ", "yes ", " 1", "1 ", "+1", "0x10", "1e3", "1.5", "-", "\xe9",
        "1,000", "NaN", "inf", "9223372036854775808", "-9223372036854775809",
        "18446744073709551616", "99999999999999999999999999"]


# ---------------------------------------------------------------------------
# the parameter table, from config.rs


def _abacus_params():
    """{name: kind} of Abacus's parameters (aliases get their target's kind).
    kind: ("int", min, max) | ("clamped", min, max) | ("memory", min, max) | ("bool",) |
    ("enum", [values]) | ("other",)."""
    with open(os.path.join(REPO_ROOT, "crates", "engine", "src", "config.rs")) as f:
        src = f.read()
    consts = {"i64::MAX": I64_MAX, "i64::MAX as u64": I64_MAX, "u64::MAX": 2**64 - 1,
              "i32::MAX as i64": 2**31 - 1, "i32::MIN as i64": -2**31, "u32::MAX as i64": 2**32 - 1}

    def num(s):
        s = s.strip().replace("_", "")
        if s in consts:
            return consts[s]
        m = re.fullmatch(r"(\d+) \* (\d+)", s)
        if m:
            return int(m.group(1)) * int(m.group(2))
        return int(s)

    params = {}
    for m in re.finditer(r'Param \{ name: "([^"]+)", default: "[^"]*", kind: Kind::(\w+)'
                         r'(?:\s*\{([^}]*)\}|\(([^)]*)\))?', src):
        name, kind, fields, arg = m.groups()
        if kind in ("Int", "ClampedInt", "Memory"):
            lo = re.search(r"\bmin: ([^,]+)", fields).group(1)
            hi = re.search(r"\bmax: ([^,]+)", fields).group(1)
            params[name] = ({"Int": "int", "ClampedInt": "clamped", "Memory": "memory"}[kind],
                            num(lo), num(hi))
        elif kind == "Bool":
            params[name] = ("bool",)
        elif kind == "Enum":
            if arg.startswith("&["):
                values = re.findall(r'"([^"]+)"', arg)
            else:  # a NAMES constant elsewhere (eviction policies)
                values = None
            params[name] = ("enum", values)
        else:
            params[name] = ("other",)
    aliases = re.search(r"const ALIASES: [^=]+= &\[(.*?)\];", src, re.S).group(1)
    for alias, target in re.findall(r'\("([^"]+)", "([^"]+)"\)', aliases):
        params[alias] = params[target]
    assert len(params) > 20, "could not read PARAMS from config.rs"
    return params


EVICTION_POLICIES = ["volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl",
                     "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction"]


# ---------------------------------------------------------------------------
# clients and replies


@pytest.fixture(scope="module")
def pair():
    with redis_and_abacus() as (rs, ab):
        cr, ca = _client(rs), _client(ab)
        yield cr, ca
        cr.close()
        ca.close()


def _as_map(reply):
    return {reply[i]: reply[i + 1] for i in range(0, len(reply), 2)}


# ---------------------------------------------------------------------------
# generation


class Gen:
    def __init__(self, rnd, kinds, names, immutable):
        self.r = rnd
        self.kinds = kinds          # {name: kind} of the compared parameters
        self.names = names          # sorted compared parameter names
        self.immutable = immutable  # compared names both refuse to change

    def case(self, s):
        r = self.r
        x = r.random()
        if x < 0.7:
            return s
        if x < 0.85:
            return s.upper()
        return "".join(c.upper() if r.random() < 0.5 else c for c in s)

    def valid(self, name):
        r = self.r
        kind = self.kinds[name]
        if name == "maxclients":
            return str(r.choice([100, 128, 1000, 5000, 10000, r.randint(100, 10000)]))
        if name == "timeout":
            return str(r.choice([0, 60, 300, 86400, 2**31 - 1, r.randint(60, 10**6)]))
        if kind[0] in ("int", "clamped"):
            lo, hi = kind[1], kind[2]
            cands = [lo, hi, max(lo, 0), min(hi, lo + 1), min(hi, max(lo, 10)),
                     r.randint(lo, min(hi, lo + 1000)), r.randint(lo, hi)]
            return str(r.choice(cands))
        if kind[0] == "memory":
            lo, hi = kind[1], kind[2]
            cands = ["0", "1", "1k", "1kb", "1K", "1KB", "100mb", "1gb", "4GB", "1m", "1M",
                     "1g", "2G", "16mb", "1024", "64", "3000", "1b", "gb", "", "512mb",
                     "1048576", "9223372036854775807", "18446744073709551615"]
            return r.choice(cands) if r.random() < 0.8 else str(r.randint(lo, min(hi, 2**40)))
        if kind[0] == "bool":
            return self.case(r.choice(["yes", "no"]))
        if kind[0] == "enum":
            values = [v for v in kind[1] if v not in EXTRA_ENUM_VALUES.get(name, ())]
            return self.case(r.choice(values))
        return r.choice(JUNK)

    def invalid(self, name):
        r = self.r
        kind = self.kinds[name]
        if name == "maxclients":
            return r.choice(["0", "-1", "4294967296", "-4294967295", "abc", "", "1k",
                             "100mb", "1.5", "9223372036854775808", "yes"])
        if kind[0] in ("int", "clamped"):
            lo, hi = kind[1], kind[2]
            cands = [str(lo - 1), "-1", "-100", "", "abc", "1.5", " 1", "+1", "01", "1k",
                     "1kb", "100mb", "1gb", "yes", "0x10", "1e3", "-0",
                     "9223372036854775808", "-9223372036854775809", "18446744073709551616"]
            if hi < I64_MAX:
                cands += [str(hi + 1), str(hi * 2 + 7)]
            return r.choice(cands)
        if kind[0] == "memory":
            return r.choice(["-1", "-1mb", "1.5gb", " 1gb", "1gb ", "1 gb", "1tb", "1kbb",
                             "abc", "yes", "1e3", "+1", "0x10", "-0", "kb1", "mb",
                             "9223372036854775808", "18446744073709551616",
                             "17179869184gb", "99999999999999999999kb",
                             "9007199254740992kb", "1" * 130, str(kind[1] - 1)
                             if kind[1] > 0 else "1k"])
        if kind[0] == "bool":
            return r.choice(["1", "0", "true", "false", "", "y", "n", "yes ", " no",
                             "on", "off", "yess", "-1"])
        if kind[0] == "enum":
            return r.choice(["", "abc", "1", "0", "yes", "noeviction", "everysec", "debug",
                             "allkeys-lru ", " notice", "volatile", "always,no", "lru"])
        return r.choice(JUNK)

    def value(self, name):
        return self.valid(name) if self.r.random() < 0.6 else self.invalid(name)

    def name(self):
        return self.r.choice(self.names)

    def get_names(self, names):
        """CONFIG GET of the given names (as given, in another case, or as globs)."""
        r = self.r
        args = ["CONFIG", "GET"]
        for n in names:
            x = r.random()
            if x < 0.65:
                args.append(self.case(n))
            elif x < 0.8:
                args.append(n[:r.randint(1, len(n))] + "*")
            elif x < 0.9:
                args.append("*" + n[r.randint(0, len(n) - 1):])
            else:
                i = r.randrange(len(n))
                args.append(n[:i] + "?" + n[i + 1:])
        return args

    def step(self):
        """One or two commands (a CONFIG SET is followed by a CONFIG GET)."""
        r = self.r
        x = r.random()
        if x < 0.5:
            n = self.name()
            return [["CONFIG", "SET", self.case(n), self.value(n)], self.get_names([n])]
        if x < 0.75:
            names = [self.name() for _ in range(r.randint(2, 4))]
            pairs = [[self.case(n), self.valid(n)] for n in names]
            y = r.random()
            if y < 0.3:
                # one invalid among valid ones: none is applied
                i = r.randrange(len(pairs))
                pairs[i][1] = self.invalid(names[i])
            elif y < 0.45:
                # the same parameter twice (maybe in another case, or under its alias)
                i = r.randrange(len(pairs))
                twin = names[i]
                alias = {"hash-max-ziplist-entries": "hash-max-listpack-entries",
                         "hash-max-listpack-entries": "hash-max-ziplist-entries",
                         "hash-max-ziplist-value": "hash-max-listpack-value",
                         "hash-max-listpack-value": "hash-max-ziplist-value"}.get(twin)
                if alias in self.kinds and r.random() < 0.4:
                    twin = alias
                pairs.insert(r.randint(0, len(pairs)), [self.case(twin), self.value(twin)])
                names.append(twin)
            elif y < 0.55 and self.immutable:
                n = r.choice(self.immutable)
                pairs.insert(r.randint(0, len(pairs)), [self.case(n), self.value(n)])
            elif y < 0.62:
                pairs.insert(r.randint(0, len(pairs)),
                             [r.choice(["nosuch", "", "max", "maxmemory-", "hz "]), "1"])
            flat = [a for p in pairs for a in p]
            if r.random() < 0.05:
                flat.pop()  # odd argument count
            return [["CONFIG", "SET"] + flat, self.get_names(names)]
        if x < 0.9:
            return [["CONFIG", "GET"] + [r.choice(GLOBS) for _ in range(r.randint(1, 3))]]
        if x < 0.93:
            return [["CONFIG", "RESETSTAT"]]
        return [r.choice([["CONFIG", "RESETSTAT", "x"], ["CONFIG", "GET"], ["CONFIG", "SET"],
                          ["CONFIG", "SET", self.name()], ["config", "resetstat"],
                          ["CONFIG", "SET", "hz", "10", "timeout"],
                          ["CONFIG", "GET", "hz", "nosuch"]])]


# ---------------------------------------------------------------------------
# the test


class Runner:
    def __init__(self, seed, cr, ca, compared, defaults):
        self.seed, self.cr, self.ca = seed, cr, ca
        self.compared = compared    # lower-case names whose CONFIG GET values are compared
        self.defaults = defaults    # [(name, value)] restored after a mismatch / a seed
        self.history = []
        self.mismatches = []

    def norm(self, args, reply):
        if isinstance(reply, Err):
            msg = reply.message
            for name in EXTRA_ENUM_VALUES:
                if ("argument '%s')" % name) in msg and ONE_OF in msg:
                    return Err(msg[:msg.index(ONE_OF) + len(ONE_OF)] + "...")
            return reply
        if args[1].upper() == "GET" and isinstance(reply, list):
            return {k: v for k, v in _as_map(reply).items()
                    if k.decode(errors="replace").lower() in self.compared}
        return reply

    def act(self, i, args):
        rv, av = _run(self.cr, args), _run(self.ca, args)
        if self.norm(args, rv) != self.norm(args, av):
            self.report(i, args, rv, av)
            self.restore()
            return False
        self.history.append((i, args))
        return True

    def report(self, i, args, rv, av, what=""):
        lines = ["seed %d, command #%d%s: %r" % (self.seed, i, what, args),
                 "  redis:  %r" % (rv,), "  abacus: %r" % (av,), "  previous commands:"]
        lines += ["    #%d %r" % h for h in self.history[-HISTORY:]]
        self.mismatches.append(lines)

    def restore(self):
        for n, v in self.defaults:
            for c in (self.cr, self.ca):
                got = _run(c, ["CONFIG", "SET", n, v])
                assert got == b"OK", (n, v, got)
        self.history.append(("-", ["(both reset to the start-up values)"]))

    def done(self):
        return len(self.mismatches) >= MAX_MISMATCHES

    def final_state(self, i):
        args = ["CONFIG", "GET", "*"]
        rv, av = self.norm(args, _run(self.cr, args)), self.norm(args, _run(self.ca, args))
        if rv != av:
            diff = {k: (rv.get(k), av.get(k)) for k in set(rv) | set(av)
                    if rv.get(k) != av.get(k)}
            self.report(i, args, diff, "(redis, abacus) per differing name",
                        " (final state)")


@pytest.fixture(scope="module")
def table(pair):
    cr, ca = pair
    kinds = _abacus_params()
    redis_all = {k.decode(): v for k, v in _as_map(_run(cr, ["CONFIG", "GET", "*"])).items()}
    abacus_all = {k.decode(): v for k, v in _as_map(_run(ca, ["CONFIG", "GET", "*"])).items()}
    # config.rs and the running binary agree on the names
    assert set(abacus_all) == set(kinds), set(abacus_all) ^ set(kinds)
    shared = sorted(set(kinds) & set(redis_all) - SKIP)
    if "maxmemory-policy" in shared:
        kinds["maxmemory-policy"] = ("enum", EVICTION_POLICIES + ["allkeys-fifo"])
    # immutable in both: CONFIG SET of it fails on both with the same error
    immutable = []
    defaults = []
    for n in shared:
        rv = _run(cr, ["CONFIG", "SET", n, redis_all[n].decode()])
        av = _run(ca, ["CONFIG", "SET", n, redis_all[n].decode()])
        if isinstance(rv, Err) and "immutable" in rv.message:
            immutable.append(n)
        else:
            assert rv == av == b"OK", (n, rv, av)
            defaults.append((n, redis_all[n].decode()))
    return {n: kinds[n] for n in shared}, shared, immutable, defaults


@pytest.mark.parametrize("seed", SEEDS)
def test_differential_config(pair, table, seed):
    cr, ca = pair
    kinds, shared, immutable, defaults = table
    gen = Gen(random.Random(seed), kinds, shared, immutable)
    run = Runner(seed, cr, ca, set(shared), defaults)
    try:
        i = 0
        while i < COMMANDS_PER_SEED and not run.done():
            for args in gen.step():
                ok = run.act(i, args)
                i += 1
                if not ok:
                    break  # the GET after a diverging SET says nothing more
        if not run.mismatches:
            run.final_state(i)
    finally:
        run.restore()
    assert not run.mismatches, (
        "%d divergence(s) between redis and abacus in CONFIG (seed %d; after each one both "
        "servers were reset to their start-up values and the run went on):\n\n%s"
        % (len(run.mismatches), seed, "\n\n".join("\n".join(m) for m in run.mismatches)))
