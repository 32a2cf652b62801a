"""Time series (TS.* in RedisTimeSeries 1.10's dialect, and TS.WATERFALL) end to end.

Through redis-py's time-series client (`r.ts()`) where it has the command, raw commands where
it lacks one. Aggregations, GROUPBY reductions and the waterfall are checked against plain
Python references computed here from the samples the test wrote. `test_replies_match_the_module`
runs the same requests against redis-server with the RedisTimeSeries module (when its .so is
present, else skipped) and compares the replies exactly.

Everything else is Abacus-only: the harness's `--target redis` runs redis-server without the
module.
"""

import math
import os
import random
import socket
import time

import pytest
import redis

from conftest import ServerProcess
from helpers import RespClient, encode_command, key_on
from test_differential import _client, _run
from test_persistence import data_dir, node, wait_snapshot  # noqa: F401 (fixtures)

pytestmark = pytest.mark.abacus_only("TS.* is a module in Redis; the harness's Redis runs without it")

# The RedisTimeSeries module cannot ship with the repository (its licence): the differential
# test runs when REDISTIMESERIES_SO names a build of it (v1.10.x), and skips otherwise.
MODULE = os.environ.get("REDISTIMESERIES_SO", "")

AGGREGATORS = ["avg", "sum", "min", "max", "range", "count", "first", "last",
               "std.p", "std.s", "var.p", "var.s", "twa"]


def X(r):
    """A client on `r`'s server without redis-py's TS reply parsing (`r.ts()` installs it on
    `r`): raw replies, bytes as sent."""
    c = getattr(r, "_raw_twin", None)
    if c is None:
        kw = r.connection_pool.connection_kwargs
        c = redis.Redis(host=kw["host"], port=kw["port"], db=kw.get("db", 0))
        c.response_callbacks = {}
        r._raw_twin = c
    return c


def L(x):
    """redis-py's ts() replies as nested lists (it gives tuples for samples)."""
    if isinstance(x, (list, tuple)):
        return [L(y) for y in x]
    return x


def err_of(f, *a, **kw):
    with pytest.raises(redis.ResponseError) as e:
        f(*a, **kw)
    return str(e.value)


# ---------------------------------------------------------------------------
# Python references


def bucket_start(t, bucket, align=0):
    return t - ((t - align) % bucket)


def fold(agg, pts, start, end, prev, nxt):
    vals = [v for _, v in pts]
    n = len(vals)
    if agg == "avg":
        return sum(vals) / n
    if agg == "sum":
        return sum(vals)
    if agg == "min":
        return min(vals)
    if agg == "max":
        return max(vals)
    if agg == "range":
        return max(vals) - min(vals)
    if agg == "count":
        return n
    if agg == "first":
        return vals[0]
    if agg == "last":
        return vals[-1]
    if agg in ("std.p", "std.s", "var.p", "var.s"):
        mean = sum(vals) / n
        ss = sum((v - mean) ** 2 for v in vals)
        var = ss / n if agg.endswith(".p") else (ss / (n - 1) if n > 1 else 0.0)
        return math.sqrt(var) if agg.startswith("std") else var
    assert agg == "twa"

    def lerp(a, b, t):
        return a[1] + (b[1] - a[1]) * (t - a[0]) / (b[0] - a[0])
    line = list(pts)
    if prev is not None and line[0][0] > start:
        line.insert(0, (start, lerp(prev, line[0], start)))
    if nxt is not None and line[-1][0] < end:
        line.append((end, lerp(line[-1], nxt, end)))
    span = line[-1][0] - line[0][0]
    if span == 0:
        return sum(v for _, v in line) / len(line)
    return sum((b[0] - a[0]) * (a[1] + b[1]) / 2 for a, b in zip(line, line[1:])) / span


def reference_aggregation(samples, frm, to, agg, bucket, align=0):
    """Buckets of the samples of [frm, to] (samples: sorted (t, v) of the whole series)."""
    inside = [(t, v) for t, v in samples if frm <= t <= to]
    out = []
    i = 0
    while i < len(inside):
        start = bucket_start(inside[i][0], bucket, align)
        j = i
        while j < len(inside) and inside[j][0] < start + bucket:
            j += 1
        before = [s for s in samples if s[0] < inside[i][0]]
        after = [s for s in samples if s[0] > inside[j - 1][0]]
        prev = before[-1] if before else None
        nxt = after[0] if after else None
        lo, hi = (max(start, frm), min(start + bucket, to)) if agg == "twa" else (start, start + bucket)
        out.append((start, fold(agg, inside[i:j], lo, hi, prev, nxt)))
        i = j
    return out


def as_pairs(reply):
    return [(int(t), float(v)) for t, v in reply]


def close(a, b):
    assert len(a) == len(b), (a, b)
    for (ta, va), (tb, vb) in zip(a, b):
        assert ta == tb, (a, b)
        assert math.isclose(va, vb, rel_tol=1e-9, abs_tol=1e-9), (ta, va, vb)


# ---------------------------------------------------------------------------
# single series


def test_create_add_get_range_info(r):
    ts = r.ts()
    assert ts.create("t", retention_msecs=0, labels={"sensor": "a", "room": "1"})
    assert ts.add("t", 1000, 1.5) == 1000
    assert ts.add("t", 2000, 2.5) == 2000
    assert L(ts.get("t")) == [2000, 2.5]
    assert L(ts.range("t", "-", "+")) == [[1000, 1.5], [2000, 2.5]]
    assert L(ts.revrange("t", "-", "+")) == [[2000, 2.5], [1000, 1.5]]
    info = ts.info("t")
    assert info.total_samples == 2
    assert info.first_timestamp == 1000 and info.last_timestamp == 2000
    assert info.labels == {"sensor": "a", "room": "1"}
    assert r.type("t") == b"TSDB-TYPE"
    assert r.object("encoding", "t") == b"raw"
    # Values as RedisTimeSeries formats them in RESP2 (raw bytes).
    ts.add("t", 3000, 0.1)
    assert X(r).execute_command("TS.GET", "t") == [3000, b"1E-1"]
    # `*` is the server's clock.
    t = ts.add("t", "*", 7)
    assert abs(t - r.time()[0] * 1000) < 60000


def test_errors(r):
    ts = r.ts()
    r.set("str", "x")
    assert err_of(ts.add, "str", 1, 1) == "TSDB: the key is not a TSDB key"
    assert err_of(ts.get, "str") == "WRONGTYPE Operation against a key holding the wrong kind of value"
    assert err_of(ts.get, "missing") == "TSDB: the key does not exist"
    assert err_of(ts.range, "missing", 0, 10) == "TSDB: the key does not exist"
    ts.create("e")
    assert err_of(ts.create, "e") == "TSDB: key already exists"
    assert err_of(r.execute_command, "TS.ADD", "e", "x", "1") == "TSDB: invalid timestamp"
    assert err_of(r.execute_command, "TS.ADD", "e", "-1", "1") == "TSDB: invalid timestamp, must be a nonnegative integer"
    assert err_of(r.execute_command, "TS.ADD", "e", "1", "nan") == "TSDB: invalid value"
    assert err_of(r.execute_command, "TS.CREATE", "f", "CHUNK_SIZE", "7").startswith("TSDB: CHUNK_SIZE value must be a multiple of 8")
    assert err_of(r.execute_command, "TS.CREATE", "f", "DUPLICATE_POLICY", "nope") == "TSDB: Unknown DUPLICATE_POLICY"
    assert err_of(r.execute_command, "TS.RANGE", "e", "-", "+", "AGGREGATION", "nope", "10") == "TSDB: Unknown aggregation type"
    assert err_of(r.execute_command, "TS.RANGE", "e", "-", "+", "AGGREGATION", "avg", "0") == "TSDB: bucketDuration must be greater than zero"
    assert err_of(r.execute_command, "TS.RANGE", "e", "-", "+", "ALIGN", "0") == "TSDB: ALIGN parameter can only be used with AGGREGATION"
    assert err_of(r.execute_command, "TS.RANGE", "e", "-", "+", "COUNT", "0") == "TSDB: Invalid COUNT value"
    assert err_of(r.execute_command, "TS.MGET", "FILTER", "a!=b") == "TSDB: please provide at least one matcher"
    assert err_of(r.execute_command, "TS.MGET", "FILTER", "nolabel") == "TSDB: failed parsing labels"
    assert err_of(r.execute_command, "TS.ADD", "e") == "wrong number of arguments for 'ts.add' command"


