"""ATTRIBUTE (Abacus only): multi-touch attribution over event streams, checked against an
independent plain-Python implementation of the same rules on generated data.

The generated users have the edge cases the rules name: conversions with no touch before
them, touches outside the lookback window, several conversions per user (a conversion's
touches start after the previous one), ties in time (events of the same millisecond, ordered
by their IDs' sequence), one-touch paths, entries without the channel or the conversion
field (skipped and counted), numeric channel names, values that are not numbers (0). The
reference reads the same events back with XRANGE, so it checks the computation, not the
load. Floating-point sums are compared with a relative tolerance (the server adds per shard
and then across shards, the reference in one pass).
"""

import math
import random

import pytest

pytestmark = pytest.mark.abacus_only("ATTRIBUTE is Abacus's own command")

MODELS = ["first", "last", "linear", "position", "decay"]
DAY = 86_400_000


def as_dict(flat):
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


def parse_reply(reply):
    """The MATCH/KEY reply (RESP2: maps are flat arrays, doubles bulk strings) as dicts."""
    d = as_dict(reply)
    out = {k.decode(): d[k] for k in (b"users", b"events", b"conversions", b"unattributed", b"skipped")}
    models = as_dict(d[b"models"])
    out["models"] = {m.decode(): [(row[0], float(row[1]), float(row[2])) for row in rows] for m, rows in models.items()}
    if b"paths" in d:
        paths = []
        for p in d[b"paths"]:
            p = as_dict(p)
            credits = as_dict(p[b"credits"])
            paths.append({"conversion": p[b"conversion"], "value": float(p[b"value"]),
                          "touches": [(t[0], t[1]) for t in p[b"touches"]],
                          "credits": {m.decode(): [float(x) for x in v] for m, v in credits.items()}})
        out["paths"] = paths
    return out


def shares(model, times, at, halflife):
    n = len(times)
    if model == "first":
        return [1.0 if i == 0 else 0.0 for i in range(n)]
    if model == "last":
        return [1.0 if i == n - 1 else 0.0 for i in range(n)]
    if model == "linear":
        return [1.0 / n] * n
    if model == "position":
        if n == 1:
            return [1.0]
        if n == 2:
            return [0.5, 0.5]
        return [0.4 if i in (0, n - 1) else 0.2 / (n - 2) for i in range(n)]
    w = [2.0 ** (-(at - t) / halflife) for t in times]
    s = sum(w)
    return [x / s for x in w] if s > 0 else [1.0 / n] * n


def number(v):
    try:
        x = float(v)
    except ValueError:
        return 0.0
    return x if math.isfinite(x) else 0.0


def reference(streams, channel, conv_field, conv_value, value_field, models, halflife, lookback):
    """streams: per user, a list of (ms, [(field, value)...]) in ID order."""
    out = {"users": 0, "events": 0, "conversions": 0, "unattributed": 0, "skipped": 0}
    credits = {m: {} for m in models}
    seen = set()
    paths = []
    for entries in streams:
        out["users"] += 1
        touches = []
        for (eid, ms), fields in entries:
            out["events"] += 1
            d = {}
            for f, v in fields:
                d[f] = v
            if conv_field not in d:
                out["skipped"] += 1
                continue
            if d[conv_field] != conv_value:
                if channel in d:
                    touches.append((eid, ms, d[channel]))
                    seen.add(d[channel])
                else:
                    out["skipped"] += 1
                continue
            out["conversions"] += 1
            value = number(d[value_field]) if value_field and value_field in d else 0.0
            window = [t for t in touches if t[1] >= max(0, ms - lookback)]
            path = {"conversion": eid, "value": value, "touches": [(t[0], t[2]) for t in window], "credits": {}}
            if not window:
                out["unattributed"] += 1
            else:
                for m in models:
                    sh = shares(m, [t[1] for t in window], ms, max(halflife, 1))
                    path["credits"][m] = sh
                    for (_, _, ch), w in zip(window, sh):
                        c = credits[m].setdefault(ch, [0.0, 0.0])
                        c[0] += w
                        c[1] += w * value
            paths.append(path)
            touches = []
    out["models"] = {m: [(ch, *credits[m].get(ch, [0.0, 0.0])) for ch in sorted(seen)] for m in models}
    return out, paths


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def assert_same(got, want):
    for k in ("users", "events", "conversions", "unattributed", "skipped"):
        assert got[k] == want[k], (k, got[k], want[k])
    assert list(got["models"]) == list(want["models"])
    for m in want["models"]:
        g, w = got["models"][m], want["models"][m]
        assert [x[0] for x in g] == [x[0] for x in w], m
        for (ch, gc, gv), (_, wc, wv) in zip(g, w):
            assert close(gc, wc) and close(gv, wv), (m, ch, gc, wc, gv, wv)


