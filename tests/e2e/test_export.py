"""`abacus export` (issue 52): a running server's summaries, streams, time series and generic
keys to Parquet, read back with pyarrow and DuckDB and compared value for value with the
server's own answers (HGETALL / SUMMARY.QUERY / HLL bytes / SMEMBERS, XRANGE, TS.RANGE,
GET / HGETALL / SMEMBERS / ZRANGE / LRANGE). Sums are exact DECIMALs (compared as Python
Decimals with the server's text). Bad input (an unknown summary, a pattern matching nothing,
an unwritable path, a bad compression) fails with a clear message and a non-zero exit, and
leaves no file, not even a temporary one.
"""

import collections
import decimal
import os
import random
import shutil
import subprocess
import tempfile

import pytest

duckdb = pytest.importorskip("duckdb", reason="pip install -r tests/requirements.txt")
pq = pytest.importorskip("pyarrow.parquet", reason="pip install -r tests/requirements.txt")
import pyarrow as pa  # noqa: E402

from test_summarizer import ABACUS, Node  # noqa: E402

pytestmark = pytest.mark.abacus_only("abacus export is Abacus's")

DAY = 86400
START = 1_700_000_000

RULES = '''
[feed.sales]
format = "csv"
columns = ["ts", "campaign", "state", "user", "amount"]
time = { field = "ts", unit = "s" }

[[summary]]
name = "money"
feed = "sales"
dimensions = ["campaign", "state"]
bucket = "1d"
metrics = { n = "count", spend = "sum(amount)", lo = "min(amount)", hi = "max(amount)", last_user = "last(user)", users = "hll(user)", buyers = "distinct(user)" }

[[summary]]
name = "plain"
feed = "sales"
dimensions = ["state"]
bucket = "none"
metrics = { n = "count", spend = "sum(amount)", names = "distinct(campaign)" }
'''


@pytest.fixture(scope="module")
def workdir():
    d = tempfile.mkdtemp(prefix="abacus-export-")
    with open(os.path.join(d, "rules.toml"), "w") as f:
        f.write(RULES)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def node(workdir):
    data = os.path.join(workdir, "data")
    os.makedirs(data)
    n = Node(data, "--summarizer-rules", os.path.join(workdir, "rules.toml")).start()
    yield n
    n.stop()


@pytest.fixture
def rc(node):
    c = node.client()
    c.flushall()
    yield c
    c.close()


