"""End-to-end tests of the summarizer (SUMMARY.* and `abacus ingest`).

Every summary is checked against an independent computation in Python over the same
generated events (counts, sums, minima, maxima, last values, exact distinct sets), key by
key and through SUMMARY.QUERY; every HLL metric's bytes against the existing HLL.* code fed
the same values (HLL.ADDINT / HLL.ADD), and, when ABACUS_PG_URL names a PostgreSQL with
postgresql-hll (see test_hll.py; ABACUS_SKIP_PG=1 skips it), against hll_add_agg over the
same rows. Costs are multiples of 1/4, so sums are exact in binary and compare exactly.
Also: the bad-input corpus (each kind of bad line rejected alone, nothing else changed),
rules errors with their line, WATCH, and exactly-once ingest across `kill -9` of the server
at random moments (10 rounds) against a clean single pass.
"""

import collections
import json
import math
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time

import pytest
import redis

from conftest import PORT_ATTEMPTS, REPO_ROOT, ServerProcess

pytestmark = pytest.mark.abacus_only("the summarizer is Abacus's")

ABACUS = os.environ.get("ABACUS_BIN") or os.path.join(REPO_ROOT, "target", "release", "abacus")
DAY = 86400
START = 1_700_000_000

RULES = '''
[feed.v1]
format = "csv"
columns = ["ts", "campaign", "user", "state", "event", "cost"]
time = { field = "ts", unit = "s" }

[feed.v2]
format = "jsonl"
time = { path = "$.time", unit = "ms" }
fields = { campaign = "$.ad.campaign", user = "$.user.id", sku = "$.items[*].sku" }

[[summary]]
name = "s_all"
feed = "v1"
dimensions = ["campaign"]
bucket = "1d"
metrics = { n = "count", spend = "sum(cost)", lo = "min(cost)", hi = "max(cost)", users = "hll(user)", exact = "distinct(user)" }

[[summary]]
name = "s_clicks"
feed = "v1"
where = "event = 'click' and cost > 1"
dimensions = ["campaign", "state"]
bucket = "1h"
metrics = { n = "count", exact = "distinct(user)" }

[[summary]]
name = "s_states"
feed = "v1"
where = "state in ('CA', 'NY') or not event != 'conversion'"
dimensions = ["state"]
bucket = "none"
metrics = { n = "count", last_user = "last(user)" }

[[summary]]
name = "s_sku"
feed = "v2"
dimensions = ["sku"]
bucket = "1d"
metrics = { n = "count", buyers = "distinct(user)", h = "hll(user)" }
'''

STATES = ["CA", "NY", "TX", "WA", "OR", "A:B"]  # one value with the key separator in it


def gen_events(n, seed):
    rng = random.Random(seed)
    users = [rng.getrandbits(63) for _ in range(300)] + ["u%d" % i for i in range(30)]
    out = []
    for _ in range(n):
        out.append({
            "ts": START + rng.randrange(4 * DAY),
            "campaign": "c%d" % min(int(rng.paretovariate(1.2)), 40),
            "user": rng.choice(users),
            "state": rng.choice(STATES),
            "event": rng.choices(["view", "click", "conversion"], [70, 25, 5])[0],
            "cost": rng.randrange(0, 41) / 4,
            "skus": ["k%d" % rng.randrange(12) for _ in range(rng.randrange(4))],
        })
    return out


def csv_line(e):
    state = '"%s"' % e["state"] if rng_quote(e) else e["state"]
    return "%d,%s,%s,%s,%s,%s" % (e["ts"], e["campaign"], e["user"], state, e["event"], fmt(e["cost"]))


def rng_quote(e):
    # Quote some fields, as CSV writers do: deterministic per event.
    return e["ts"] % 3 == 0


def fmt(x):
    return ("%r" % x).rstrip("0").rstrip(".") if x != int(x) else str(int(x))


def json_line(e):
    return json.dumps({"time": e["ts"] * 1000, "ad": {"campaign": e["campaign"]}, "user": {"id": e["user"]},
                       "items": [{"sku": s} for s in e["skus"]]})


def esc(v):
    return str(v).replace("%", "%25").replace(":", "%3A")


# ---------------------------------------------------------------- the independent oracle

def expected(events):
    """{hash key: {field: value}}, {set key: set of members}, {hll key: list of users}."""
    hashes = collections.defaultdict(dict)
    sets = collections.defaultdict(set)
    hlls = collections.defaultdict(list)

    def count(k, f):
        hashes[k][f] = hashes[k].get(f, 0) + 1

    for e in events:
        day = e["ts"] // DAY * DAY
        hour = e["ts"] // 3600 * 3600
        k = "s_all:%s:%d" % (esc(e["campaign"]), day)
        count(k, "n")
        h = hashes[k]
        h["spend"] = h.get("spend", 0) + e["cost"]
        h["lo"] = min(h.get("lo", e["cost"]), e["cost"])
        h["hi"] = max(h.get("hi", e["cost"]), e["cost"])
        hlls[k + ":users"].append(e["user"])
        sets[k + ":exact"].add(str(e["user"]))
        if e["event"] == "click" and e["cost"] > 1:
            k = "s_clicks:%s:%s:%d" % (esc(e["campaign"]), esc(e["state"]), hour)
            count(k, "n")
            sets[k + ":exact"].add(str(e["user"]))
        if e["state"] in ("CA", "NY") or not e["event"] != "conversion":
            k = "s_states:%s" % esc(e["state"])
            count(k, "n")
            hashes[k]["last_user"] = str(e["user"])
    return hashes, sets, hlls


