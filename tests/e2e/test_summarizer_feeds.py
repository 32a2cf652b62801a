"""End-to-end tests of the summarizer's feed options and ways in (beside test_summarizer.py).

- Summaries against DuckDB GROUP BY queries over the same file (counts, sums, exact distinct
  counts), v1 CSV and v2 JSON lines with fan-out: an independent engine, not our own oracle.
- strftime time formats (`time = { field, format }`): buckets from formatted times, with a
  zone offset; an impossible date rejected alone.
- Per-metric HLL parameters (`hll(user, log2m=12, ...)`): the sketch has them, and its bytes
  equal HLL.CREATE with those parameters fed the same values.
- `when_full = "drop"`: with a queue of one batch, batches that find it full are dropped and
  counted (INFO), the others applied; each batch's reply says which, and the keys agree.
- The raw line port (`ingest-port`): FEED and AUTH lines, the same summaries as SUMMARY.INGEST,
  an overlong line rejected alone with its line number, the password rules of the main port.
"""

import datetime
import os
import random
import shutil
import socket
import tempfile
import threading
import time

import pytest

from conftest import free_port
from test_summarizer import DAY, START, Node, csv_line, esc, gen_events, json_line

pytestmark = pytest.mark.abacus_only("the summarizer is Abacus's")

duckdb = pytest.importorskip("duckdb", reason="pip install -r tests/requirements.txt")

RULES = '''
[feed.v1]
format = "csv"
columns = ["ts", "campaign", "user", "state", "event", "cost"]
time = { field = "ts", unit = "s" }

[feed.v2]
format = "jsonl"
time = { path = "$.time", unit = "ms" }
fields = { campaign = "$.ad.campaign", user = "$.user.id", sku = "$.items[*].sku" }

[feed.logs]
format = "csv"
columns = ["when", "campaign", "user"]
time = { field = "when", format = "%d/%b/%Y:%H:%M:%S %z" }

[feed.firehose]
format = "csv"
columns = ["ts", "campaign"]
time = { field = "ts", unit = "s" }
when_full = "drop"

[[summary]]
name = "by_day"
feed = "v1"
dimensions = ["campaign"]
bucket = "1d"
metrics = { n = "count", spend = "sum(cost)", users = "distinct(user)", sketch = "hll(user, log2m=12, regwidth=4, expthresh=0)" }

[[summary]]
name = "clicks"
feed = "v1"
where = "event = 'click'"
dimensions = ["campaign", "state"]
bucket = "1h"
metrics = { n = "count", spend = "sum(cost)", users = "distinct(user)" }

[[summary]]
name = "sku"
feed = "v2"
dimensions = ["sku"]
bucket = "1d"
metrics = { n = "count", buyers = "distinct(user)" }

[[summary]]
name = "logs_hourly"
feed = "logs"
dimensions = ["campaign"]
bucket = "1h"
metrics = { n = "count" }

[[summary]]
name = "fire"
feed = "firehose"
dimensions = ["campaign"]
metrics = { n = "count" }
'''


@pytest.fixture(scope="module")
def node():
    d = tempfile.mkdtemp(prefix="abacus-summarizer-feeds-")
    with open(os.path.join(d, "rules.toml"), "w") as f:
        f.write(RULES)
    data = os.path.join(d, "data")
    os.makedirs(data)
    n = Node(data, "--summarizer-rules", os.path.join(d, "rules.toml"), "--ingest-port", free_port()).start()
    n.workdir = d
    n.ingest_port = int(n.args[n.args.index("--ingest-port") + 1])
    yield n
    n.stop()
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def sr(node):
    c = node.client()
    c.flushall()
    yield c
    c.close()


def rejected(r, feed):
    """SUMMARY.REJECTS as (count, [{field: value}])."""
    reply = r.execute_command("SUMMARY.REJECTS", feed)
    return reply[1], [dict(zip(x[::2], x[1::2])) for x in reply[3]]


def ingest_file(sr, node, name, feed, lines):
    """Writes `lines` to a file in the node's directory and ingests it whole; its path."""
    path = os.path.join(node.workdir, name)
    with open(path, "w") as f:
        f.write("".join(line + "\n" for line in lines))
    with open(path, "rb") as f:
        assert sr.execute_command("SUMMARY.INGEST", feed, f.read()) == [len(lines), 0]
    return path