@pytest.mark.parametrize("policy", ["block", "first", "last", "min", "max", "sum"])
def test_duplicate_policies(r, policy):
    ts = r.ts()
    ts.create("d", duplicate_policy=policy)
    ts.add("d", 10, 5)
    want = {"first": 5, "last": 3, "min": 3, "max": 5, "sum": 8}
    if policy == "block":
        assert "BLOCK" in err_of(ts.add, "d", 10, 3)
        assert L(ts.get("d")) == [10, 5]
    else:
        ts.add("d", 10, 3)
        assert L(ts.get("d")) == [10, want[policy]]
    # ON_DUPLICATE overrides the series' policy for one add.
    ts.add("d", 10, 100, on_duplicate="last")
    assert L(ts.get("d")) == [10, 100]
    assert ts.info("d").duplicate_policy == policy


def test_out_of_order_backfill_and_delete_match_a_dict(r):
    ts = r.ts()
    ts.create("o", chunk_size=48, duplicate_policy="last")
    rnd = random.Random(7)
    model = {}
    stamps = list(range(0, 20000, 7))
    rnd.shuffle(stamps)
    pipe = r.pipeline(transaction=False)
    for t in stamps:
        v = round(rnd.uniform(-1000, 1000), rnd.choice([0, 2, 6]))
        model[t] = v
        pipe.execute_command("TS.ADD", "o", t, v)
    pipe.execute()
    for _ in range(20):
        a = rnd.randrange(0, 20000)
        b = a + rnd.randrange(0, 500)
        n = sum(1 for t in model if a <= t <= b)
        assert X(r).execute_command("TS.DEL", "o", a, b) == n
        model = {t: v for t, v in model.items() if not (a <= t <= b)}
    got = as_pairs(ts.range("o", "-", "+"))
    assert got == sorted(model.items())
    assert ts.info("o").total_samples == len(model)
    assert ts.info("o").chunk_count > 10


def test_retention_refuses_and_drops_old_samples(r):
    ts = r.ts()
    ts.create("ret", retention_msecs=100, chunk_size=48)
    for t in range(0, 1000, 10):
        ts.add("ret", t, t)
    assert err_of(ts.add, "ret", 100, 1) == "TSDB: Timestamp is older than retention"
    got = [t for t, _ in ts.range("ret", "-", "+")]
    assert got[-1] == 990 and all(t >= 0 for t in got)
    # Whole chunks older than the window are gone; the window is complete.
    assert got[0] < 990 - 100 + 10 or got == list(range(got[0], 1000, 10))
    assert set(range(890, 1000, 10)) <= set(got)
    assert len(got) < 100


def test_incrby_decrby_madd(r):
    ts = r.ts()
    assert ts.incrby("c", 5, timestamp=10) == 10
    assert ts.incrby("c", 2, timestamp=10) == 10
    assert ts.decrby("c", 1, timestamp=20) == 20
    assert L(ts.range("c", "-", "+")) == [[10, 7.0], [20, 6.0]]
    assert "maximum existing timestamp" in err_of(ts.incrby, "c", 1, timestamp=5)
    ts.create("m1")
    res = X(r).execute_command("TS.MADD", "m1", 1, 10, "m1", 2, 20, "nosuch", 3, 30)
    assert res[:2] == [1, 2] and isinstance(res[2], redis.ResponseError)


@pytest.mark.parametrize("agg", AGGREGATORS)
def test_aggregation_matches_a_python_reference(r, agg):
    ts = r.ts()
    rnd = random.Random(hash(agg) & 0xffff)
    samples = []
    t = 0
    for _ in range(400):
        t += rnd.choice([1, 3, 10, 40, 95])
        samples.append((t, round(rnd.uniform(-50, 50), 3)))
    ts.create("a")
    for t, v in samples:
        ts.add("a", t, v)
    for frm, to, bucket, align in [(0, 10 ** 9, 50, 0), (137, 5000, 100, 0), (300, 9000, 333, 7), (0, 10 ** 9, 1, 0)]:
        got = as_pairs(X(r).execute_command("TS.RANGE", "a", frm, to, "ALIGN", align, "AGGREGATION", agg, bucket))
        close(got, reference_aggregation(samples, frm, to, agg, bucket, align))
        rev = as_pairs(X(r).execute_command("TS.REVRANGE", "a", frm, to, "ALIGN", align, "AGGREGATION", agg, bucket, "COUNT", 5))
        # A reverse range meets a bucket's samples newest first: its `first` is their last.
        flipped = {"first": "last", "last": "first"}.get(agg, agg)
        close(rev, reference_aggregation(samples, frm, to, flipped, bucket, align)[::-1][:5])
    # BUCKETTIMESTAMP and EMPTY.
    mid = as_pairs(X(r).execute_command("TS.RANGE", "a", 0, 2000, "AGGREGATION", agg, 100, "BUCKETTIMESTAMP", "mid"))
    assert [t for t, _ in mid] == [s + 50 for s, _ in reference_aggregation(samples, 0, 2000, agg, 100)]
    empty = X(r).execute_command("TS.RANGE", "a", 0, 20000, "AGGREGATION", agg, 7, "EMPTY")
    starts = [int(t) for t, _ in empty]
    assert starts == list(range(starts[0], starts[-1] + 1, 7))


def test_range_filters_and_count(r):
    ts = r.ts()
    for t in range(1, 101):
        ts.add("f", t, t % 10)
    assert L(ts.range("f", "-", "+", filter_by_ts=[5, 15, 500])) == [[5, 5.0], [15, 5.0]]
    got = L(ts.range("f", 0, 50, filter_by_min_value=2, filter_by_max_value=3))
    assert got == [[t, float(t % 10)] for t in range(1, 51) if 2 <= t % 10 <= 3]
    assert L(ts.range("f", "-", "+", count=3)) == [[1, 1.0], [2, 2.0], [3, 3.0]]
    assert L(ts.revrange("f", "-", "+", count=2)) == [[100, 0.0], [99, 9.0]]


def test_compaction_rules_follow_samples(r):
    ts = r.ts()
    ts.create("{c}src")
    ts.create("{c}avg")
    ts.create("{c}max")
    assert ts.createrule("{c}src", "{c}avg", "avg", 100)
    assert ts.createrule("{c}src", "{c}max", "max", 100)
    samples = [(t, (t * 7) % 13) for t in range(0, 1000, 9)]
    for t, v in samples:
        ts.add("{c}src", t, v)
    closed = [b for b in reference_aggregation(samples, 0, 10 ** 9, "avg", 100) if b[0] < 900]
    close(as_pairs(ts.range("{c}avg", "-", "+")), closed)
    close(as_pairs(ts.range("{c}max", "-", "+")), [b for b in reference_aggregation(samples, 0, 10 ** 9, "max", 100) if b[0] < 900])
    # LATEST adds the open bucket.
    latest = as_pairs(X(r).execute_command("TS.RANGE", "{c}avg", "-", "+", "LATEST"))
    close(latest, reference_aggregation(samples, 0, 10 ** 9, "avg", 100))
    assert as_pairs([X(r).execute_command("TS.GET", "{c}avg", "LATEST")]) == [latest[-1]]
    # Backfill into a closed bucket folds it again.
    ts.add("{c}src", 101, 1000)
    samples = sorted(samples + [(101, 1000)])
    close(as_pairs(ts.range("{c}avg", 100, 100)), [b for b in reference_aggregation(samples, 0, 10 ** 9, "avg", 100) if b[0] == 100])
    info = ts.info("{c}src")
    assert [list(x) for x in info.rules] == [[b"{c}avg", 100, b"AVG", 0], [b"{c}max", 100, b"MAX", 0]] or len(info.rules) == 2
    assert ts.info("{c}avg").source_key in (b"{c}src", "{c}src")
    assert ts.deleterule("{c}src", "{c}max")
    assert len(ts.info("{c}src").rules) == 1
    assert err_of(ts.deleterule, "{c}src", "{c}max") == "TSDB: compaction rule does not exist"
    assert "same hash slot" in err_of(ts.createrule, key_on(0, "x"), key_on(1, "y"), "avg", 10)


def _info(r, key):
    reply = X(r).execute_command("TS.INFO", key)
    return {reply[i]: reply[i + 1] for i in range(0, len(reply), 2)}


