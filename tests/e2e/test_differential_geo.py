"""Differential test of the GEO family: seeded random points and searches against the real
Redis and Abacus (the server pair, client and exact error parsing of test_differential.py).

Each seed's `random.Random(seed)` first loads a few hundred points with GEOADD into each GEO
set (most in a region a few degrees wide, so searches of 1-300 km find tens of members;
some anywhere on the globe, some at the edges: the poles' limits, the antimeridian, the
equator and the prime meridian), then runs a fixed number of random commands: GEOADD (NX,
XX, CH, invalid coordinates), GEOPOS, GEODIST (every unit), GEOHASH, GEOSEARCH and
GEOSEARCHSTORE (FROMMEMBER/FROMLONLAT, BYRADIUS/BYBOX, ASC/DESC, COUNT [ANY], WITHCOORD/
WITHDIST/WITHHASH, STOREDIST, bad arguments), GEORADIUS, GEORADIUSBYMEMBER and their _RO
forms (STORE/STOREDIST), and ZREM. Every reply must be equal byte for byte as redis-py
returns them (raw bytes, no callbacks): distances to Redis's 4 printed decimals, coordinates
to its 17, scores exactly. After a store the destination is read back with ZRANGE
WITHSCORES.

Positions are random doubles, so two members never share a distance from a centre: Redis
sorts with qsort/pqsort, whose order among equal distances is not specified.

Half the keys carry the `{geo}` tag: Abacus runs with `--threads 2`, so a store from an
untagged source into an untagged destination often spans both shards (the executor's
cross-shard path, through GEORADIUS's trailing STORE key). Rerun a seed with
`-k 'test_differential_geo[SEED]'`; DIFF_GEO_SEEDS and DIFF_GEO_COMMANDS change the run.
"""

import os
import random

import pytest

from test_differential import Err, _client, _run, redis_and_abacus  # noqa: F401 (Err: reprs)

pytestmark = pytest.mark.abacus_only("starts its own redis-server and abacus and compares them")

SEEDS = [int(x) for x in os.environ.get("DIFF_GEO_SEEDS", "31,32,33,34").split(",")]
COMMANDS_PER_SEED = int(os.environ.get("DIFF_GEO_COMMANDS", "400"))
POINTS_PER_KEY = 300
HISTORY = 8

SOURCES = [b"{geo}a", b"{geo}b", b"ga", b"gb"]
DESTS = [b"{geo}d1", b"{geo}d2", b"gd1", b"gd2", b"gd3"]
MISSING = [b"{geo}missing", b"gmissing"]
OTHER_TYPE = b"gstring"
UNITS = [b"m", b"km", b"ft", b"mi", b"KM", b"M", b"Mi"]
LAT_LIMIT = 85.05112878