def expected_v2(events):
    hashes = collections.defaultdict(dict)
    sets = collections.defaultdict(set)
    hlls = collections.defaultdict(list)
    for e in events:
        day = e["ts"] // DAY * DAY
        for s in e["skus"]:
            k = "s_sku:%s:%d" % (s, day)
            hashes[k]["n"] = hashes[k].get("n", 0) + 1
            sets[k + ":buyers"].add(str(e["user"]))
            hlls[k + ":h"].append(e["user"])
    return hashes, sets, hlls


def same_number(ours, theirs):
    return float(ours) == float(theirs)


def check_against(r, hashes, sets, hlls):
    for k, fields in hashes.items():
        got = {f.decode(): v.decode() for f, v in r.hgetall(k).items()}
        assert set(got) == set(fields), (k, got, fields)
        for f, v in fields.items():
            if isinstance(v, str):
                assert got[f] == v, (k, f, got[f], v)
            else:
                assert same_number(got[f], v), (k, f, got[f], v)
    for k, members in sets.items():
        assert {m.decode() for m in r.smembers(k)} == members, k
    for i, (k, users) in enumerate(hlls.items()):
        # The same values through the existing HLL code: identical bytes.
        scratch = "scratch:%d" % i
        ints = [u for u in users if isinstance(u, int)]
        texts = [u for u in users if not isinstance(u, int)]
        if ints:
            r.execute_command("HLL.ADDINT", scratch, *ints)
        if texts:
            r.execute_command("HLL.ADD", scratch, *texts)
        assert r.get(k) == r.get(scratch), k
        r.delete(scratch)
    # Nothing more than the oracle's keys (and the exactly-once records).
    summary_keys = {k.decode() for k in r.scan_iter(count=1000) if not k.startswith(b"__summarizer:")}
    assert summary_keys == set(hashes) | set(sets) | set(hlls)


# ---------------------------------------------------------------- servers

class Node:
    """An abacus server whose data directory outlives the process."""

    def __init__(self, data_dir, *args):
        self.data_dir = data_dir
        self.args = [str(a) for a in args]
        self.p = None
        self.runs = 0

    def start(self):
        for attempt in range(PORT_ATTEMPTS):
            p = ServerProcess("abacus", self.args)
            shutil.rmtree(p.dir, ignore_errors=True)
            p.dir = self.data_dir
            self.runs += 1
            p.log_path = os.path.join(self.data_dir, "server-%d.log" % self.runs)
            p.argv = p._argv()
            self.p = p.spawn()
            try:
                self.p.wait_ready()
                return self
            except RuntimeError:
                if attempt + 1 == PORT_ATTEMPTS or not self.p.lost_its_port():
                    raise

    def client(self, **kw):
        kw.setdefault("socket_timeout", 30)
        return redis.Redis(host=self.p.host, port=self.p.port, **kw)

    def kill(self):
        os.killpg(self.p.proc.pid, signal.SIGKILL)
        self.p.proc.wait(timeout=10)

    def stop(self):
        self.p.stop()


@pytest.fixture(scope="module")
def workdir():
    d = tempfile.mkdtemp(prefix="abacus-summarizer-")
    with open(os.path.join(d, "rules.toml"), "w") as f:
        f.write(RULES)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def node(workdir):
    data = os.path.join(workdir, "main")
    os.makedirs(data)
    n = Node(data, "--summarizer-rules", os.path.join(workdir, "rules.toml")).start()
    yield n
    n.stop()


@pytest.fixture
def sr(node):
    c = node.client()
    c.flushall()
    yield c
    c.close()


def ingest_cli(node, feed, *args, check=True):
    out = subprocess.run([ABACUS, "ingest", "--quiet", "--feed", feed, "-p", str(node.p.port)] + list(args),
                         capture_output=True, text=True, timeout=300)
    if check:
        assert out.returncode == 0, out.stderr
    return out


# ---------------------------------------------------------------- tests

def test_v1_summaries_equal_an_independent_computation(sr):
    events = gen_events(6000, 22)
    lines = [csv_line(e) for e in events]
    # Several payloads per command and several commands, with a header line first.
    total = [0, 0]
    header = "ts,campaign,user,state,event,cost"
    for i in range(0, len(lines), 1000):
        chunk = lines[i:i + 1000]
        payloads = ["\n".join([header] + chunk[:500]) + "\n", "\r\n".join(chunk[500:])]
        ev, rej = sr.execute_command("SUMMARY.INGEST", "v1", *payloads)
        total[0] += ev
        total[1] += rej
    assert total == [len(events), 0]
    hashes, sets, hlls = expected(events)
    check_against(sr, hashes, sets, hlls)


def test_v2_fan_out_equals_an_independent_computation(sr, node, workdir):
    events = gen_events(3000, 23)
    path = os.path.join(workdir, "v2.jsonl")
    with open(path, "w") as f:
        f.write("".join(json_line(e) + "\n" for e in events))
    out = ingest_cli(node, "v2", "--batch-bytes", "5000", "--source", "v2-test", path)
    assert out.stdout.startswith("ingested %d events (0 rejected)" % len(events)), out.stdout
    hashes, sets, hlls = expected_v2(events)
    assert hashes, "some events have items"
    check_against(sr, hashes, sets, hlls)