def test_compaction_links_follow_their_keys(r):
    """The module's replies (RedisTimeSeries 1.10.24, checked by hand and by
    test_timeseries_differential.py): RENAME carries a rule's halves to the new name, DEL and
    expiry of either side remove the other's half, COPY and RESTORE make unlinked series."""
    c = X(r)

    def link(src, dst, agg="sum"):
        c.execute_command("TS.CREATE", src)
        c.execute_command("TS.CREATE", dst)
        assert c.execute_command("TS.CREATERULE", src, dst, "AGGREGATION", agg, 10) == b"OK"

    link("{l}s", "{l}d")
    assert c.rename("{l}s", "{l}s2")
    assert _info(r, "{l}d")[b"sourceKey"] == b"{l}s2"
    assert c.rename("{l}d", "{l}d2")
    assert _info(r, "{l}s2")[b"rules"] == [[b"{l}d2", 10, b"SUM", 0]]
    # Samples still reach the renamed destination.
    for t in (1, 2, 15):
        c.execute_command("TS.ADD", "{l}s2", t, t)
    assert c.execute_command("TS.RANGE", "{l}d2", "-", "+") == [[0, b"3"]]
    # COPY and RESTORE: no rules, no source, and the originals keep theirs.
    assert c.copy("{l}s2", "{l}c") and c.copy("{l}d2", "{l}cd")
    assert c.execute_command("RESTORE", "{l}r", 0, c.dump("{l}s2")) == b"OK"
    for k in ("{l}c", "{l}cd", "{l}r"):
        assert (_info(r, k)[b"sourceKey"], _info(r, k)[b"rules"]) == (None, [])
    assert _info(r, "{l}s2")[b"rules"] == [[b"{l}d2", 10, b"SUM", 0]]
    # DEL of the destination: the source lists no rule; DEL of the source: no sourceKey.
    link("{l}a", "{l}b")
    c.execute_command("TS.CREATE", "{l}e")
    assert c.execute_command("TS.CREATERULE", "{l}a", "{l}e", "AGGREGATION", "max", 10) == b"OK"
    assert c.delete("{l}b") == 1
    assert _info(r, "{l}a")[b"rules"] == [[b"{l}e", 10, b"MAX", 0]]
    assert c.delete("{l}a") == 1
    assert _info(r, "{l}e")[b"sourceKey"] is None
    # A new series under the old name is not linked, and can take a new rule.
    c.execute_command("TS.CREATE", "{l}a")
    assert _info(r, "{l}e")[b"sourceKey"] is None
    assert c.execute_command("TS.CREATERULE", "{l}a", "{l}e", "AGGREGATION", "min", 5) == b"OK"
    assert _info(r, "{l}a")[b"rules"] == [[b"{l}e", 5, b"MIN", 0]]
    # Expiry and an overwrite by another type count as deletion.
    link("{l}x", "{l}y")
    c.pexpire("{l}y", 1)
    time.sleep(0.01)
    assert _info(r, "{l}x")[b"rules"] == []
    link("{l}p", "{l}q")
    c.set("{l}q", "1")
    assert _info(r, "{l}p")[b"rules"] == []


def test_compaction_opens_its_first_bucket_at_the_first_sample_after_the_rule(r):
    """As the module: a rule made on a series with samples does not compact them; an upsert
    into the newest sample's bucket folds that bucket again from the source; TS.DEL refolds
    the buckets it touched, and refuses to reach before the retention window."""
    c = X(r)
    c.execute_command("TS.CREATE", "{o}s", "DUPLICATE_POLICY", "LAST")
    c.execute_command("TS.CREATE", "{o}d")
    for t in (1, 2, 3, 12, 13):
        c.execute_command("TS.ADD", "{o}s", t, t)
    c.execute_command("TS.CREATERULE", "{o}s", "{o}d", "AGGREGATION", "sum", 10)
    assert c.execute_command("TS.GET", "{o}d", "LATEST") == []
    c.execute_command("TS.ADD", "{o}s", 15, 1)
    c.execute_command("TS.ADD", "{o}s", 25, 1)
    assert c.execute_command("TS.RANGE", "{o}d", "-", "+") == [[10, b"1"]]
    c.execute_command("TS.ADD", "{o}s", 31, 1)
    c.execute_command("TS.ADD", "{o}s", 14, 100)
    c.execute_command("TS.ADD", "{o}s", 5, 100)
    assert c.execute_command("TS.RANGE", "{o}d", "-", "+") == [[0, b"106"], [10, b"126"], [20, b"1"]]
    # Before any append, an upsert into the newest bucket makes the open aggregate cover it.
    c.execute_command("TS.CREATE", "{o}s2", "DUPLICATE_POLICY", "LAST")
    c.execute_command("TS.CREATE", "{o}d2")
    for t in (1, 2, 3, 12, 13):
        c.execute_command("TS.ADD", "{o}s2", t, t)
    c.execute_command("TS.CREATERULE", "{o}s2", "{o}d2", "AGGREGATION", "sum", 10)
    c.execute_command("TS.ADD", "{o}s2", 12, 100)
    c.execute_command("TS.ADD", "{o}s2", 15, 1)
    assert c.execute_command("TS.GET", "{o}d2", "LATEST") == [10, b"114"]
    # TS.DEL with rules.
    c.execute_command("TS.CREATE", "{o}r", "RETENTION", 50)
    c.execute_command("TS.CREATE", "{o}rd")
    c.execute_command("TS.CREATERULE", "{o}r", "{o}rd", "AGGREGATION", "sum", 10)
    for t in (1, 2, 3, 12, 13, 15, 22, 25, 31, 44, 47, 52, 61, 63):
        c.execute_command("TS.ADD", "{o}r", t, t)
    assert c.execute_command("TS.RANGE", "{o}r", "-", 13) == [[13, b"13"]]
    for frm, to in ((0, 5), (14, 25)):
        assert err_of(c.execute_command, "TS.DEL", "{o}r", frm, to) == \
            "TSDB: When a series has compactions, deleting samples or compaction buckets beyond the series retention period is not possible"
    assert c.execute_command("TS.DEL", "{o}r", 45, 62) == 3
    assert c.execute_command("TS.RANGE", "{o}rd", "-", "+") == [[0, b"6"], [10, b"40"], [20, b"47"], [30, b"31"], [40, b"44"]]
    assert c.execute_command("TS.GET", "{o}rd", "LATEST") == [60, b"63"]
    # TS.DEL in the newest sample's bucket touches no destination sample (it is the open
    # aggregate's), even before the rule opened a bucket; an older bucket is folded again.
    c.execute_command("TS.CREATE", "{o}a")
    c.execute_command("TS.CREATE", "{o}ad")
    for t in (1, 2, 3, 12, 13, 17):
        c.execute_command("TS.ADD", "{o}a", t, t)
    c.execute_command("TS.CREATERULE", "{o}a", "{o}ad", "AGGREGATION", "sum", 10)
    c.execute_command("TS.ADD", "{o}ad", 10, 7)
    c.execute_command("TS.ADD", "{o}ad", 0, 7)
    assert c.execute_command("TS.DEL", "{o}a", 13, 13) == 1
    assert c.execute_command("TS.RANGE", "{o}ad", "-", "+") == [[0, b"7"], [10, b"7"]]
    assert c.execute_command("TS.DEL", "{o}a", 2, 2) == 1
    assert c.execute_command("TS.RANGE", "{o}ad", "-", "+") == [[0, b"4"], [10, b"7"]]


def test_reads_stop_at_the_retention_window(r):
    """As the module: samples older than the newest minus RETENTION are not read (TS.RANGE,
    TS.INFO) even while their chunk is kept; TS.DEL still counts them; a longer retention
    shows them again."""
    c = X(r)
    for k in ("{w}u", "{w}v"):
        c.execute_command("TS.CREATE", k, "RETENTION", 10)
        for t in (1, 2, 3, 12, 13, 15, 22):
            c.execute_command("TS.ADD", k, t, t)
    assert c.execute_command("TS.RANGE", "{w}u", "-", "+") == [[12, b"12"], [13, b"13"], [15, b"15"], [22, b"22"]]
    info = _info(r, "{w}u")
    assert (info[b"totalSamples"], info[b"firstTimestamp"]) == (4, 12)
    assert c.execute_command("TS.DEL", "{w}u", 0, 12) == 4
    assert c.execute_command("TS.RANGE", "{w}u", "-", "+") == [[13, b"13"], [15, b"15"], [22, b"22"]]
    c.execute_command("TS.ALTER", "{w}v", "RETENTION", 0)
    assert len(c.execute_command("TS.RANGE", "{w}v", "-", "+")) == 7