CHANNELS = [b"google", b"facebook", b"email", b"direct", b"tiktok", b"bing", b"affiliate", b"7"]


def generate(rnd, users, start_ms=1_700_000_000_000):
    """Per user, the XADD argument lists (explicit IDs) covering the edge cases."""
    out = []
    for u in range(users):
        t = start_ms + rnd.randrange(10 * DAY)
        seq = 0
        events = []
        for _ in range(rnd.randint(0, 30)):
            x = rnd.random()
            if x < 0.25:
                step = 0  # a tie in time: same millisecond, next sequence
            elif x < 0.85:
                step = rnd.randrange(1, 6 * 3_600_000)
            else:
                step = rnd.randrange(20 * DAY, 50 * DAY)  # out of the window
            if step:
                t += step
                seq = 0
            else:
                seq += 1
            y = rnd.random()
            if y < 0.08:
                fields = [b"event", b"purchase", b"amount", rnd.choice([b"%d" % rnd.randrange(1, 500), b"%d.%02d" % (rnd.randrange(500), rnd.randrange(100)), b"n/a"])]
            elif y < 0.1:
                fields = [b"event", b"purchase"]
            elif y < 0.13:
                fields = [b"source", rnd.choice(CHANNELS)]  # no conversion field: skipped
            elif y < 0.15:
                fields = [b"event", b"click"]  # no channel: skipped
            else:
                fields = [b"source", rnd.choice(CHANNELS), b"event", rnd.choice([b"impression", b"click", b"visit"])]
                if rnd.random() < 0.2:
                    fields += [b"campaign", b"c%d" % rnd.randrange(40)]
            events.append((b"%d-%d" % (t, seq), fields))
        out.append(events)
    return out


def load(r, users_events):
    p = r.pipeline(transaction=False)
    for u, events in enumerate(users_events):
        for eid, fields in events:
            p.execute_command("XADD", b"user:%d" % u, eid, *fields)
    p.execute()


def read_back(c, keys):
    streams = []
    for k in keys:
        entries = c.execute("XRANGE", k, "-", "+")
        streams.append([((e[0], int(e[0].split(b"-")[0])), list(zip(e[1][::2], e[1][1::2]))) for e in entries])
    return streams


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_match_against_the_reference(r, c, seed):
    rnd = random.Random(seed)
    data = generate(rnd, 300)
    load(r, data)
    r.set("user:not-a-stream", "x")
    r.xadd("other:1", {"source": "google", "event": "click"})
    keys = sorted(k for k in r.keys("user:*") if r.type(k) == b"stream")
    streams = read_back(c, keys)
    for halflife, lookback in ((b"7d", b"30d"), (b"12h", b"2d"), (b"1s", b"0")):
        args = ["ATTRIBUTE", "MATCH", "user:*", "CHANNEL", "source", "CONVERSION", "event", "purchase",
                "VALUE", "amount", "MODELS", *MODELS, "HALFLIFE", halflife, "LOOKBACK", lookback]
        got = parse_reply(c.execute(*args))
        units = {b"d": DAY, b"h": 3_600_000, b"s": 1000}
        dur = lambda d: 0 if d == b"0" else int(d[:-1]) * units[d[-1:]]
        want, _ = reference(streams, b"source", b"event", b"purchase", b"amount", MODELS, dur(halflife), dur(lookback))
        assert want["conversions"] > 10 and want["unattributed"] > 0 and want["skipped"] > 0
        assert_same(got, want)