class Gen:
    def __init__(self, rnd):
        self.r = rnd
        # Each seed's region: where most points and centres are.
        self.region = (rnd.uniform(-170, 170), rnd.uniform(-70, 70))
        self.members = {k: [] for k in SOURCES}

    def point(self):
        r = self.r
        x = r.random()
        if x < 0.75:
            lon = self.region[0] + r.uniform(-2, 2)
            lat = self.region[1] + r.uniform(-2, 2)
        elif x < 0.9:
            lon, lat = r.uniform(-180, 180), r.uniform(-LAT_LIMIT, LAT_LIMIT)
        else:
            lon = r.choice([-180, 180, 0, r.uniform(-180, 180), 179.9999 + r.random() * 0.0001,
                            -180 + r.random() * 0.001])
            lat = r.choice([LAT_LIMIT, -LAT_LIMIT, 0, r.uniform(-LAT_LIMIT, LAT_LIMIT),
                            LAT_LIMIT - r.random() * 0.01, r.uniform(-0.001, 0.001), r.uniform(80, 85)])
        return lon, lat

    def coord(self, v):
        return repr(float(v)).encode()

    def member(self, key):
        r = self.r
        known = self.members.get(key) or [b"nosuch"]
        return r.choice(known) if r.random() < 0.9 else b"nosuch"

    def source(self):
        r = self.r
        x = r.random()
        if x < 0.05:
            return r.choice(MISSING)
        if x < 0.07:
            return OTHER_TYPE
        return r.choice(SOURCES)

    def unit(self):
        r = self.r
        return r.choice(UNITS) if r.random() < 0.98 else b"yd"

    def radius(self, unit):
        r = self.r
        km = r.choice([r.uniform(1, 50), r.uniform(20, 300), r.uniform(0, 5), 0, r.uniform(500, 3000)])
        if r.random() < 0.02:
            return b"-1"
        if r.random() < 0.01:
            return b"abc"
        per_unit = {b"m": 0.001, b"km": 1, b"ft": 0.0003048, b"mi": 1.60934}.get(unit.lower(), 1)
        return self.coord(km / per_unit)

    def options(self, store_kind):
        """Trailing options: sorting, COUNT, WITH* (or a STORE form), in random order."""
        r = self.r
        opts = []
        if r.random() < 0.6:
            opts.append([r.choice([b"ASC", b"DESC", b"asc"])])
        if r.random() < 0.4:
            n = r.choice([1, 2, 3, 5, 10, 50, r.randint(1, 30)])
            if r.random() < 0.03:
                n = r.choice([0, -1])
            c = [b"COUNT", b"%d" % n]
            if r.random() < 0.35:
                c.append(b"ANY")
            opts.append(c)
        elif r.random() < 0.02:
            opts.append([b"ANY"])
        store = None
        if store_kind == "radius" and r.random() < 0.3:
            store = r.choice(DESTS)
            opts.append([r.choice([b"STORE", b"STOREDIST", b"store"]), store])
        elif store_kind == "search" and r.random() < 0.4:
            opts.append([b"STOREDIST"])
        if store is None or r.random() < 0.03:
            for w in (b"WITHDIST", b"WITHCOORD", b"WITHHASH"):
                if r.random() < (0.4 if store_kind != "search" else 0.03):
                    opts.append([w])
        r.shuffle(opts)
        return [a for o in opts for a in o], store

    def search(self, store):
        """GEOSEARCH / GEOSEARCHSTORE arguments after the key(s)."""
        r = self.r
        parts = []
        key_for_member = None
        if r.random() < 0.5:
            lon, lat = self.point() if r.random() < 0.97 else (200, 0)
            parts.append([b"FROMLONLAT", self.coord(lon), self.coord(lat)])
        else:
            parts.append([b"FROMMEMBER", None])  # filled by the caller
            key_for_member = True
        u = self.unit()
        if r.random() < 0.5:
            parts.append([b"BYRADIUS", self.radius(u), u])
        else:
            w, h = self.radius(u), self.radius(u)
            parts.append([b"BYBOX", w, h, u])
        if r.random() < 0.02:
            parts.pop(r.randrange(len(parts)))  # missing FROM or BY
        opts, _ = self.options("search" if store else "none")
        parts.append(opts)
        r.shuffle(parts)
        return parts, key_for_member

    def command(self):
        r = self.r
        x = r.random()
        if x < 0.12:
            k = r.choice(SOURCES + [OTHER_TYPE])
            args = [b"GEOADD", k]
            for o in (b"NX", b"XX", b"CH"):
                if r.random() < 0.1:
                    args.append(o)
            for _ in range(r.randint(1, 4)):
                lon, lat = self.point()
                if r.random() < 0.03:
                    lat = r.choice([86, -90, 85.06])
                m = self.member(k) if r.random() < 0.3 else b"m%d" % r.randint(0, 10**6)
                args += [self.coord(lon), self.coord(lat), m]
            return args, None
        if x < 0.18:
            k = self.source()
            return [b"GEOPOS", k] + [self.member(k) for _ in range(r.randint(1, 4))], None
        if x < 0.25:
            k = self.source()
            args = [b"GEODIST", k, self.member(k), self.member(k)]
            if r.random() < 0.7:
                args.append(self.unit())
            return args, None
        if x < 0.30:
            k = self.source()
            return [b"GEOHASH", k] + [self.member(k) for _ in range(r.randint(1, 4))], None
        if x < 0.32:
            k = r.choice(SOURCES)
            return [b"ZREM", k] + [self.member(k) for _ in range(r.randint(1, 3))], None
        if x < 0.62:
            store = r.random() < 0.3
            k = self.source()
            parts, _ = self.search(store)
            args = [b"GEOSEARCHSTORE", r.choice(DESTS), k] if store else [b"GEOSEARCH", k]
            for p in parts:
                args += [self.member(k) if a is None else a for a in p]
            return args, (args[1] if store else None)
        k = self.source()
        name = r.choice([b"GEORADIUS", b"GEORADIUS_RO", b"GEORADIUSBYMEMBER", b"GEORADIUSBYMEMBER_RO"])
        ro = name.endswith(b"_RO")
        u = self.unit()
        if name.startswith(b"GEORADIUSBYMEMBER"):
            args = [name, k, self.member(k), self.radius(u), u]
        else:
            lon, lat = self.point()
            args = [name, k, self.coord(lon), self.coord(lat), self.radius(u), u]
        opts, store = self.options("none" if ro and r.random() < 0.9 else "radius")
        return args + opts, store


@pytest.fixture(scope="module")
def geo_pair():
    with redis_and_abacus() as (rs, ab):
        cr, ca = _client(rs), _client(ab)
        yield cr, ca
        cr.close()
        ca.close()


def _same(cr, ca, args, history):
    ra, aa = _run(cr, args), _run(ca, args)
    assert ra == aa, "command %r\nredis:  %r\nabacus: %r\nlast commands: %r" % (args, ra, aa, history[-HISTORY:])
    return ra


@pytest.mark.parametrize("seed", SEEDS)
def test_differential_geo(geo_pair, seed):
    cr, ca = geo_pair
    for c in (cr, ca):
        c.execute_command("FLUSHALL")
        c.execute_command("SET", OTHER_TYPE, "x")
    gen = Gen(random.Random(seed))
    history = []
    # Load: pipelined-sized GEOADDs of fresh members.
    for k in SOURCES:
        for batch in range(POINTS_PER_KEY // 50):
            args = [b"GEOADD", k]
            for i in range(50):
                lon, lat = gen.point()
                m = b"p%d" % (batch * 50 + i)
                gen.members[k].append(m)
                args += [gen.coord(lon), gen.coord(lat), m]
            history.append(args)
            _same(cr, ca, args, history)
        _same(cr, ca, [b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"], history)
    found = 0
    for _ in range(COMMANDS_PER_SEED):
        args, dest = gen.command()
        history.append(args)
        reply = _same(cr, ca, args, history)
        if isinstance(reply, list):
            found += len(reply)
        if dest is not None:
            _same(cr, ca, [b"ZRANGE", dest, b"0", b"-1", b"WITHSCORES"], history)
            _same(cr, ca, [b"TYPE", dest], history)
    for k in SOURCES:
        _same(cr, ca, [b"ZRANGE", k, b"0", b"-1", b"WITHSCORES"], history)
    # The searches found something (the test compares results, not only empty replies).
    assert found > COMMANDS_PER_SEED