def test_label_and_option_errors_in_the_modules_words(r):
    """The module's replies (checked against RedisTimeSeries 1.10.24 by the module script)."""
    c = X(r)
    for v in ("b(c", "b,c", ")"):
        assert err_of(c.execute_command, "TS.CREATE", "{e}x", "LABELS", "a", v) == "TSDB: Couldn't parse LABELS"
    assert c.execute_command("TS.CREATE", "{e}x", "LABELS", "a(", "b=c") == b"OK"
    for f in ("a=(", "a=(b"):
        assert err_of(c.execute_command, "TS.MGET", "FILTER", f) == "TSDB: failed parsing labels"
    assert err_of(c.execute_command, "TS.MGET", "WITHLABELS", "SELECTED_LABELS", "a", "FILTER", "a=b") == \
        "TSDB: cannot accept WITHLABELS and SELECT_LABELS together"
    assert err_of(c.execute_command, "TS.MGET", "SELECTED_LABELS", "FILTER", "a=b") == "TSDB: SELECT_LABELS should have at least 1 parameter"
    assert err_of(c.execute_command, "TS.CREATE", "{e}y", "DUPLICATE_POLICY") == "TSDB: Couldn't parse DUPLICATE_POLICY"
    assert c.execute_command("TS.ADD", "{e}z", 1, 1, "ON_DUPLICATE") == 1
    c.execute_command("TS.ADD", "{e}big", 1, "1.7976931348623157E308")
    c.execute_command("TS.ADD", "{e}big", 2, "1.7976931348623157E308")
    assert c.execute_command("TS.RANGE", "{e}big", "-", "+", "AGGREGATION", "avg", 10) == [[0, b"1.7976931348623157E308"]]


def _mk(r, key, labels, samples):
    r.ts().create(key, labels=labels)
    for t, v in samples:
        r.ts().add(key, t, v)


def test_multi_series_filters_across_shards(r):
    ts = r.ts()
    series = {}
    for i in range(12):
        key = key_on(i % 2, "ms%d" % i)
        labels = {"kind": "cpu" if i % 3 else "mem", "host": "h%d" % (i % 4)}
        if i % 5 == 0:
            labels["extra"] = "yes"
        samples = [(t, i * 100 + t) for t in range(0, 50, 5 + i % 3)]
        _mk(r, key, labels, samples)
        series[key] = (labels, samples)

    def want(pred):
        return sorted(k for k, (lab, _) in series.items() if pred(lab))

    def q(*f):
        return sorted(k.decode() for k in X(r).execute_command("TS.QUERYINDEX", *f))
    assert q("kind=cpu") == want(lambda l: l["kind"] == "cpu")
    assert q("kind=cpu", "host!=h1") == want(lambda l: l["kind"] == "cpu" and l["host"] != "h1")
    assert q("host=(h1,h2)", "extra=") == want(lambda l: l["host"] in ("h1", "h2") and "extra" not in l)
    assert q("host=(h1,h2)", "extra!=") == want(lambda l: l["host"] in ("h1", "h2") and "extra" in l)
    assert q("kind=mem", "host!=(h0,h3)") == want(lambda l: l["kind"] == "mem" and l["host"] not in ("h0", "h3"))
    # MGET with labels.
    got = X(r).execute_command("TS.MGET", "WITHLABELS", "FILTER", "kind=cpu")
    assert [g[0].decode() for g in got] == want(lambda l: l["kind"] == "cpu")
    for key, labels, sample in got:
        lab, samples = series[key.decode()]
        assert {a.decode(): b.decode() for a, b in labels} == lab
        assert [int(sample[0]), float(sample[1])] == list(samples[-1])
    sel = X(r).execute_command("TS.MGET", "SELECTED_LABELS", "host", "nothere", "FILTER", "kind=mem")
    assert all(labels[0][0] == b"host" and labels[1] == [b"nothere", None] for _, labels, _ in sel)
    # MRANGE with aggregation, and MREVRANGE with COUNT.
    got = X(r).execute_command("TS.MRANGE", 0, 40, "AGGREGATION", "sum", 10, "FILTER", "kind=cpu")
    for key, labels, samples in got:
        assert labels == []
        close(as_pairs(samples), reference_aggregation(series[key.decode()][1], 0, 40, "sum", 10))
    got = X(r).execute_command("TS.MREVRANGE", "-", "+", "COUNT", 2, "FILTER", "kind=mem")
    for key, _, samples in got:
        assert as_pairs(samples) == [(t, float(v)) for t, v in series[key.decode()][1][::-1][:2]]
    # GROUPBY host REDUCE max.
    got = X(r).execute_command("TS.MRANGE", "-", "+", "WITHLABELS", "FILTER", "kind=cpu", "GROUPBY", "host", "REDUCE", "max")
    for name, labels, samples in got:
        host = name.decode().split("=")[1]
        members = [k for k in want(lambda l: l["kind"] == "cpu" and l["host"] == host)]
        by_t = {}
        for k in members:
            for t, v in series[k][1]:
                by_t.setdefault(t, []).append(v)
        assert as_pairs(samples) == [(t, float(max(vs))) for t, vs in sorted(by_t.items())]
        assert dict((a.decode(), b.decode()) for a, b in labels)["__source__"] == ",".join(members)


def test_index_follows_rename_copy_delete_and_expiry(r):
    ts = r.ts()
    ts.create("{i}a", labels={"g": "1"})
    ts.add("{i}a", 1, 1)
    assert X(r).execute_command("TS.QUERYINDEX", "g=1") == [b"{i}a"]
    r.rename("{i}a", "{i}b")
    assert X(r).execute_command("TS.QUERYINDEX", "g=1") == [b"{i}b"]
    r.copy("{i}b", "{i}c")
    assert X(r).execute_command("TS.QUERYINDEX", "g=1") == [b"{i}b", b"{i}c"]
    assert L(ts.range("{i}c", "-", "+")) == [[1, 1.0]]
    r.delete("{i}b")
    assert X(r).execute_command("TS.QUERYINDEX", "g=1") == [b"{i}c"]
    r.set("{i}c", "now a string")
    assert X(r).execute_command("TS.QUERYINDEX", "g=1") == []
    ts.create("x", labels={"g": "2"})
    r.pexpire("x", 1)
    import time
    time.sleep(0.05)
    assert X(r).execute_command("TS.QUERYINDEX", "g=2") == []
    ts.create("y", labels={"g": "3"})
    ts.alter("y", labels={"g": "4"})
    assert X(r).execute_command("TS.QUERYINDEX", "g=3") == []
    assert X(r).execute_command("TS.QUERYINDEX", "g=4") == [b"y"]


# ---------------------------------------------------------------------------
# waterfall


def waterfall_reference(series, frm, to, sources, source_label="source"):
    """{group key: [(t, v, source)]} from {key: (labels, samples)}."""
    groups = {}
    for key, (labels, samples) in sorted(series.items()):
        src = labels.get(source_label)
        if src not in sources:
            continue
        group = tuple(sorted((l, v) for l, v in labels.items() if l != source_label))
        groups.setdefault(group, []).append((sources.index(src), key, samples))
    out = {}
    for group, members in groups.items():
        members.sort()
        points = {}
        for rank, _, samples in members:
            for t, v in samples:
                if frm <= t <= to and t not in points:
                    points[t] = (v, sources[rank])
        name = ",".join("%s=%s" % lv for lv in group)
        out[name] = [(t, points[t][0], points[t][1]) for t in sorted(points)]
    return out