def test_parallel_ranges_equal_an_independent_computation(sr, node, workdir):
    """--connections 3 cuts the file into 3 line-aligned ranges, each its own source; the
    summaries (v2: counts, distinct and HLL, none order-dependent) equal the oracle's, and a
    --resume afterwards finds every range complete."""
    events = gen_events(2500, 28)
    path = os.path.join(workdir, "v2-ranges.jsonl")
    with open(path, "w") as f:
        f.write("".join(json_line(e) + "\n" for e in events))
    out = ingest_cli(node, "v2", "--connections", "3", "--batch-bytes", "7000", path)
    assert out.stdout.startswith("ingested %d events (0 rejected)" % len(events)), out.stdout
    hashes, sets, hlls = expected_v2(events)
    check_against(sr, hashes, sets, hlls)
    sources = sorted(k.decode() for k in sr.scan_iter(match="__summarizer:source:*"))
    assert len(sources) == 3 and all(s.endswith("/3") for s in sources), sources
    assert sum(int(sr.hget(k, "offset")) for k in sources) == os.path.getsize(path)
    out = ingest_cli(node, "v2", "--connections", "3", "--resume", path)
    assert out.stdout.startswith("ingested 0 events"), out.stdout
    # Without --resume, a source the server has is refused rather than counted twice.
    out = ingest_cli(node, "v2", "--connections", "3", path, check=False)
    assert out.returncode != 0 and "--resume" in out.stderr


def rows(reply):
    """SUMMARY.QUERY's RESP2 reply (flat field/value arrays) as dicts of text."""
    return [{row[i].decode(): row[i + 1] for i in range(0, len(row), 2)} for row in reply]