def test_key_form_gives_paths_and_shares(r, c):
    rnd = random.Random(9)
    data = generate(rnd, 40)
    load(r, data)
    for u in range(40):
        k = b"user:%d" % u
        got = parse_reply(c.execute("ATTRIBUTE", "KEY", k, "CHANNEL", "source", "CONVERSION", "event", "purchase",
                                    "VALUE", "amount", "MODELS", "decay", "position", "HALFLIFE", "3h", "LOOKBACK", "10d"))
        streams = read_back(c, [k]) if data[u] else []
        want, paths = reference(streams, b"source", b"event", b"purchase", b"amount", ["decay", "position"], 3 * 3_600_000, 10 * DAY)
        if not data[u]:
            assert got["users"] == 0 and got["paths"] == []
            continue
        assert_same(got, want)
        assert len(got["paths"]) == len(paths)
        for gp, wp in zip(got["paths"], paths):
            assert gp["conversion"] == wp["conversion"] and close(gp["value"], wp["value"])
            assert gp["touches"] == wp["touches"]
            for m, sh in wp["credits"].items():
                assert all(close(a, b) for a, b in zip(gp["credits"][m], sh)) and len(gp["credits"][m]) == len(sh)


def test_a_worked_example(r, c):
    for i, (ch, ev) in enumerate([("email", "visit"), ("google", "click"), ("direct", "visit")]):
        r.xadd("u", {"source": ch, "event": ev}, id="%d-0" % (1000 * (i + 1)))
    r.xadd("u", {"event": "purchase", "amount": "100"}, id="4000-0")
    got = parse_reply(c.execute("ATTRIBUTE", "KEY", "u", "CHANNEL", "source", "CONVERSION", "event", "purchase",
                                "VALUE", "amount", "MODELS", "first", "last", "linear", "position", "decay", "HALFLIFE", "1s"))
    credit = {m: {ch: (cv, v) for ch, cv, v in rows} for m, rows in got["models"].items()}
    assert credit["first"][b"email"] == (1.0, 100.0) and credit["last"][b"direct"] == (1.0, 100.0)
    assert close(credit["linear"][b"google"][0], 1 / 3)
    assert credit["position"][b"google"] == (0.2, 20.0) and credit["position"][b"email"] == (0.4, 40.0)
    assert close(credit["decay"][b"direct"][0], 4 / 7) and close(credit["decay"][b"email"][1], 100 / 7)
    assert got["paths"][0]["touches"] == [(b"1000-0", b"email"), (b"2000-0", b"google"), (b"3000-0", b"direct")]