def test_waterfall_matches_a_python_reference(r):
    rnd = random.Random(24)
    sources = ["vendorA", "exchange", "vendorB", "internal", "manual"]
    series = {}
    pipe = r.pipeline(transaction=False)
    for inst in ["IBM", "AAPL", "MSFT", "GOOG", "ORCL", "SAP"]:
        for field in ["px_last", "px_open"]:
            for src in sources:
                if inst == "ORCL" and src in ("vendorA", "exchange"):
                    continue  # sources absent for a whole instrument
                coverage = rnd.uniform(0.3, 0.95)
                samples = [(d, round(100 + rnd.gauss(0, 5), 4)) for d in range(0, 60) if rnd.random() < coverage]
                key = "%s:%s:%s" % (inst, field, src)
                labels = {"instrument": inst, "field": field, "source": src}
                series[key] = (labels, samples)
                pipe.execute_command("TS.CREATE", key, "LABELS", *[x for kv in labels.items() for x in kv])
                for t, v in samples:
                    pipe.execute_command("TS.ADD", key, t, v)
    # A series of another source and one without the source label: ignored.
    pipe.execute_command("TS.CREATE", "IBM:px_last:other", "LABELS", "instrument", "IBM", "field", "px_last", "source", "other")
    pipe.execute_command("TS.ADD", "IBM:px_last:other", 5, -1)
    pipe.execute()
    for order in (sources, ["manual", "vendorB"], sources[::-1]):
        for frm, to in ((0, 59), (10, 20), (33, 33)):
            got = X(r).execute_command("TS.WATERFALL", frm, to, "SOURCES", *order,
                                    "FILTER", "instrument=(IBM,AAPL,ORCL,SAP)", "field=(px_last,px_open)", "WITHSOURCE")
            want = waterfall_reference({k: v for k, v in series.items() if v[0]["instrument"] in ("IBM", "AAPL", "ORCL", "SAP")},
                                       frm, to, order)
            want = {k: v for k, v in want.items() if v or True}
            got_map = {}
            for name, labels, points in got:
                got_map[name.decode()] = [(int(p[0]), float(p[1]), p[2].decode()) for p in points]
                assert dict((a.decode(), b.decode()) for a, b in labels) == dict(x.split("=") for x in name.decode().split(","))
            assert got_map == want
    # Without WITHSOURCE: [t, v] points; a custom source label; LATEST accepted.
    got = X(r).execute_command("TS.WATERFALL", "-", "+", "SOURCES", "exchange", "FILTER", "instrument=IBM", "field=px_last")
    assert len(got) == 1 and all(len(p) == 2 for p in got[0][2])
    X(r).execute_command("TS.CREATE", "alt", "LABELS", "instrument", "X", "feed", "f1")
    X(r).execute_command("TS.ADD", "alt", 1, 1)
    got = X(r).execute_command("TS.WATERFALL", "-", "+", "SOURCES", "f1", "SOURCELABEL", "feed", "FILTER", "instrument=X", "LATEST")
    assert got == [[b"instrument=X", [[b"instrument", b"X"]], [[1, b"1"]]]]


def test_waterfall_over_many_groups_matches_a_python_reference(r):
    # 17,000 groups: past the 16,384 from which the server merges the shards' parts in two
    # halves on two threads; the reply, in order, against the reference.
    rnd = random.Random(17)
    sources = ["exchange", "vendorA", "vendorB"]
    series = {}
    pipe = r.pipeline(transaction=False)
    for i in range(17000):
        for src in sources:
            samples = [(d, round(50 + rnd.random() * 10, 3)) for d in range(6) if rnd.random() < 0.6]
            key = "m%d:%s" % (i, src)
            labels = {"instrument": "M%05d" % i, "set": "many", "source": src}
            series[key] = (labels, samples)
            pipe.execute_command("TS.CREATE", key, "LABELS", *[x for kv in labels.items() for x in kv])
            if samples:
                pipe.execute_command("TS.MADD", *[x for t, v in samples for x in (key, t, v)])
    pipe.execute()
    for frm, to in ((3, 3), (0, 5)):
        got = X(r).execute_command("TS.WATERFALL", frm, to, "SOURCES", *sources, "FILTER", "set=many", "WITHSOURCE")
        want = waterfall_reference(series, frm, to, sources)
        assert [name.decode() for name, _, _ in got] == sorted(want)
        for name, _, points in got:
            assert [(int(p[0]), float(p[1]), p[2].decode()) for p in points] == want[name.decode()]


def test_waterfall_ties_across_shards_order_and_resp3(r):
    # Two series of one group and one source on different shards: at a timestamp both have,
    # the smaller key wins; a better source on a third series wins over both. Groups come
    # out in the order of their names, whichever shard holds their members.
    a, b = sorted([key_on(0, "tie"), key_on(1, "tie")])
    c = key_on(1, "best")
    for k, src in ((a, "vendorA"), (b, "vendorA"), (c, "exchange")):
        X(r).execute_command("TS.CREATE", k, "LABELS", "instrument", "T", "source", src)
    for t, va, vb in ((1, 10, 20), (2, 11, 21), (3, None, 22)):
        if va is not None:
            X(r).execute_command("TS.ADD", a, t, va)
        X(r).execute_command("TS.ADD", b, t, vb)
    X(r).execute_command("TS.ADD", c, 2, 99)
    for inst in ("Z", "M", "B"):
        X(r).execute_command("TS.CREATE", key_on(0, inst), "LABELS", "instrument", inst, "source", "vendorA")
        X(r).execute_command("TS.ADD", key_on(0, inst), 1, 1)
    args = ["TS.WATERFALL", "-", "+", "SOURCES", "exchange", "vendorA", "FILTER", "instrument=(T,Z,M,B)", "WITHSOURCE"]
    got = X(r).execute_command(*args)
    assert [g[0] for g in got] == [b"instrument=B", b"instrument=M", b"instrument=T", b"instrument=Z"]
    assert got[2][2] == [[1, b"10", b"vendorA"], [2, b"99", b"exchange"], [3, b"22", b"vendorA"]]
    # One timestamp: each shard returns its first member in precedence order that has it,
    # and the connection picks across shards by the same rule.
    for t, want in ((1, [[1, b"10", b"vendorA"]]), (2, [[2, b"99", b"exchange"]]), (3, [[3, b"22", b"vendorA"]]), (4, [])):
        one = X(r).execute_command("TS.WATERFALL", t, t, *args[3:])
        assert [g[0] for g in one] == [g[0] for g in got]
        assert one[2][2] == want, t
    kw = r.connection_pool.connection_kwargs
    r3 = redis.Redis(host=kw["host"], port=kw["port"], protocol=3)
    r3.response_callbacks = {}
    got3 = r3.execute_command(*args)
    assert list(got3) == [g[0] for g in got]
    assert got3[b"instrument=T"] == [{b"instrument": b"T"}, [[1, 10.0, b"vendorA"], [2, 99.0, b"exchange"], [3, 22.0, b"vendorA"]]]
    assert X(r).execute_command("TS.QUERYINDEX", "instrument=(T,B)") == sorted(k.encode() for k in (a, b, c, key_on(0, "B")))
    r3.close()


def test_large_waterfall_reply_in_a_pipeline(r):
    # A reply over 1 MiB is taken as the connection's output buffer when nothing waits before
    # it, and copied after what does: both ways, in one pipeline, the same bytes as alone,
    # and the replies around it intact (RESP2 and RESP3).
    pipe = r.pipeline(transaction=False)
    for i in range(2000):
        for src in ("vendorA", "exchange"):
            key = "big:%d:%s" % (i, src)
            pipe.execute_command("TS.CREATE", key, "LABELS", "instrument", "I%d" % i, "set", "big", "source", src)
            pipe.execute_command("TS.MADD", *[x for t in range(20) if (t + i) % 3 or src == "vendorA" for x in (key, t, i + 1 + t / 4)])
    pipe.execute()
    args = ["TS.WATERFALL", 0, 19, "SOURCES", "exchange", "vendorA", "FILTER", "set=big", "WITHSOURCE"]
    kw = r.connection_pool.connection_kwargs
    for proto in (2, 3):
        c = RespClient(kw["host"], kw["port"])
        if proto == 3:
            c.send(encode_command("HELLO", "3"))
            c.read_reply()
        c.send(encode_command(*args))
        alone = c.read_reply()
        assert len(alone) == 2000
        c.send(b"".join(encode_command(*a) for a in (args, ["PING"], args, ["ECHO", "after"])))
        assert c.read_reply() == alone  # first in the pipeline: adopted
        assert c.read_reply() == "PONG"
        assert c.read_reply() == alone  # behind a PONG: copied
        assert c.read_reply() == b"after"
        c.sock.close()
    raw = socket.create_connection((kw["host"], kw["port"]))
    raw.sendall(encode_command(*args) + encode_command("PING"))
    buf = b""
    while not buf.endswith(b"+PONG\r\n"):
        buf += raw.recv(1 << 20)
    raw.close()
    assert len(buf) > 1 << 20
    got = {name: points for name, _, points in X(r).execute_command(*args)}
    for i in (0, 7, 1999):
        want = [[t, repr(i + 1 + t / 4).removesuffix(".0").encode(), b"exchange" if (t + i) % 3 else b"vendorA"] for t in range(20)]
        assert got[b"instrument=I%d,set=big" % i] == want