# ---------------------------------------------------------------- DuckDB

def test_v1_against_duckdb_group_by(sr, node):
    events = gen_events(5000, 41)
    path = ingest_file(sr, node, "v1.csv", "v1", [csv_line(e) for e in events])
    con = duckdb.connect()
    con.execute("create table e as select * from read_csv(?, header=false, quote='\"', columns={'ts': 'BIGINT', 'campaign': 'VARCHAR', "
                "'u': 'VARCHAR', 'state': 'VARCHAR', 'event': 'VARCHAR', 'cost': 'DOUBLE'})", [path])
    assert con.execute("select count(*) from e").fetchone()[0] == len(events)
    rows = con.execute("select campaign, ts // 86400 * 86400, count(*), sum(cost), count(distinct u) from e group by all").fetchall()
    assert len(rows) > 20
    for campaign, day, n, spend, users in rows:
        k = "by_day:%s:%d" % (esc(campaign), day)
        assert int(sr.hget(k, "n")) == n, k
        assert float(sr.hget(k, "spend")) == spend, k
        assert sr.scard(k + ":users") == users, k
    assert len(list(sr.scan_iter(match="by_day:*", count=1000))) == 3 * len(rows)
    rows = con.execute("select campaign, state, ts // 3600 * 3600, count(*), sum(cost), count(distinct u) from e "
                       "where event = 'click' group by all").fetchall()
    assert len(rows) > 100
    for campaign, state, hour, n, spend, users in rows:
        k = "clicks:%s:%s:%d" % (esc(campaign), esc(state), hour)
        assert int(sr.hget(k, "n")) == n, k
        assert float(sr.hget(k, "spend")) == spend, k
        assert sr.scard(k + ":users") == users, k
    assert len(list(sr.scan_iter(match="clicks:*", count=1000))) == 2 * len(rows)


def test_v2_fan_out_against_duckdb(sr, node):
    events = gen_events(3000, 42)
    path = ingest_file(sr, node, "v2.jsonl", "v2", [json_line(e) for e in events])
    con = duckdb.connect()
    rows = con.execute(
        "with e as (select time, \"user\".id as u, unnest(items).sku as sku from read_json(?, columns={'time': 'BIGINT', "
        "'ad': 'STRUCT(campaign VARCHAR)', 'user': 'STRUCT(id VARCHAR)', 'items': 'STRUCT(sku VARCHAR)[]'})) "
        "select sku, time // 86400000 * 86400, count(*), count(distinct u) from e group by all", [path]).fetchall()
    assert len(rows) > 12
    for sku, day, n, buyers in rows:
        k = "sku:%s:%d" % (sku, day)
        assert int(sr.hget(k, "n")) == n, k
        assert sr.scard(k + ":buyers") == buyers, k
    assert len(list(sr.scan_iter(match="sku:*", count=1000))) == 2 * len(rows)


# ---------------------------------------------------------------- per-metric HLL parameters