def test_errors(r, c):
    base = ["CHANNEL", "source", "CONVERSION", "event", "purchase"]
    r.set("str", "x")
    assert c.execute("ATTRIBUTE", "KEY", "str", *base, "MODELS", "first").startswith("WRONGTYPE")
    cases = [
        (["ATTRIBUTE", *base, "MODELS", "first", "LOOKBACK", "1d"], "ERR ATTRIBUTE needs MATCH pattern or KEY key"),
        (["ATTRIBUTE", "MATCH", "*", "KEY", "k", *base, "MODELS", "first"], "ERR ATTRIBUTE takes one of MATCH pattern or KEY key"),
        (["ATTRIBUTE", "MATCH", "*", "CONVERSION", "event", "purchase", "MODELS", "first"], "ERR ATTRIBUTE needs CHANNEL field"),
        (["ATTRIBUTE", "MATCH", "*", "CHANNEL", "source", "MODELS", "first", "LOOKBACK", "1d"], "ERR ATTRIBUTE needs CONVERSION field value"),
        (["ATTRIBUTE", "MATCH", "*", *base, "HALFLIFE", "1d"], "ERR ATTRIBUTE needs MODELS and at least one model (first, last, linear, position, decay)"),
        (["ATTRIBUTE", "MATCH", "*", *base, "MODELS", "first", "fifo"], "ERR unknown attribution model 'fifo' (models: first, last, linear, position, decay)"),
        (["ATTRIBUTE", "MATCH", "*", *base, "MODELS", "first", "FIRST"], "ERR attribution model 'FIRST' given twice"),
        (["ATTRIBUTE", "MATCH", "*", *base, "MODELS", "decay", "HALFLIFE", "0"], "ERR invalid HALFLIFE duration '0' (a positive number with ms, s, m, h or d)"),
        (["ATTRIBUTE", "MATCH", "*", *base, "MODELS", "decay", "LOOKBACK", "7w"], "ERR invalid LOOKBACK duration '7w' (a positive number with ms, s, m, h or d)"),
        (["ATTRIBUTE", "MATCH", "*", *base, "BOGUS", "1", "MODELS", "decay"], "ERR syntax error"),
        (["ATTRIBUTE", "MATCH", "*", *base, "MODELS", "decay", "LOOKBACK"], "ERR syntax error"),
    ]
    for args, want in cases:
        got = c.execute(*args)
        assert got == want, (args, got)


def test_empty_and_resp3(server, r):
    c = server.raw()
    c.execute("HELLO", "3")
    got = c.execute("ATTRIBUTE", "MATCH", "nothing:*", "CHANNEL", "s", "CONVERSION", "e", "p", "MODELS", "linear")
    assert got == {b"users": 0, b"events": 0, b"conversions": 0, b"unattributed": 0, b"skipped": 0, b"models": {b"linear": []}}
    c.close()


def test_whole_credits_are_exact_and_plain(r, c):
    """A value credited whole (first and last touch, any model over one touch) adds exactly
    and prints plain: doubles would answer 12075.619999999999 for these amounts, shown by
    Redis's double layout as 1.2075619999999999e+4."""
    amounts = ["0.1", "0.2", "12000.3", "55.02", "19.99", "0.01"]
    assert sum(float(a) for a in amounts) != 12075.62
    for u, a in enumerate(amounts):
        r.xadd("money:%d" % u, {"source": "ads", "event": "click"}, id="1000-0")
        r.xadd("money:%d" % u, {"event": "purchase", "amount": a}, id="2000-0")
    args = ["ATTRIBUTE", "MATCH", "money:*", "CHANNEL", "source", "CONVERSION", "event", "purchase",
            "VALUE", "amount", "MODELS", "first", "linear"]
    reply = c.execute(*args)
    models = as_dict(as_dict(reply)[b"models"])
    assert models[b"first"] == [[b"ads", b"6", b"12075.62"]] and models[b"linear"] == [[b"ads", b"6", b"12075.62"]]
    # A fractional share is a double, still in plain notation.
    r.xadd("money:0", {"source": "mail", "event": "click"}, id="3000-0")
    r.xadd("money:0", {"source": "ads", "event": "click"}, id="3001-0")
    r.xadd("money:0", {"source": "ads", "event": "click"}, id="3002-0")
    r.xadd("money:0", {"event": "purchase", "amount": "1e-7"}, id="4000-0")
    models = as_dict(as_dict(c.execute(*args))[b"models"])
    linear = {row[0]: row for row in models[b"linear"]}
    assert models[b"first"] == [[b"ads", b"6", b"12075.62"], [b"mail", b"1", b"0.0000001"]]
    assert linear[b"mail"] == [b"mail", b"0.3333333333333333", b"0.00000003333333333333333"]
    # RESP3: typed doubles.
    c3 = __import__("helpers").RespClient(c.host, c.port)
    c3.execute("HELLO", "3")
    got = c3.execute(*args)
    assert got[b"models"][b"first"] == [[b"ads", 6.0, 12075.62], [b"mail", 1.0, 1e-7]]
    c3.close()