def test_waterfall_errors(r):
    X(r).execute_command("TS.CREATE", "w", "LABELS", "instrument", "IBM", "source", "a")
    assert err_of(r.execute_command, "TS.WATERFALL", 0, 10, "SOURCES", "FILTER", "instrument=IBM") == "TSDB: SOURCES needs at least one source"
    assert err_of(r.execute_command, "TS.WATERFALL", 10, 0, "SOURCES", "a", "FILTER", "instrument=IBM") == "TSDB: the range start is after its end"
    assert err_of(r.execute_command, "TS.WATERFALL", 0, 10, "SOURCES", "a", "SOURCELABEL", "nope", "FILTER", "instrument=IBM") \
        == "TSDB: no series matching the filter has the source label 'nope'"
    assert err_of(r.execute_command, "TS.WATERFALL", 0, 10, "SOURCES", "a", "a", "FILTER", "instrument=IBM") == "TSDB: source 'a' is given twice"
    assert err_of(r.execute_command, "TS.WATERFALL", 0, 10, "SOURCES", "a", "FILTER", "instrument!=IBM") == "TSDB: please provide at least one matcher"
    assert err_of(r.execute_command, "TS.WATERFALL", "x", 10, "SOURCES", "a", "FILTER", "instrument=IBM") == "TSDB: wrong fromTimestamp"


# ---------------------------------------------------------------------------
# persistence


def ts_dump(r):
    out = {}
    for k in sorted(r.keys("*")):
        info = X(r).execute_command("TS.INFO", k)
        info = dict(zip(info[::2], info[1::2]))
        del info[b"memoryUsage"]
        out[k] = (repr(info), X(r).execute_command("TS.RANGE", k, "-", "+"))
    return out


def test_series_and_rules_survive_restart_and_crash(data_dir):  # noqa: F811
    n = node(data_dir).start()
    r = n.client()
    X(r).execute_command("TS.CREATE", "{p}src", "RETENTION", 100000, "DUPLICATE_POLICY", "sum", "LABELS", "a", "1")
    X(r).execute_command("TS.CREATE", "{p}dst", "LABELS", "a", "2")
    X(r).execute_command("TS.CREATERULE", "{p}src", "{p}dst", "AGGREGATION", "sum", 10)
    for t in range(0, 200, 3):
        X(r).execute_command("TS.ADD", "{p}src", t, t * 0.5)
    X(r).execute_command("TS.ADD", "{p}src", 50, 1)  # a duplicate, summed
    X(r).execute_command("TS.INCRBY", "ctr", 5)  # the server's clock, logged as a timestamp
    before = ts_dump(r)
    n.term()
    n.start()
    r = n.client()
    assert ts_dump(r) == before, "clean restart (log only)"
    r.bgsave()
    wait_snapshot(r)
    X(r).execute_command("TS.ADD", "{p}src", 300, 1)
    before = ts_dump(r)
    n.kill()
    n.start()
    r = n.client()
    assert ts_dump(r) == before, "snapshot + log after a crash"
    # The rule still runs after recovery, and the index answers.
    X(r).execute_command("TS.ADD", "{p}src", 400, 1)
    assert X(r).execute_command("TS.RANGE", "{p}dst", 300, 300) == [[300, b"1"]]
    assert X(r).execute_command("TS.QUERYINDEX", "a=(1,2)") == [b"{p}dst", b"{p}src"]
    # The waterfall's groups (kept by the index, rebuilt from the loaded series) answer too:
    # one group (no label but the source label `a`), src's points first, then dst's.
    pts = {int(t): v for t, v in X(r).execute_command("TS.RANGE", "{p}dst", "-", "+")}
    pts.update({int(t): v for t, v in X(r).execute_command("TS.RANGE", "{p}src", "-", "+")})
    got = X(r).execute_command("TS.WATERFALL", "-", "+", "SOURCES", "1", "2", "SOURCELABEL", "a", "FILTER", "a=(1,2)")
    assert got == [[b"", [], [[t, pts[t]] for t in sorted(pts)]]]


# ---------------------------------------------------------------------------
# against the module


@pytest.fixture(scope="module")
def module_pair():
    if not MODULE or not os.path.exists(MODULE):
        pytest.skip("no RedisTimeSeries module: build v1.10.24 (github.com/RedisTimeSeries/RedisTimeSeries, "
                    "`make build`) and set REDISTIMESERIES_SO to its redistimeseries.so")
    rs = ServerProcess("redis", ["--loadmodule", MODULE])
    rs.start()
    try:
        ab = ServerProcess("abacus", ["--appendonly", "no", "--save", ""])
        ab.start()
        try:
            yield _client(rs), _client(ab)
        finally:
            ab.stop()
    finally:
        rs.stop()