def test_hll_metric_parameters(sr):
    events = gen_events(2000, 43)
    sr.execute_command("SUMMARY.INGEST", "v1", "\n".join(csv_line(e) for e in events))
    by_key = {}
    for e in events:
        by_key.setdefault("by_day:%s:%d:sketch" % (esc(e["campaign"]), e["ts"] // DAY * DAY), []).append(e["user"])
    for k, users in by_key.items():
        info = sr.execute_command("HLL.INFO", k)
        info = dict(zip(info[::2], info[1::2]))
        assert (info[b"log2m"], info[b"regwidth"], info[b"expthresh"]) == (12, 4, 0), (k, info)
        sr.delete("ref")
        sr.execute_command("HLL.CREATE", "ref", "LOG2M", 12, "REGWIDTH", 4, "EXPTHRESH", 0)
        ints = [u for u in users if isinstance(u, int)]
        texts = [u for u in users if not isinstance(u, int)]
        if ints:
            sr.execute_command("HLL.ADDINT", "ref", *ints)
        if texts:
            sr.execute_command("HLL.ADD", "ref", *texts)
        assert sr.get(k) == sr.get("ref"), k
    # The defaults are not what the metric names: a sketch made from them would differ.
    assert sr.config_get("hll-log2m")["hll-log2m"] == "11"


# ---------------------------------------------------------------- strftime times

def log_time(ts, offset_minutes):
    tz = datetime.timezone(datetime.timedelta(minutes=offset_minutes))
    return datetime.datetime.fromtimestamp(ts, tz).strftime("%d/%b/%Y:%H:%M:%S %z")


def test_strftime_times_bucket_by_their_instant(sr):
    rng = random.Random(44)
    lines, want = [], {}
    for _ in range(1500):
        ts = START + rng.randrange(3 * DAY)
        c = "c%d" % rng.randrange(5)
        lines.append("%s,%s,u%d" % (log_time(ts, rng.choice([0, 60, -300, 330])), c, rng.randrange(50)))
        k = "logs_hourly:%s:%d" % (c, ts // 3600 * 3600)
        want[k] = want.get(k, 0) + 1
    lines.insert(700, "30/Feb/2024:10:00:00 +0000,c1,u1")
    lines.insert(800, "1700000000,c1,u1")
    assert sr.execute_command("SUMMARY.INGEST", "logs", "\n".join(lines)) == [1500, 2]
    got = {k.decode(): int(sr.hget(k, "n")) for k in sr.scan_iter(match="logs_hourly:*", count=1000)}
    assert got == want
    count, rejects = rejected(sr, "logs")
    assert count == 2
    assert [r[b"line"] for r in rejects] == [701, 801]
    assert rejects[0][b"reason"].startswith(b"bad time '30/Feb/2024:10:00:00 +0000'"), rejects


# ---------------------------------------------------------------- when_full = "drop"

def feed_info(r, feed):
    line = r.info("summarizer")["feed_%s" % feed]
    return line if isinstance(line, dict) else dict(kv.split("=") for kv in line.split(","))


def test_when_full_drop_counts_what_it_drops(sr, node):
    """A queue of one batch; a large v1 batch (which waits, never drops) holds the place while
    firehose batches (when_full = "drop") arrive from other connections. Each firehose batch
    has a campaign of its own: its reply [events, 0] means applied (its key counts them), [0, 0]
    dropped (no key). INFO's dropped figure is the sum. Rounds repeat until a drop is seen
    (the place is held for the big batch's whole apply, so the first round nearly always does)."""
    sr.config_set("summarizer-queue-batches", 1)
    big = "\n".join(csv_line(e) for e in gen_events(60000, 45))
    try:
        dropped_total, applied_total = 0, 0
        for rnd in range(10):
            replies = {}
            stop = threading.Event()

            def fire(t):
                c = node.client()
                i = 0
                while not stop.is_set() or i < 3:
                    name = "r%dt%di%d" % (rnd, t, i)
                    payload = "\n".join("%d,%s" % (START + j, name) for j in range(20))
                    replies[name] = c.execute_command("SUMMARY.INGEST", "firehose", payload)
                    i += 1
                c.close()

            threads = [threading.Thread(target=fire, args=(t,)) for t in range(3)]
            for t in threads:
                t.start()
            for _ in range(3):
                assert node.client().execute_command("SUMMARY.INGEST", "v1", big) == [60000, 0]
            stop.set()
            for t in threads:
                t.join()
            for name, reply in replies.items():
                n = sr.hget("fire:" + name, "n")
                if reply == [20, 0]:
                    assert n == b"20", name
                    applied_total += 20
                else:
                    assert reply == [0, 0] and n is None, (name, reply, n)
                    dropped_total += 20
            if dropped_total:
                break
        assert dropped_total > 0 and applied_total > 0
        info = feed_info(sr, "firehose")
        assert int(info["dropped"]) == dropped_total and int(info["events"]) == applied_total, info
        assert sr.info("summarizer")["summarizer_queue_batches"] == 0
    finally:
        sr.config_set("summarizer-queue-batches", 64)


# ---------------------------------------------------------------- the raw line port

def read_line_reply(s):
    """The line port's one reply line (or what came before the server closed)."""
    out = b""
    while not out.endswith(b"\r\n"):
        chunk = s.recv(4096)
        if not chunk:
            break
        out += chunk
    return out


def push_lines(node, data, shut=True):
    s = socket.create_connection((node.p.host, node.ingest_port), timeout=30)
    try:
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        return read_line_reply(s)
    finally:
        s.close()


def test_ingest_port_equals_summary_ingest(sr, node):
    events = gen_events(4000, 46)
    lines = [csv_line(e) for e in events]
    # An overlong line (over max_line_bytes, 64 KiB) in the middle is rejected alone.
    lines.insert(2000, "x" * 100000)
    data = ("FEED v1\n" + "\n".join(lines) + "\n").encode()
    assert push_lines(node, data) == b"+OK 4000 1\r\n"
    count, rejects = rejected(sr, "v1")
    long = [r for r in rejects if r[b"reason"] == b"line longer than 65536 bytes"]
    assert long and long[-1][b"line"] == 2001, rejects
    port_state = {k: sr.hgetall(k) if sr.type(k) == b"hash" else sr.smembers(k) if sr.type(k) == b"set" else sr.get(k)
                  for k in sr.scan_iter(match="[bc][yl]*", count=1000)}
    sr.flushall()
    sr.execute_command("SUMMARY.INGEST", "v1", "\n".join(lines))
    direct = {k: sr.hgetall(k) if sr.type(k) == b"hash" else sr.smembers(k) if sr.type(k) == b"set" else sr.get(k)
              for k in sr.scan_iter(match="[bc][yl]*", count=1000)}
    assert port_state == direct and len(direct) > 100


def test_ingest_port_feed_and_auth_rules(sr, node):
    # Several feeds and no FEED line; an unknown feed.
    assert push_lines(node, b"1700000000,c1\n").startswith(b"-ERR the rules have several feeds")
    assert push_lines(node, b"FEED nosuch\n1700000000,c1\n") == b"-ERR no such feed 'nosuch'\r\n"
    # The last line needs no line end.
    assert push_lines(node, b"FEED firehose\n1700000000,c1\n1700000001,c1") == b"+OK 2 0\r\n"
    assert sr.hget("fire:c1", "n") == b"2"
    sr.config_set("requirepass", "s3cret")
    try:
        assert push_lines(node, b"FEED firehose\n1700000000,c1\n") == b"-NOAUTH Authentication required.\r\n"
        assert push_lines(node, b"AUTH wrong\nFEED firehose\n1700000000,c1\n").startswith(b"-WRONGPASS")
        assert push_lines(node, b"AUTH s3cret\nFEED firehose\n1700000000,c1\n") == b"+OK 1 0\r\n"
        assert push_lines(node, b"AUTH default s3cret\nFEED firehose\n1700000000,c1\n") == b"+OK 1 0\r\n"
    finally:
        c = node.client(password="s3cret")
        c.config_set("requirepass", "")
        c.close()
    assert sr.hget("fire:c1", "n") == b"4"


def test_ingest_port_connections_are_clients(sr, node):
    # A producer is a client of the registry: CLIENT LIST shows it while it is connected,
    # and it counts towards maxclients (over it, the port refuses as the main port does).
    s = socket.create_connection((node.p.host, node.ingest_port), timeout=30)
    try:
        s.sendall(b"FEED firehose\n1700000000,c9\n")
        local = "%s:%d" % s.getsockname()
        deadline = time.time() + 10
        while local not in sr.execute_command("CLIENT", "LIST").decode() and time.time() < deadline:
            time.sleep(0.05)
        assert local in sr.execute_command("CLIENT", "LIST").decode()
        connected = int(sr.info("clients")["connected_clients"])
        before = sr.config_get("maxclients")["maxclients"]
        sr.config_set("maxclients", connected)
        try:
            # Refused on arrival: read before writing (the server closes at once).
            t = socket.create_connection((node.p.host, node.ingest_port), timeout=30)
            try:
                refused = read_line_reply(t)
            finally:
                t.close()
            assert refused == b"-ERR max number of clients reached\r\n"
        finally:
            sr.config_set("maxclients", before)
        s.shutdown(socket.SHUT_WR)
        assert read_line_reply(s) == b"+OK 1 0\r\n"
    finally:
        s.close()
    deadline = time.time() + 10
    while local in sr.execute_command("CLIENT", "LIST").decode() and time.time() < deadline:
        time.sleep(0.05)
    assert local not in sr.execute_command("CLIENT", "LIST").decode()