def test_query_merges_across_shards(sr):
    events = gen_events(4000, 24)
    sr.execute_command("SUMMARY.INGEST", "v1", "\n".join(csv_line(e) for e in events))
    by_campaign = collections.defaultdict(lambda: [0, 0.0, set(), []])
    for e in events:
        g = by_campaign[e["campaign"]]
        g[0] += 1
        g[1] += e["cost"]
        g[2].add(str(e["user"]))
    got = rows(sr.execute_command("SUMMARY.QUERY", "s_all", "GROUPBY", "campaign"))
    assert [r["campaign"].decode() for r in got] == sorted(by_campaign)
    for r in got:
        n, spend, users, _ = by_campaign[r["campaign"].decode()]
        assert r["n"] == n and float(r["spend"]) == spend and r["exact"] == len(users)
        # The HLL metric is the union of the campaign's daily sketches: what HLL.CARD says,
        # rounded as postgresql-hll's round(hll_cardinality(...)) (half away from zero).
        keys = [k for k in sr.scan_iter(match="s_all:%s:*:users" % r["campaign"].decode())]
        assert r["users"] == math.floor(float(sr.execute_command("HLL.CARD", *keys)) + 0.5)
    # One row over everything, a time range, a WHERE, and buckets.
    (all_row,) = rows(sr.execute_command("SUMMARY.QUERY", "s_all"))
    assert all_row["n"] == len(events)
    assert float(all_row["lo"]) == min(e["cost"] for e in events)
    assert float(all_row["hi"]) == max(e["cost"] for e in events)
    day1 = START // DAY * DAY + DAY
    sel = [e for e in events if day1 <= e["ts"] // DAY * DAY < day1 + 2 * DAY and e["campaign"] == "c1"]
    (r,) = rows(sr.execute_command("SUMMARY.QUERY", "s_all", "FROM", day1, "TO", day1 + 2 * DAY, "WHERE", "campaign", "c1"))
    assert r["n"] == len(sel) and r["exact"] == len({str(e["user"]) for e in sel})
    got = rows(sr.execute_command("SUMMARY.QUERY", "s_all", "GROUPBY", "BUCKET"))
    per_day = collections.Counter(e["ts"] // DAY * DAY for e in events)
    assert [(r["bucket"], r["n"]) for r in got] == sorted(per_day.items())
    clicks = rows(sr.execute_command("SUMMARY.QUERY", "s_clicks", "GROUPBY", "state"))
    want = collections.Counter(e["state"] for e in events if e["event"] == "click" and e["cost"] > 1)
    assert {r["state"].decode(): r["n"] for r in clicks} == dict(want)
    # RESP3: rows are maps.
    r3 = redis.Redis(host=sr.connection_pool.connection_kwargs["host"], port=sr.connection_pool.connection_kwargs["port"], protocol=3)
    got3 = r3.execute_command("SUMMARY.QUERY", "s_all")
    assert isinstance(got3[0], dict) and got3[0][b"n"] == len(events)
    r3.close()
    # Errors.
    for bad, msg in [(["nosuch"], "no such summary"), (["s_all", "GROUPBY"], "GROUPBY"),
                     (["s_all", "WHERE", "nodim", "x"], "not a dimension"), (["s_all", "FROM", "x"], "Unix seconds"),
                     (["s_states", "GROUPBY", "BUCKET"], "no time bucket"), (["s_all", "junk"], "syntax")]:
        with pytest.raises(redis.ResponseError, match=msg):
            sr.execute_command("SUMMARY.QUERY", *bad)


BAD_LINES = [
    ('%d,c1,7,CA,click,"1' % START, "bad CSV quoting"),
    ('%d,c1,7,C"A,click,1' % START, "bad CSV quoting"),
    ('%d,c1,7,CA,click' % START, "missing field"),
    ('%d,c1,7,CA,click,1,1' % START, "extra field"),
    ('%d,c1,7,CA,click,lots' % START, "wrong type"),
    ('noon,c1,7,CA,click,1', "bad time"),
    ('%d,%s,7,CA,click,1' % (START, "c" * 70000), "longer than"),
    (b'%d,c1,7,CA,click,\xff1' % START, "not UTF-8"),
]

BAD_JSON = [
    ('{"time": 1, "ad": {"campaign": "c"}, "user": {"id": 5}, "items": [', "invalid JSON"),
    ('{"time": 1, "ad": {}, "user": {"id": 5}, "items": []}', "missing field: campaign"),
    ('{"time": 1, "ad": {"campaign": [1]}, "user": {"id": 5}, "items": []}', "wrong type"),
    ('{"time": "x", "ad": {"campaign": "c"}, "user": {"id": 5}, "items": []}', "bad time"),
]


def dump(r):
    out = {}
    for k in r.scan_iter(count=1000):
        t = r.type(k)
        if t == b"hash":
            out[k] = r.hgetall(k)
        elif t == b"set":
            out[k] = sorted(r.smembers(k))
        else:
            out[k] = r.get(k)
    return out


def test_bad_lines_are_rejected_alone(sr):
    events = gen_events(300, 25)
    good = [csv_line(e).encode() for e in events]
    mixed = list(good)
    rng = random.Random(5)
    positions = {}
    for line, reason in BAD_LINES:
        line = line if isinstance(line, bytes) else line.encode()
        at = rng.randrange(len(mixed) + 1)
        mixed.insert(at, line)
        positions[line] = reason
    before = sr.execute_command("SUMMARY.REJECTS", "v1")[1]
    assert before + len(BAD_LINES) <= 100, "the kept rejects are the first 100 of the feed"
    ev, rej = sr.execute_command("SUMMARY.INGEST", "v1", b"\n".join(mixed))
    assert (ev, rej) == (len(good), len(BAD_LINES))
    info = sr.execute_command("SUMMARY.REJECTS", "v1")
    assert info[1] == before + len(BAD_LINES)
    got = {}
    for x in info[3][-len(BAD_LINES):]:
        k = dict(zip(x[::2], x[1::2]))
        line_no = k[b"line"]
        got[mixed[line_no - 1][:256]] = k[b"reason"].decode()
        assert k[b"text"] == mixed[line_no - 1][:256].decode(errors="replace").encode()
    for line, reason in positions.items():
        assert reason in got[line[:256]], (line[:60], got[line[:256]])
    # Nothing else changed: the same summaries as the good lines alone, in another database.
    with_bad = dump(sr)
    r1 = redis.Redis(host=sr.connection_pool.connection_kwargs["host"], port=sr.connection_pool.connection_kwargs["port"], db=1)
    r1.execute_command("SUMMARY.INGEST", "v1", b"\n".join(good))
    assert dump(r1) == with_bad
    r1.close()
    # JSON lines.
    lines = [json_line(e) for e in events[:20]]
    ev, rej = sr.execute_command("SUMMARY.INGEST", "v2", "\n".join(lines + [b for b, _ in BAD_JSON]))
    assert (ev, rej) == (20, len(BAD_JSON))
    reasons = [dict(zip(x[::2], x[1::2]))[b"reason"].decode() for x in sr.execute_command("SUMMARY.REJECTS", "v2")[3]]
    for (_, want), got in zip(BAD_JSON, reasons[-len(BAD_JSON):]):
        assert want in got, (want, got)


def test_parse_slices_change_nothing(sr):
    """A batch parsed in tiny slices (summarizer-parse-slice-bytes 100: a yield to the
    thread's shard jobs every line or two) gives the reply, the summaries and the source's
    next line number of the same batch parsed in one stretch (0): slices are cut at line
    ends, CRLF and empty lines included."""
    events = gen_events(800, 29)
    lines = [csv_line(e) for e in events]
    lines[10] = "noon,c1,7,CA,click,1"
    payload = ("\r\n".join(lines[:400]) + "\n\n" + "\n".join(lines[400:]) + "\n").encode()
    kw = sr.connection_pool.connection_kwargs
    results = []
    try:
        for db, slice_bytes in ((0, 100), (1, 0)):
            sr.config_set("summarizer-parse-slice-bytes", slice_bytes)
            r = redis.Redis(host=kw["host"], port=kw["port"], db=db)
            r.flushdb()
            reply = r.execute_command("SUMMARY.INGESTSOURCE", "v1", "slices", 0, len(payload), 1, payload)
            record = r.hgetall("__summarizer:source:slices")
            results.append((reply, dump(r)))
            r.close()
            # 400 lines, an empty one, 400 more: the next line is 802.
            assert record == {b"offset": str(len(payload)).encode(), b"line": b"802"}, record
            assert reply == [799, 1], reply
    finally:
        sr.config_set("summarizer-parse-slice-bytes", 32768)
    assert results[0] == results[1]
    assert len(results[0][1]) > 100


def test_max_rejects_stops_a_file(sr, node, workdir):
    path = os.path.join(workdir, "bad.csv")
    with open(path, "w") as f:
        f.write("".join("%d,c1,7,CA,click,1\nbroken\n" % START for _ in range(2000)))
    out = ingest_cli(node, "v1", "--batch-bytes", "1000", "--max-rejects", "10", "--source", "bad", path, check=False)
    assert out.returncode != 0 and "max-rejects" in out.stderr, out.stderr
    assert int(sr.hget("s_all:c1:%d" % (START // DAY * DAY), "n")) < 2000


def test_summary_update(sr):
    assert sr.execute_command("SUMMARY.UPDATE", "h", "n", "INCRBY", 2, "s", "INCRBYFLOAT", "1.5", "lo", "MIN", 3, "hi", "MAX", 3, "l", "SET", "x") == 5
    assert sr.execute_command("SUMMARY.UPDATE", "h", "n", "INCRBY", 3, "lo", "MIN", 5, "hi", "MAX", 7, "s", "INCRBYFLOAT", "0.25") == 4 - 1
    assert sr.hgetall("h") == {b"n": b"5", b"s": b"1.75", b"lo": b"3", b"hi": b"7", b"l": b"x"}
    # A field named twice sees its first new value; nothing changed is 0.
    assert sr.execute_command("SUMMARY.UPDATE", "h", "n", "INCRBY", 1, "n", "INCRBY", 1) == 2
    assert sr.hget("h", "n") == b"7"
    assert sr.execute_command("SUMMARY.UPDATE", "h", "lo", "MIN", 4) == 0
    # Errors change nothing.
    for bad, msg in [(["h", "n", "INCRBY", "x"], "not an integer"), (["h", "n", "BOGUS", 1], "syntax"),
                     (["h", "l", "INCRBY", 1], "not an integer"), (["h", "lo", "MIN", "nan"], "float"),
                     (["h", "n", "INCRBY"], "wrong number"), (["h", "n", "INCRBY", 9223372036854775807], "overflow")]:
        with pytest.raises(redis.ResponseError, match=msg):
            sr.execute_command("SUMMARY.UPDATE", *bad)
    assert sr.hget("h", "n") == b"7"
    sr.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        sr.execute_command("SUMMARY.UPDATE", "str", "n", "INCRBY", 1)


def test_ingest_errors_and_watch(sr, node):
    with pytest.raises(redis.ResponseError, match="no such feed"):
        sr.execute_command("SUMMARY.INGEST", "nofeed", "x")
    with pytest.raises(redis.ResponseError, match="end-offset is before"):
        sr.execute_command("SUMMARY.INGESTSOURCE", "v1", "src", 10, 5, 1, "x")
    line = "%d,c1,7,CA,click,1" % START
    assert sr.execute_command("SUMMARY.INGESTSOURCE", "v1", "src", 0, 100, 1, line) == [1, 0]
    # The same batch again is refused, not counted twice.
    with pytest.raises(redis.ResponseError, match="at offset 100"):
        sr.execute_command("SUMMARY.INGESTSOURCE", "v1", "src", 0, 100, 1, line)
    assert sr.execute_command("SUMMARY.SOURCE", "src") == [100, 2]
    assert sr.execute_command("SUMMARY.SOURCE", "other") == [0, 1]
    key = "s_all:c1:%d" % (START // DAY * DAY)
    assert sr.hget(key, "n") == b"1"
    # WATCH sees an ingest's writes.
    w = node.client()
    p = w.pipeline(transaction=True)
    p.watch(key)
    sr.execute_command("SUMMARY.INGEST", "v1", line)
    p.multi()
    p.ping()
    with pytest.raises(redis.WatchError):
        p.execute()
    w.close()
    # Inside MULTI it runs under EXEC's locks.
    p = sr.pipeline(transaction=True)
    p.execute_command("SUMMARY.INGEST", "v1", line)
    p.execute_command("SUMMARY.QUERY", "s_all", "WHERE", "campaign", "c1")
    res = p.execute()
    assert res[0] == [1, 0] and rows(res[1])[0]["n"] == 3


def test_direct_and_command_paths_agree(sr, node):
    """A batch's changes are applied on the shards directly unless maxmemory or keyspace
    notifications are on (or a key is in the way): then the generated commands run. Both
    paths leave the same keys; in the way, a key of another type or a field that is not a
    number fails alone, as the command would, and changes nothing of its own."""
    events = gen_events(2000, 27)
    payload = "\n".join(csv_line(e) for e in events) + "\n"
    second = "\n".join(csv_line(e) for e in gen_events(500, 28)) + "\n"
    assert sr.execute_command("SUMMARY.INGEST", "v1", payload) == [len(events), 0]
    assert sr.execute_command("SUMMARY.INGEST", "v1", second) == [500, 0]
    direct = dump(sr)
    for name, value in (("notify-keyspace-events", "KEA"), ("maxmemory", "1gb")):
        old = sr.config_get(name)[name]
        sr.flushall()
        sr.config_set(name, value)
        try:
            sub = node.client().pubsub()
            if name == "notify-keyspace-events":
                sub.psubscribe("__keyevent@0__:summary.update")
                assert sub.get_message(timeout=5)["type"] == "psubscribe"
            assert sr.execute_command("SUMMARY.INGEST", "v1", payload) == [len(events), 0]
            assert sr.execute_command("SUMMARY.INGEST", "v1", second) == [500, 0]
            if name == "notify-keyspace-events":
                msg = sub.get_message(timeout=5)
                assert msg is not None and msg["data"].startswith(b"s_"), msg
            sub.close()
        finally:
            sr.config_set(name, old)
        assert dump(sr) == direct, name
    # Keys in the way: the command's own error, the rest of the batch applied.
    sr.flushall()
    assert sr.execute_command("SUMMARY.INGEST", "v1", payload) == [len(events), 0]
    alone = dump(sr)
    e = events[0]
    hkey = "s_all:%s:%d" % (e["campaign"], e["ts"] // DAY * DAY)
    skey = hkey + ":exact"
    assert hkey.encode() in alone and skey.encode() in alone
    sr.flushall()
    sr.set(skey, "not a set")
    sr.hset(hkey, "n", "x")
    with pytest.raises(redis.ResponseError, match="2 summary writes failed, the first with: (WRONGTYPE|ERR hash value is not an integer)"):
        sr.execute_command("SUMMARY.INGEST", "v1", payload)
    assert sr.get(skey) == b"not a set" and sr.hgetall(hkey) == {b"n": b"x"}
    sr.delete(skey, hkey)
    assert dump(sr) == {k: v for k, v in alone.items() if k not in (hkey.encode(), skey.encode())}

def test_rules_load_get_and_errors(sr, node, workdir):
    assert sr.execute_command("SUMMARY.RULES", "GET").decode() == RULES
    bad = os.path.join(workdir, "bad.toml")
    with open(bad, "w") as f:
        f.write(RULES.replace('bucket = "1h"', 'bucket = "2h"'))
    line = RULES[:RULES.index('bucket = "1h"')].count("\n") + 1
    with pytest.raises(redis.ResponseError, match="line %d: summary 's_clicks': unknown bucket '2h'" % line):
        sr.execute_command("SUMMARY.RULES", "LOAD", bad)
    assert sr.execute_command("SUMMARY.RULES", "GET").decode() == RULES
    with pytest.raises(redis.ResponseError, match="cannot read"):
        sr.execute_command("SUMMARY.RULES", "LOAD", os.path.join(workdir, "missing.toml"))
    with pytest.raises(redis.ResponseError, match="syntax"):
        sr.execute_command("SUMMARY.RULES", "DROP")
    assert sr.info("summarizer")["summarizer_summaries"] == 4
    # A bad file stops the start, with the line and reason.
    p = ServerProcess("abacus", ["--summarizer-rules", bad])
    p.spawn()
    assert p.wait_exit(20) not in (None, 0)
    assert "line %d" % line in p.log() and "unknown bucket" in p.log()
    p.stop()
    shutil.rmtree(p.dir, ignore_errors=True)


def test_exactly_once_across_kill_9(workdir):
    """kill -9 of the server in the middle of `abacus ingest` (10 rounds, each at a random
    point of the file), then --resume: the summaries equal a clean single pass.

    Each round feeds the client, through its standard input, the file up to a random byte
    (the client skips what the server already has), waits until the server has applied
    part of it, and kills the server a random moment later, so every kill lands before the
    end of the source, with batches in flight or not."""
    rules = os.path.join(workdir, "rules.toml")
    path = os.path.join(workdir, "big.csv")
    events = gen_events(60000, 26)
    data = "".join(csv_line(e) + "\n" for e in events).encode()
    with open(path, "wb") as f:
        f.write(data)
    clean = Node(tempfile.mkdtemp(prefix="abacus-sum-clean-"), "--summarizer-rules", rules).start()
    ingest_cli(clean, "v1", "--source", "big", path)
    want = dump(clean.client())
    clean.stop()
    shutil.rmtree(clean.data_dir, ignore_errors=True)

    data_dir = tempfile.mkdtemp(prefix="abacus-sum-kill-")
    n = Node(data_dir, "--summarizer-rules", rules)
    rng = random.Random(int(os.environ.get("ABACUS_KILL_SEED", "2211")))
    try:
        for _ in range(10):
            n.start()
            c = n.client()
            at = c.execute_command("SUMMARY.SOURCE", "big")[0]
            span = len(data) - at
            upto = at + rng.randrange(span // 10 + 1, span // 2 + 2)
            cli = subprocess.Popen([ABACUS, "ingest", "--quiet", "--feed", "v1", "-p", str(n.p.port), "--resume",
                                    "--source", "big", "--batch-bytes", "3000", "--pipeline", "3", "-"],
                                   stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                cli.stdin.write(data[:upto])
                cli.stdin.flush()
            except BrokenPipeError:
                pass
            # Wait for the server to apply some of it (bounded: a client cut at a line
            # boundary may have nothing whole to send).
            deadline = time.monotonic() + 5
            while c.execute_command("SUMMARY.SOURCE", "big")[0] == at and time.monotonic() < deadline:
                time.sleep(0.002)
            time.sleep(rng.uniform(0.0, 0.05))
            c.close()
            n.kill()
            try:
                cli.stdin.close()
            except BrokenPipeError:
                pass
            cli.wait(timeout=60)
        n.start()
        assert n.client().execute_command("SUMMARY.SOURCE", "big")[0] < len(data)
        ingest_cli(n, "v1", "--resume", "--source", "big", path)
        assert dump(n.client()) == want
    finally:
        n.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


# ---------------------------------------------------------------- stream rules

STREAM_RULES = """
[feed.touch]
format = "csv"
columns = ["ts", "user", "channel", "event", "amount"]
time = { field = "ts", unit = "s" }

[[summary]]
name = "paths"
feed = "touch"
where = "event != 'noise'"
stream = { key = "user:{user}", fields = ["channel", "event", "amount"], maxlen = 100 }

[[summary]]
name = "per_channel"
feed = "touch"
dimensions = ["channel"]
metrics = { n = "count" }
"""


def test_stream_rule_builds_streams_that_attribute_reads(workdir):
    """A `stream = {...}` rule appends each event (past its `where`) to the stream its key
    template names, with IDs from the event time; the entries survive kill -9, a batch sent
    twice appends nothing, and ATTRIBUTE over the streams gives the hand-computed credits."""
    rules = os.path.join(workdir, "stream-rules.toml")
    with open(rules, "w") as f:
        f.write(STREAM_RULES)
    lines = [
        # u1: search, social, email, then a purchase of 30.
        "100,u1,search,click,0", "200,u1,social,view,0", "300,u1,email,click,0", "400,u1,direct,purchase,30",
        # u2: social, a noise event (filtered out), then a purchase of 10.
        "150,u2,social,view,0", "160,u2,tv,noise,0", "500,u2,direct,purchase,10",
        # u3: out of time order: the second entry takes the stream's time, next sequence.
        "1000,u3,display,view,0", "900,u3,display,view,0",
    ] + ["%d,u5,display,view,0" % (2000 + i) for i in range(250)]
    payload = "\n".join(lines) + "\n"
    data_dir = tempfile.mkdtemp(prefix="abacus-sum-stream-")
    n = Node(data_dir, "--summarizer-rules", rules).start()
    try:
        c = n.client()
        half = "\n".join(lines[:5]) + "\n"
        assert c.execute_command("SUMMARY.INGESTSOURCE", "touch", "f", 0, len(half), 1, half) == [5, 0]
        with pytest.raises(redis.ResponseError, match="is at offset %d" % len(half)):
            c.execute_command("SUMMARY.INGESTSOURCE", "touch", "f", 0, len(half), 1, half)
        rest = payload[len(half):]
        assert c.execute_command("SUMMARY.INGESTSOURCE", "touch", "f", len(half), len(payload), 6, rest) == [len(lines) - 5, 0]
        assert c.info("summarizer")["summary_paths"] == {"updates": len(lines) - 1}
        n.kill()
        n.start()
        c = n.client()
        with pytest.raises(redis.ResponseError, match="is at offset %d" % len(payload)):
            c.execute_command("SUMMARY.INGESTSOURCE", "touch", "f", len(half), len(payload), 6, rest)
        assert c.xrange("user:u1") == [
            (b"100000-0", {b"channel": b"search", b"event": b"click", b"amount": b"0"}),
            (b"200000-0", {b"channel": b"social", b"event": b"view", b"amount": b"0"}),
            (b"300000-0", {b"channel": b"email", b"event": b"click", b"amount": b"0"}),
            (b"400000-0", {b"channel": b"direct", b"event": b"purchase", b"amount": b"30"}),
        ]
        assert [i for i, _ in c.xrange("user:u2")] == [b"150000-0", b"500000-0"]
        assert [i for i, _ in c.xrange("user:u3")] == [b"1000000-0", b"1000000-1"]
        # MAXLEN ~ 100 drops whole blocks only: at least 100 entries stay, the newest ones.
        u5 = c.xrange("user:u5")
        assert 100 <= len(u5) < 250 and u5[-1][0] == b"%d-0" % ((2000 + 249) * 1000)
        assert c.type("per_channel:display") == b"hash" and c.hget("per_channel:display", "n") == b"252"

        got = c.execute_command("ATTRIBUTE", "MATCH", "user:*", "CHANNEL", "channel", "CONVERSION", "event", "purchase",
                                "VALUE", "amount", "MODELS", "first", "last", "linear", "position")
        d = {got[i]: got[i + 1] for i in range(0, len(got), 2)}
        assert (d[b"users"], d[b"conversions"], d[b"unattributed"]) == (4, 2, 0)
        models = {got_m: {row[0]: (float(row[1]), float(row[2])) for row in rows}
                  for got_m, rows in zip(d[b"models"][0::2], d[b"models"][1::2])}
        want = {
            b"first": {b"search": (1, 30), b"social": (1, 10), b"email": (0, 0), b"display": (0, 0)},
            b"last": {b"search": (0, 0), b"social": (1, 10), b"email": (1, 30), b"display": (0, 0)},
            b"linear": {b"search": (1 / 3, 10), b"social": (4 / 3, 20), b"email": (1 / 3, 10), b"display": (0, 0)},
            b"position": {b"search": (0.4, 12), b"social": (1.2, 16), b"email": (0.4, 12), b"display": (0, 0)},
        }
        assert set(models) == set(want)
        for m, credits in want.items():
            assert set(models[m]) == set(credits), m
            for ch, (conv, value) in credits.items():
                assert models[m][ch] == pytest.approx((conv, value)), (m, ch)
    finally:
        n.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def test_stream_rule_errors(sr, workdir):
    bad = os.path.join(workdir, "bad-stream.toml")
    for text, msg in [
        ('key = "user:{nope}", fields = ["channel"]', "'nope' is not a field"),
        ('key = "user:{user", fields = ["channel"]', "'\\{' without '\\}'"),
        ('key = "user:{user}", fields = []', "at least one field"),
        ('key = "user:{user}", fields = ["channel"], maxlen = 0', "maxlen must be at least 1"),
        ('key = "user:{user}", fields = ["channel"], size = 3', "unknown field"),
    ]:
        with open(bad, "w") as f:
            f.write(STREAM_RULES.replace('key = "user:{user}", fields = ["channel", "event", "amount"], maxlen = 100', text))
        line = STREAM_RULES[:STREAM_RULES.index("stream = {")].count("\n") + 1
        with pytest.raises(redis.ResponseError, match="line %d: .*%s" % (line, msg)):
            sr.execute_command("SUMMARY.RULES", "LOAD", bad)
    assert sr.execute_command("SUMMARY.RULES", "GET").decode() == RULES


# ---------------------------------------------------------------- PostgreSQL

def test_hll_bytes_equal_postgresql_hll(sr):
    url = os.environ.get("ABACUS_PG_URL")
    if not url:
        if os.environ.get("ABACUS_SKIP_PG") == "1":
            pytest.skip("ABACUS_SKIP_PG=1 and no ABACUS_PG_URL")
        pytest.fail("ABACUS_PG_URL is not set (see test_hll.py), or set ABACUS_SKIP_PG=1")
    from test_hll import psql
    events = gen_events(3000, 27)
    sr.execute_command("SUMMARY.INGEST", "v1", "\n".join(csv_line(e) for e in events))
    _, _, hlls = expected(events)
    stmts, keys = [], []
    for k, users in sorted(hlls.items()):
        vals = ",".join("hll_hash_bigint(%d, 0)" % u if isinstance(u, int) else "hll_hash_text('%s', 0)" % u for u in users)
        stmts.append("select hll_add_agg(h) from unnest(array[%s]) h;" % vals)
        keys.append(k)
    theirs = psql(url, stmts)
    for k, row in zip(keys, theirs):
        assert sr.get(k).hex() == row[0], k


# ---------------------------------------------------------------- back-pressure

def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_back_pressure_keeps_memory_bounded(node):
    """A producer far faster than the server (400 MiB of pipelined SUMMARY.INGEST, no reply
    read until the end): the connection is not read while its batches run, so the server's
    memory stays bounded instead of buffering the input. Each payload is one 1 MiB line,
    which the feed rejects as too long, so the test spends its time moving bytes."""
    import socket
    import threading
    from helpers import encode_command

    pid = node.p.proc.pid
    base = rss_bytes(pid)
    cmd = encode_command("SUMMARY.INGEST", "v1", b"x" * (1 << 20))
    count = 400
    peak = [base]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_bytes(pid))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    s = socket.create_connection((node.p.host, node.p.port))
    try:
        for _ in range(count):
            s.sendall(cmd)
        s.settimeout(60)
        want = b"*2\r\n:0\r\n:1\r\n" * count
        got = b""
        while len(got) < len(want):
            chunk = s.recv(65536)
            assert chunk, "connection closed"
            got += chunk
        assert got == want
    finally:
        done.set()
        sampler.join()
        s.close()
    assert peak[0] - base < 150 << 20, "RSS grew by %d MiB" % ((peak[0] - base) >> 20)


# ---------------------------------------------------------------- the log's form of a batch

REPLAY_RULES = RULES + '''
[[summary]]
name = "s_params"
feed = "v1"
dimensions = ["state"]
bucket = "1d"
ttl = "3650d"
metrics = { n = "count", spend = "sum(cost)", sketch = "hll(user, log2m=12, regwidth=4, expthresh=0)" }
'''


def test_direct_writes_replay_from_the_log_and_on_a_replica(workdir):
    """The shard jobs encode each direct write's log command as they build it (name codes
    found once per job, arguments appended one by one): a server restarted from its log and
    a replica fed the same stream hold exactly the primary's keys (hashes, HLL bytes with
    the metric's own parameters, sets, ttls), after batches that create keys and batches
    that update them, v1 and v2."""
    rules = os.path.join(workdir, "replay-rules.toml")
    with open(rules, "w") as f:
        f.write(REPLAY_RULES)
    # No snapshot, each reply after its log record is on disk: the restart below (after
    # kill -9) replays every batch from the log.
    primary = Node(tempfile.mkdtemp(prefix="abacus-sum-primary-"), "--summarizer-rules", rules,
                   "--appendfsync", "always", "--save", "").start()
    replica = Node(tempfile.mkdtemp(prefix="abacus-sum-replica-")).start()
    try:
        p, r = primary.client(), replica.client()
        r.execute_command("REPLICAOF", primary.p.host, primary.p.port)
        deadline = time.monotonic() + 20
        while r.info("replication").get("master_link_status") != "up":
            assert time.monotonic() < deadline, "the replica's link did not come up"
            time.sleep(0.02)
        events = gen_events(6000, 31)
        for i in range(0, len(events), 1500):
            chunk = events[i:i + 1500]
            p.execute_command("SUMMARY.INGEST", "v1", "\n".join(csv_line(e) for e in chunk))
            p.execute_command("SUMMARY.INGEST", "v2", "\n".join(json_line(e) for e in chunk))
        assert p.execute_command("WAIT", 1, 10000) == 1

        def state(c):
            return dump(c), {k: c.pttl(k) > 0 for k in c.scan_iter(count=1000)}

        want, ttls = state(p)
        assert any(k.startswith(b"s_params:") and k.endswith(b":sketch") for k in want)
        assert any(ttls.values()) and not all(ttls.values())
        assert state(r) == (want, ttls)
        primary.kill()
        primary.start()
        assert state(primary.client()) == (want, ttls)
    finally:
        primary.stop()
        replica.stop()
        shutil.rmtree(primary.data_dir, ignore_errors=True)
        shutil.rmtree(replica.data_dir, ignore_errors=True)