def _module_script():
    cmds = [
        ["TS.CREATE", "s", "LABELS", "k", "v", "n", "1"],
        ["TS.CREATE", "s"], ["TS.CREATE", "e1", "LABELS", "a", "b", "c"], ["TS.CREATE", "e2", "FOO"],
        ["TS.CREATE", "e3", "LABELS", "a", "b", "RETENTION", "5"], ["TS.CREATE", "e4", "RETENTION"],
        ["TS.CREATE", "e5", "RETENTION", "-1"], ["TS.CREATE", "e6", "CHUNK_SIZE", "x"], ["TS.CREATE", "e7", "ENCODING", "foo"],
        ["TS.CREATE", "u", "ENCODING", "UNCOMPRESSED", "DUPLICATE_POLICY", "MAX", "CHUNK_SIZE", "128"],
    ]
    for i in [1, 2, 3, 5, 8, 13, 21, 22, 23, 40, 41, 60, 75, 90]:
        cmds.append(["TS.ADD", "s", str(i), "%d.5" % ((i * 37) % 17)])
    cmds += [["TS.ADD", "s", "5", "1"], ["TS.ADD", "s", "5", "2", "ON_DUPLICATE", "SUM"], ["TS.ADD", "u", "1", "1"], ["TS.ADD", "u", "1", "3"],
             ["TS.ADD", "s", "x", "1"], ["TS.ADD", "s", "1", "x"], ["TS.ADD", "s", "-1", "1"], ["TS.ADD", "s", "1", "inf"],
             ["TS.ADD", "s", "1", "1", "ON_DUPLICATE", "foo"], ["SET", "str", "1"], ["TS.ADD", "str", "1", "1"], ["TS.GET", "str"],
             ["TS.INCRBY", "i", "5", "TIMESTAMP", "10"], ["TS.INCRBY", "i", "2.5", "TIMESTAMP", "10"], ["TS.DECRBY", "i", "1", "TIMESTAMP", "20"],
             ["TS.INCRBY", "i", "1", "TIMESTAMP", "1"], ["TS.INCRBY", "i", "x"],
             ["TS.MADD", "s", "100", "1", "i", "30", "2", "nosuch", "1", "1"], ["TS.DEL", "s", "100", "100"], ["TS.DEL", "s", "1000", "2000"],
             ["TS.RANGE", "s", "-", "+"], ["TS.REVRANGE", "s", "-", "+", "COUNT", "3"], ["TS.RANGE", "s", "10", "5"], ["TS.RANGE", "nokey", "-", "+"],
             ["TS.RANGE", "s", "-", "+", "FILTER_BY_TS", "3", "5", "7", "40", "FILTER_BY_VALUE", "0", "10"],
             ["TS.GET", "s"], ["TS.GET", "i"], ["TS.GET", "nokey"], ["TS.ALTER", "nokey", "RETENTION", "5"],
             ["TS.ALTER", "u", "LABELS", "x", "y"], ["TS.ALTER", "u", "DUPLICATE_POLICY", "LAST"], ["TS.ALTER", "u", "CHUNK_SIZE", "7"]]
    for agg in ["avg", "sum", "min", "max", "range", "count", "first", "last", "twa"]:
        cmds += [["TS.RANGE", "s", "-", "+", "AGGREGATION", agg, "10"],
                 ["TS.RANGE", "s", "4", "70", "AGGREGATION", agg, "10", "EMPTY"],
                 ["TS.REVRANGE", "s", "4", "70", "ALIGN", "start", "AGGREGATION", agg, "10", "BUCKETTIMESTAMP", "mid"],
                 ["TS.RANGE", "s", "4", "70", "ALIGN", "3", "AGGREGATION", agg, "10", "BUCKETTIMESTAMP", "+", "COUNT", "2"]]
    for bad in [["COUNT", "x"], ["COUNT", "0"], ["AGGREGATION", "foo", "10"], ["AGGREGATION", "avg", "0"], ["AGGREGATION", "avg"],
                ["ALIGN", "5"], ["AGGREGATION", "avg", "10", "ALIGN", "x"], ["FILTER_BY_VALUE", "1"], ["FILTER_BY_VALUE", "x", "1"],
                ["FILTER_BY_TS"], ["AGGREGATION", "avg", "10", "BUCKETTIMESTAMP", "x"], ["AGGREGATION", "avg", "10", "EMPTY", "BUCKETTIMESTAMP", "-"]]:
        cmds.append(["TS.RANGE", "s", "-", "+"] + bad)
    cmds += [["TS.RANGE", "s", "5", "x"], ["TS.RANGE", "s", "-5", "10"],
             ["TS.CREATE", "{r}a"], ["TS.CREATE", "{r}b"], ["TS.CREATERULE", "{r}a", "{r}b", "AGGREGATION", "avg", "10"],
             ["TS.CREATERULE", "{r}a", "{r}a", "AGGREGATION", "avg", "10"], ["TS.CREATERULE", "{r}a", "{r}nokey", "AGGREGATION", "avg", "10"]]
    for t in range(0, 100, 7):
        cmds.append(["TS.ADD", "{r}a", str(t), str(t % 5)])
    cmds += [["TS.RANGE", "{r}b", "-", "+"], ["TS.RANGE", "{r}b", "-", "+", "LATEST"], ["TS.GET", "{r}b", "LATEST"], ["TS.GET", "{r}b"],
             ["TS.DELETERULE", "{r}a", "{r}b"], ["TS.DELETERULE", "{r}a", "{r}b"],
             ["TS.MGET", "FILTER", "k=v"], ["TS.MGET", "WITHLABELS", "FILTER", "k=v"], ["TS.MGET", "SELECTED_LABELS", "n", "zz", "FILTER", "k=v"],
             ["TS.MGET", "FILTER", "a"], ["TS.MGET", "FILTER", "k!=v"], ["TS.QUERYINDEX", "a=b"], ["TS.QUERYINDEX", "a=(b,c)", "x="],
             ["TS.QUERYINDEX", "x=y"], ["TS.MRANGE", "-", "+", "FILTER"], ["TS.MRANGE", "-", "+", "WITHLABELS", "FILTER", "k=v"],
             ["TS.MRANGE", "-", "+", "AGGREGATION", "max", "20", "FILTER", "k=v"],
             ["TS.MREVRANGE", "-", "+", "COUNT", "2", "FILTER", "k=v"],
             ["TS.MRANGE", "-", "+", "FILTER", "k=v", "GROUPBY", "k", "REDUCE", "max"],
             ["TS.MRANGE", "-", "+", "WITHLABELS", "FILTER", "k=v", "GROUPBY", "k", "REDUCE", "sum"],
             ["TS.MRANGE", "-", "+", "SELECTED_LABELS", "k", "zz", "FILTER", "k=v", "GROUPBY", "k", "REDUCE", "min"],
             ["TS.MRANGE", "-", "+", "FILTER", "k=v", "GROUPBY", "k", "REDUCE", "foo"],
             ["TYPE", "s"], ["OBJECT", "ENCODING", "s"]]
    # Label and filter syntax, option edge cases, AVG near DBL_MAX.
    cmds += [["TS.MGET", "FILTER", "class=("], ["TS.MGET", "FILTER", "k=("], ["TS.MGET", "FILTER", "k=(v"], ["TS.MGET", "FILTER", "k=v)"],
             ["TS.CREATE", "l1", "LABELS", "a", "b(c"], ["TS.CREATE", "l2", "LABELS", "a", "b,c"], ["TS.CREATE", "l3", "LABELS", "a", ")"],
             ["TS.CREATE", "l4", "LABELS", "a(", "b"], ["TS.CREATE", "l5", "LABELS", "a", "b=c"], ["TS.ALTER", "l4", "LABELS", "a", "x,y"],
             ["TS.ADD", "l6", "1", "1", "LABELS", "a", "(b"],
             ["TS.MRANGE", "-", "+", "WITHLABELS", "SELECTED_LABELS", "k", "FILTER", "k=v"], ["TS.MGET", "SELECTED_LABELS", "FILTER", "k=v"],
             ["TS.ADD", "l7", "1", "1", "ON_DUPLICATE"], ["TS.CREATE", "l8", "DUPLICATE_POLICY"], ["TS.CREATE", "l9", "DUPLICATE_POLICY", "x"],
             ["TS.ADD", "big", "1", "1.7976931348623157E308"], ["TS.ADD", "big", "2", "1.7976931348623157E308"],
             ["TS.RANGE", "big", "-", "+", "AGGREGATION", "avg", "10"]]
    return cmds


def test_replies_match_the_module(module_pair):
    cr, ca = module_pair
    for c in (cr, ca):
        c.flushall()
    for cmd in _module_script():
        want, got = _run(cr, cmd), _run(ca, cmd)
        assert got == want, "%s: module %r, abacus %r" % (" ".join(cmd), want, got)
    for key in ("s", "u", "e3", "i", "{r}a", "{r}b"):
        want, got = _run(cr, ["TS.INFO", key]), _run(ca, ["TS.INFO", key])
        # memoryUsage is each implementation's own accounting.
        want[3] = got[3] = 0
        assert got == want, key


def matcher_holds(m, lab):
    """A FILTER matcher (`l=v`, `l=(a,b)`, `l=`, `l!=v`, `l!=(a,b)`, `l!=`) on a label dict."""
    name, value = m.split("=", 1)
    neg = name.endswith("!")
    name = name.rstrip("!")
    if not value:
        return (name in lab) if neg else (name not in lab)
    values = value[1:-1].split(",") if value.startswith("(") else [value]
    return (lab.get(name) not in values) if neg else (lab.get(name) in values)


def test_index_stays_consistent_with_the_keyspace_under_random_operations(r):
    """The label index answers FILTER from each series' registered labels (no second check
    of the live labels), so it must follow every way a key changes: random TS.CREATE,
    TS.ALTER (new labels), RENAME, COPY, DEL, overwrite by a string, RESTORE, expiry and
    FLUSHDB, on keys of both shards, each followed by queries with every matcher kind
    checked against a model of the keyspace."""
    rnd = random.Random(2424)
    model = {}  # key -> labels of the series there

    def labels():
        out = {"g": rnd.choice("abc")}
        if rnd.random() < 0.6:
            out["h"] = rnd.choice("xy")
        return out

    def check():
        for f in (["g=a"], ["g=(a,b)"], ["g=(a,b,c)", "h=x"], ["g=(a,c)", "h!=x"], ["g=b", "h="],
                  ["g=(a,b,c)", "h!="], ["g!=a", "h=(x,y)"], ["g=(a,b,c)", "h!=(x,y)"]):
            want = sorted(k for k, lab in model.items() if all(matcher_holds(m, lab) for m in f))
            got = sorted(k.decode() for k in X(r).execute_command("TS.QUERYINDEX", *f))
            assert got == want, (f, model)
            mget = sorted(row[0].decode() for row in X(r).execute_command("TS.MGET", "FILTER", *f))
            assert mget == want, f

    keys = ["{%s}k%d" % (tag, i) for tag in ("p", "q") for i in range(6)]
    for step in range(300):
        k = rnd.choice(keys)
        op = rnd.randrange(9)
        if op == 0 and k not in model:
            lab = labels()
            r.delete(k)  # it may hold a string
            r.ts().create(k, labels=lab)
            r.ts().add(k, step + 1, step)
            model[k] = lab
        elif op == 1 and k in model:
            lab = labels()
            r.ts().alter(k, labels=lab)
            model[k] = lab
        elif op == 2 and k in model:
            dst = rnd.choice([x for x in keys if x[:3] == k[:3]])
            r.rename(k, dst)
            model[dst] = model.pop(k)
        elif op == 3 and k in model:
            dst = rnd.choice([x for x in keys if x[:3] == k[:3]])
            if dst != k:
                r.copy(k, dst, replace=True)
                model[dst] = dict(model[k])
        elif op == 4:
            r.delete(k)
            model.pop(k, None)
        elif op == 5:
            r.set(k, "a string")
            model.pop(k, None)
        elif op == 6 and k in model:
            dst = rnd.choice(keys)
            dump = r.dump(k)
            r.restore(dst, 0, dump, replace=True)
            model[dst] = dict(model[k])
        elif op == 7 and k in model and rnd.random() < 0.3:
            r.pexpire(k, 1)
            time.sleep(0.005)
            model.pop(k)
        elif op == 8 and rnd.random() < 0.03:
            r.flushdb()
            model.clear()
        check()