@pytest.fixture
def out(workdir):
    d = tempfile.mkdtemp(prefix="out-", dir=workdir)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def export(node, *args, check=True):
    p = subprocess.run([ABACUS, "export", "-q", "-p", str(node.p.port)] + [str(a) for a in args],
                       capture_output=True, text=True, timeout=300)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def load_sales(rc, n=5000, seed=52):
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        cents = rng.randrange(-500, 200_000)
        amount = "%s%d.%02d" % ("-" if cents < 0 else "", abs(cents) // 100, abs(cents) % 100)
        if rng.random() < 0.05:
            amount += "5"  # a third decimal now and then: the scale widens to 3
        user = rng.randrange(300) if rng.random() < 0.8 else "u%d" % rng.randrange(50)
        lines.append("%d,c%d,%s,%s,%s" % (START + rng.randrange(3 * DAY), rng.randrange(5), rng.choice(["CA", "NY", "T:X"]), user, amount))
    rc.execute_command("SUMMARY.INGEST", "sales", "\n".join(lines))


def test_summary_rows_equal_the_keys(rc, node, out):
    load_sales(rc)
    path = os.path.join(out, "money.parquet")
    export(node, "--summary", "money", "--out", path)
    t = pq.read_table(path)
    s = t.schema
    assert s.field("campaign").type == pa.string() and s.field("state").type == pa.string()
    assert s.field("bucket").type == pa.timestamp("ms", tz="UTC")
    assert s.field("n").type == pa.int64()
    assert s.field("spend").type == pa.decimal128(38, 3) and s.field("lo").type == pa.decimal128(38, 3)
    assert s.field("users").type == pa.binary() and s.field("buyers").type == pa.list_(pa.field("item", pa.string(), nullable=False))
    rows = t.to_pylist()
    keys = [k for k in rc.scan_iter(match="money:*", _type="hash")]
    assert len(rows) == len(keys) > 30
    for r in rows:
        esc = lambda v: v.replace("%", "%25").replace(":", "%3A")
        key = "money:%s:%s:%d" % (esc(r["campaign"]), esc(r["state"]), int(r["bucket"].timestamp()))
        h = {k.decode(): v.decode() for k, v in rc.hgetall(key).items()}
        assert r["n"] == int(h["n"])
        for m in ("spend", "lo", "hi"):
            assert r[m] == decimal.Decimal(h[m]), (key, m)
        assert str(r["last_user"]) == h["last_user"] or r["last_user"] == decimal.Decimal(h["last_user"])
        assert r["users"] == rc.get(key + ":users")
        assert sorted(r["buyers"]) == sorted(m.decode() for m in rc.smembers(key + ":buyers"))
    # DuckDB over the file gives SUMMARY.QUERY's answers, exactly.
    got = duckdb.sql("select campaign, sum(n)::bigint, sum(spend), min(lo), max(hi) from '%s' group by campaign order by campaign" % path).fetchall()
    want = [{k.decode(): v for k, v in zip(r[::2], r[1::2])} for r in rc.execute_command("SUMMARY.QUERY", "money", "GROUPBY", "campaign")]
    assert len(got) == len(want) == 5
    for (campaign, n, spend, lo, hi), w in zip(got, want):
        assert campaign == w["campaign"].decode() and n == w["n"]
        assert spend == decimal.Decimal(w["spend"].decode()) and str(spend) == w["spend"].decode()
        assert lo == decimal.Decimal(w["lo"].decode()) and hi == decimal.Decimal(w["hi"].decode())


def test_summary_range_and_no_bucket(rc, node, out):
    load_sales(rc, 2000, 7)
    path = os.path.join(out, "day.parquet")
    first = START - START % DAY
    export(node, "--summary", "money", "--from", first + DAY, "--to", first + 2 * DAY, "--out", path)
    buckets = {r["bucket"].timestamp() for r in pq.read_table(path).to_pylist()}
    assert buckets == {first + DAY}
    path = os.path.join(out, "plain.parquet")
    export(node, "--summary", "plain", "--out", path, "--compression", "snappy")
    f = pq.ParquetFile(path)
    assert "bucket" not in f.schema_arrow.names
    assert f.metadata.row_group(0).column(0).compression == "SNAPPY"
    got = {r["state"]: r for r in f.read().to_pylist()}
    want = [{k.decode(): v for k, v in zip(r[::2], r[1::2])} for r in rc.execute_command("SUMMARY.QUERY", "plain", "GROUPBY", "state")]
    assert sorted(got) == [w["state"].decode() for w in want]
    for w in want:
        g = got[w["state"].decode()]
        assert g["n"] == w["n"] and str(g["spend"]) == w["spend"].decode() and len(g["names"]) == w["names"]


def xrange_all(rc, key):
    return [(i.decode(), {k.decode(): v.decode() for k, v in f.items()}) for i, f in rc.xrange(key)]


def test_streams_nested_and_flat(rc, node, out):
    rng = random.Random(3)
    for u in range(200):
        for _ in range(rng.randrange(1, 12)):
            rc.xadd("user:%d" % u, {"channel": rng.choice(["ads", "mail", "é"]), "v": str(rng.random())})
    rc.set("user:not-a-stream", "x")
    rc.xadd("other", {"a": "b"})
    path = os.path.join(out, "streams.parquet")
    export(node, "--streams", "user:*", "--out", path)
    rows = pq.read_table(path).to_pylist()
    assert [r["key"] for r in rows] == sorted("user:%d" % u for u in range(200))
    for r in rows:
        want = xrange_all(rc, r["key"])
        assert [(e["id"], dict(e["fields"])) for e in r["entries"]] == want
    n = duckdb.sql("select count(*) from (select unnest(entries) from '%s')" % path).fetchall()[0][0]
    assert n == sum(rc.xlen("user:%d" % u) for u in range(200))
    flat = os.path.join(out, "flat.parquet")
    export(node, "--streams", "user:1*", "--flat", "--out", flat)
    got = [(r["key"], r["id"], dict(r["fields"])) for r in pq.read_table(flat).to_pylist()]
    want = [(k, i, f) for k in sorted(k.decode() for k in rc.scan_iter(match="user:1*", _type="stream")) for i, f in xrange_all(rc, k)]
    assert got == want


def test_series(rc, node, out):
    for s in range(5):
        rc.execute_command("TS.CREATE", "temp:%d" % s, "LABELS", "sensor", "temp", "room", "r%d" % s)
        for i in range(100):
            rc.execute_command("TS.ADD", "temp:%d" % s, 1_700_000_000_000 + i * 1000, (s * 100 + i) / 8)
    rc.execute_command("TS.CREATE", "hum:0", "LABELS", "sensor", "hum")
    rc.execute_command("TS.ADD", "hum:0", 1, 1)
    path = os.path.join(out, "series.parquet")
    export(node, "--series", "sensor=temp", "--out", path)
    t = pq.read_table(path)
    assert t.schema.field("ts").type == pa.timestamp("ms", tz="UTC") and t.schema.field("value").type == pa.float64()
    rows = t.to_pylist()
    got = collections.defaultdict(list)
    for r in rows:
        assert dict(r["labels"]) == {"sensor": "temp", "room": "r" + r["key"].split(":")[1]}
        got[r["key"]].append((int(r["ts"].timestamp() * 1000), r["value"]))
    assert sorted(got) == ["temp:%d" % s for s in range(5)]
    for k, samples in got.items():
        assert samples == [(ts, float(v)) for ts, v in rc.execute_command("TS.RANGE", k, "-", "+")]


def test_generic_keys_long_layout(rc, node, out):
    rc.set("g:s", b"\x00bytes")
    rc.hset("g:h", mapping={"f1": "v1", "f2": "v2"})
    rc.sadd("g:set", "a", "b", "3")
    rc.zadd("g:z", {"m1": 1.5, "m2": -2})
    rc.rpush("g:l", "x", "y", "x")
    rc.xadd("g:stream", {"a": "b"})
    path = os.path.join(out, "keys.parquet")
    p = export(node, "--keys", "g:*", "--out", path)
    assert "1 keys of other types skipped" in p.stderr
    rows = [(r["key"], r["type"], r["member"], r["value"], r["score"], r["index"]) for r in pq.read_table(path).to_pylist()]
    assert sorted(rows, key=repr) == sorted([
        ("g:s", "string", None, b"\x00bytes", None, None),
        ("g:h", "hash", b"f1", b"v1", None, None), ("g:h", "hash", b"f2", b"v2", None, None),
        ("g:set", "set", b"3", None, None, None), ("g:set", "set", b"a", None, None, None), ("g:set", "set", b"b", None, None, None),
        ("g:z", "zset", b"m2", None, -2.0, None), ("g:z", "zset", b"m1", None, 1.5, None),
        ("g:l", "list", None, b"x", None, 0), ("g:l", "list", None, b"y", None, 1), ("g:l", "list", None, b"x", None, 2),
    ], key=repr)


def test_bad_input_fails_and_leaves_nothing(rc, node, out):
    load_sales(rc, 100)
    path = os.path.join(out, "x.parquet")
    for args, msg in [
        (["--summary", "nope"], "no such summary 'nope' (the server's rules have: money, plain)"),
        (["--streams", "nothing:*"], "no stream key matches 'nothing:*'"),
        (["--keys", "nothing:*"], "no key matches 'nothing:*'"),
        (["--series", "sensor=none"], "no time series matches sensor=none"),
        (["--summary", "money", "--compression", "lz5"], "unknown compression 'lz5'"),
    ]:
        p = export(node, *args, "--out", path, check=False)
        assert p.returncode != 0 and msg in p.stderr, (args, p.stderr)
        assert os.listdir(out) == []
    p = export(node, "--summary", "money", "--out", os.path.join(out, "missing-dir", "x.parquet"), check=False)
    assert p.returncode != 0 and "cannot write" in p.stderr and os.listdir(out) == []
    # An existing file is replaced only by a complete export: a failed one leaves it as it was.
    with open(path, "wb") as f:
        f.write(b"old")
    p = export(node, "--summary", "nope", "--out", path, check=False)
    assert p.returncode != 0 and open(path, "rb").read() == b"old" and os.listdir(out) == ["x.parquet"]


def test_hll_blobs_read_by_postgresql_hll(rc, node, out):
    """The exported HLL BLOBs are postgresql-hll values: PostgreSQL's hll_cardinality of each
    equals HLL.CARD of its key, and round() of it is SUMMARY.QUERY's integer for the group."""
    url = os.environ.get("ABACUS_PG_URL")
    if not url:
        if os.environ.get("ABACUS_SKIP_PG") == "1":
            pytest.skip("ABACUS_SKIP_PG=1 and no ABACUS_PG_URL")
        pytest.fail("ABACUS_PG_URL is not set (see test_hll.py), or set ABACUS_SKIP_PG=1")
    from test_hll import psql, same_card
    load_sales(rc, 3000, 11)
    path = os.path.join(out, "hll.parquet")
    export(node, "--summary", "money", "--out", path)
    rows = pq.read_table(path).to_pylist()[:20]
    theirs = psql(url, ["select hll_cardinality('\\x%s'::hll), round(hll_cardinality('\\x%s'::hll));" % (r["users"].hex(), r["users"].hex()) for r in rows])
    for r, (card, rounded) in zip(rows, theirs):
        esc = lambda v: v.replace("%", "%25").replace(":", "%3A")
        b = int(r["bucket"].timestamp())
        key = "money:%s:%s:%d:users" % (esc(r["campaign"]), esc(r["state"]), b)
        assert same_card(float(rc.execute_command("HLL.CARD", key)), card)
        (q,) = rc.execute_command("SUMMARY.QUERY", "money", "FROM", b, "TO", b + 1, "WHERE", "campaign", r["campaign"], "state", r["state"])
        q = {k.decode(): v for k, v in zip(q[::2], q[1::2])}
        assert q["users"] == int(rounded)