def live_series(c):
    """{key: (labels, samples)} of every series in `c`'s database, read from the keyspace."""
    out = {}
    for k in c.scan_iter(count=1000):
        if c.type(k) != b"TSDB-TYPE":
            continue
        info = X(c).execute_command("TS.INFO", k)
        info = dict(zip(info[::2], info[1::2]))
        labels = {a.decode(): b.decode() for a, b in info[b"labels"]}
        samples = [(int(t), float(v)) for t, v in X(c).execute_command("TS.RANGE", k, "-", "+")]
        out[k.decode()] = (labels, samples)
    return out


def test_waterfall_and_index_follow_every_removal_and_rename_path(r):
    """The index keeps each series' group and source value in arrays by id (the waterfall's
    groups), updated only when labels are registered, and finds out lazily that a key went:
    so every way a series key goes, moves or changes (DEL, UNLINK, RENAME, COPY within and
    across databases, MOVE, SWAPDB, FLUSHDB, a string over it, RESTORE, expiry, TS.ALTER,
    eviction) is followed by TS.WATERFALL and TS.QUERYINDEX checked against a model in both
    databases, and the model against the keyspace."""
    rnd = random.Random(2427)
    kw = r.connection_pool.connection_kwargs
    dbs = [r, redis.Redis(host=kw["host"], port=kw["port"], db=1)]
    dbs[1].flushdb()
    models = [{}, {}]  # per database: key -> (labels, samples)
    trnd = random.Random(24)  # the one-timestamp requests' times (rnd's draws stay as they were)
    sources = ["s1", "s2", "s3"]
    filt = ["instrument=(A,B,C)", "field=(f1,f2)"]

    def labels():
        lab = {"instrument": rnd.choice("ABC"), "field": rnd.choice(["f1", "f2"])}
        p = rnd.random()
        if p < 0.8:
            lab["source"] = rnd.choice(sources)
        elif p < 0.9:
            lab["source"] = "other"  # not among SOURCES
        if rnd.random() < 0.15:
            lab["extra"] = "y"  # a group of its own
        return lab

    def check(tag):
        for d in (0, 1):
            c, model = dbs[d], models[d]
            assert live_series(c) == model, (tag, d)
            want_keys = sorted(model)
            assert sorted(k.decode() for k in X(c).execute_command("TS.QUERYINDEX", *filt)) == want_keys, (tag, d)
            # One timestamp (the shards' early-stopping walk) first, while stale ids are still
            # in the index (a query forgets those it looks up); 45 is past every sample.
            t = trnd.choice([trnd.randrange(0, 40), 45])
            for order, (frm, to) in ((sources[1:] + sources[:1], (t, t)), (sources, (0, 40)), (sources[::-1], (5, 12))):
                args = ["TS.WATERFALL", frm, to, "SOURCES", *order, "FILTER", *filt, "WITHSOURCE"]
                if not any("source" in lab for lab, _ in model.values()):
                    with pytest.raises(redis.ResponseError, match="source label"):
                        X(c).execute_command(*args)
                    continue
                got = X(c).execute_command(*args)
                names = [name.decode() for name, _, _ in got]
                assert names == sorted(names), (tag, d)
                got_map = {name.decode(): [(int(p[0]), float(p[1]), p[2].decode()) for p in pts] for name, _, pts in got}
                assert got_map == waterfall_reference(model, frm, to, order), (tag, d, order)

    def create(d, k):
        lab = labels()
        samples = sorted({rnd.randrange(0, 40): round(rnd.uniform(1, 100), 2) for _ in range(rnd.randrange(1, 8))}.items())
        c = X(dbs[d])
        c.delete(k)
        c.execute_command("TS.CREATE", k, "LABELS", *[x for kv in lab.items() for x in kv])
        c.execute_command("TS.MADD", *[x for t, v in samples for x in (k, t, v)])
        models[d][k] = (lab, samples)

    keys = ["{%s}k%d" % (tag, i) for tag in ("p", "q") for i in range(8)]
    for k in keys[::2]:
        create(0, k)
    check("start")
    for step in range(160):
        k = rnd.choice(keys)
        d = rnd.randrange(2) if rnd.random() < 0.3 else 0
        c, model, other = dbs[d], models[d], models[1 - d]
        op = rnd.choice(["create", "alter", "add", "del", "unlink", "rename", "copy", "copydb", "move",
                         "swapdb", "set", "restore", "expire", "flushdb"])
        if op == "create" and k not in model:
            create(d, k)
        elif op == "alter" and k in model:
            lab = labels()
            c.execute_command("TS.ALTER", k, "LABELS", *[x for kv in lab.items() for x in kv])
            model[k] = (lab, model[k][1])
        elif op == "add" and k in model:
            t, v = rnd.randrange(0, 40), float(rnd.randrange(1000))
            c.execute_command("TS.ADD", k, t, v, "ON_DUPLICATE", "last")
            model[k] = (model[k][0], sorted(dict(model[k][1] + [(t, v)]).items()))
        elif op in ("del", "unlink"):
            (c.delete if op == "del" else c.unlink)(k)
            model.pop(k, None)
        elif op == "rename" and k in model:
            dst = rnd.choice([x for x in keys if x[:3] == k[:3]])
            c.rename(k, dst)
            model[dst] = model.pop(k)
        elif op == "copy" and k in model:
            dst = rnd.choice([x for x in keys if x[:3] == k[:3]])
            if dst != k:
                c.copy(k, dst, replace=True)
                model[dst] = model[k]
        elif op == "copydb" and k in model:
            c.copy(k, k, destination_db=1 - d, replace=True)
            other[k] = model[k]
        elif op == "move" and k in model:
            if c.move(k, 1 - d):
                other[k] = model.pop(k)
            else:
                assert k in other
        elif op == "swapdb" and rnd.random() < 0.3:
            c.swapdb(0, 1)
            models.reverse()
        elif op == "set":
            c.set(k, "a string")
            model.pop(k, None)
        elif op == "restore" and k in model:
            dst = rnd.choice(keys)
            c.restore(dst, 0, c.dump(k), replace=True)
            model[dst] = model[k]
        elif op == "expire" and k in model and rnd.random() < 0.5:
            c.pexpire(k, 1)
            time.sleep(0.005)
            model.pop(k)
        elif op == "flushdb" and rnd.random() < 0.05:
            c.flushdb()
            model.clear()
        else:
            continue
        check((step, op, d, k))
    # Eviction: series go by the policy, not by a command; the answers follow the keyspace.
    for k in keys:
        if k not in models[0]:
            create(0, k)
    check("before eviction")
    policy = list(r.config_get("maxmemory-policy").values())[0]
    try:
        used = int(r.info("memory")["used_memory"])
        r.config_set("maxmemory-policy", "allkeys-random")
        r.config_set("maxmemory", used + 64 * 1024)
        for i in range(400):
            r.set("filler%d" % i, "x" * 4096)
            if len(live_series(dbs[0])) < len(keys):
                break
    finally:
        r.config_set("maxmemory", 0)
        r.config_set("maxmemory-policy", policy)
    # allkeys-random picks from every database, so db 1's series may go too.
    models = [live_series(dbs[0]), live_series(dbs[1])]
    assert 0 < len(models[0]) < len(keys), "some series were evicted"
    check("after eviction")
    dbs[1].flushdb()
