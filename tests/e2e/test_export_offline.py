"""`abacus export --dir DATA_DIR` (issue 52): the offline export of a stopped server's data
directory (snapshot plus log, no server running) writes the same Parquet files as the online
export of the same data, for every layout, and reads back equal to the answers the server gave
before it stopped (SUMMARY.QUERY, XRANGE, TS.RANGE, the generic keys' reads): after a clean
SHUTDOWN and after kill -9 (the log replayed). The directory is never written (every file's
hash is the same after the exports). Bad input (a missing or empty directory, a directory a
running server holds, a truncated snapshot, a corrupt log, a torn log tail, an unknown
summary, a pattern matching nothing, an unwritable --out or one inside the directory) fails
with a clear message and a non-zero exit and leaves no file.
"""

import collections
import decimal
import hashlib
import os
import random
import shutil
import subprocess
import tempfile

import pytest
import redis

duckdb = pytest.importorskip("duckdb", reason="pip install -r tests/requirements.txt")
pq = pytest.importorskip("pyarrow.parquet", reason="pip install -r tests/requirements.txt")

from test_export import RULES, load_sales, xrange_all  # noqa: E402
from test_summarizer import ABACUS, Node  # noqa: E402

pytestmark = pytest.mark.abacus_only("abacus export is Abacus's")

LAYOUTS = {
    "money": ["--summary", "money"],
    "plain": ["--summary", "plain"],
    "streams": ["--streams", "user:*"],
    "flat": ["--streams", "user:*", "--flat"],
    "series": ["--series", "sensor=temp"],
    "keys": ["--keys", "g:*"],
}


def populate(rc, seed):
    """Writes of every kind; called twice, before and after a SAVE, so the directory holds a
    snapshot and a log with changes after it (new keys, grown keys, a deleted key)."""
    rng = random.Random(seed)
    load_sales(rc, 1500, seed)
    for u in range(60):
        for _ in range(rng.randrange(1, 6)):
            rc.xadd("user:%d" % u, {"channel": rng.choice(["ads", "mail", "é"]), "v": str(rng.random())})
    for s in range(3):
        if not rc.exists("temp:%d" % s):
            rc.execute_command("TS.CREATE", "temp:%d" % s, "LABELS", "sensor", "temp", "room", "r%d" % s)
        for i in range(40):
            rc.execute_command("TS.ADD", "temp:%d" % s, 1_700_000_000_000 + seed * 100_000 + i * 1000, (s * 100 + i + seed) / 8)
    rc.set("g:s:%d" % seed, b"\x00bytes%d" % seed)
    rc.hset("g:h", mapping={"f%d" % seed: "v%d" % seed, "common": str(seed)})
    rc.sadd("g:set", "a%d" % seed, "b")
    rc.zadd("g:z", {"m%d" % seed: seed + 0.5, "m": -seed})
    rc.rpush("g:l", "x%d" % seed, "y")


def answers(rc):
    """The server's own answers, taken before it stops."""
    def query(name, *by):
        return [{k.decode(): v for k, v in zip(r[::2], r[1::2])} for r in rc.execute_command("SUMMARY.QUERY", name, "GROUPBY", *by)]
    streams = {k.decode(): xrange_all(rc, k) for k in rc.scan_iter(match="user:*", _type="stream")}
    series = {"temp:%d" % s: [(ts, float(v)) for ts, v in rc.execute_command("TS.RANGE", "temp:%d" % s, "-", "+")] for s in range(3)}
    return {"money": query("money", "campaign"), "plain": query("plain", "state"), "streams": streams, "series": series,
            "hash": {k.decode(): v.decode() for k, v in rc.hgetall("g:h").items()}, "list": [v.decode() for v in rc.lrange("g:l", 0, -1)],
            "zset": [(m.decode(), s) for m, s in rc.zrange("g:z", 0, -1, withscores=True)]}


def run_export(args, check=True):
    p = subprocess.run([ABACUS, "export", "-q"] + [str(a) for a in args], capture_output=True, text=True, timeout=300)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def offline(data, *args, check=True):
    return run_export(["--dir", data] + list(args), check=check)


def dir_hashes(d):
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            path = os.path.join(root, f)
            with open(path, "rb") as fh:
                out[os.path.relpath(path, d)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def stopped_dir(workdir, how):
    """A data directory written by a server, then stopped by `how` ("shutdown" or "kill");
    with the online exports and the answers taken just before the stop."""
    data = os.path.join(workdir, "data-" + how)
    os.makedirs(data)
    n = Node(data, "--summarizer-rules", os.path.join(workdir, "rules.toml"), "--appendfsync", "always").start()
    try:
        rc = n.client()
        populate(rc, 1)
        rc.save()
        populate(rc, 2)
        rc.delete("user:7")
        online = os.path.join(workdir, "online-" + how)
        os.makedirs(online)
        for name, args in LAYOUTS.items():
            run_export(["-p", n.p.port, "--out", os.path.join(online, name + ".parquet")] + args)
        want = answers(rc)
        if how == "kill":
            n.kill()
        else:
            with pytest.raises(redis.exceptions.ConnectionError):
                rc.execute_command("SHUTDOWN")
            assert n.p.proc.wait(timeout=30) == 0
    finally:
        if n.p.proc.poll() is None:
            n.kill()
    return data, online, want


@pytest.fixture(scope="module")
def workdir():
    d = tempfile.mkdtemp(prefix="abacus-export-offline-")
    with open(os.path.join(d, "rules.toml"), "w") as f:
        f.write(RULES)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module", params=["shutdown", "kill"])
def stopped(request, workdir):
    return stopped_dir(workdir, request.param)


@pytest.fixture
def out(workdir):
    d = tempfile.mkdtemp(prefix="out-", dir=workdir)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def sorted_rows(path):
    return sorted((tuple(sorted(r.items())) for r in pq.read_table(path).to_pylist()), key=repr)


def test_offline_files_equal_online_and_the_answers(stopped, workdir, out):
    data, online, want = stopped
    before = dir_hashes(data)
    rules = os.path.join(workdir, "rules.toml")
    for name, args in LAYOUTS.items():
        path = os.path.join(out, name + ".parquet")
        offline(data, "--rules", rules, "--out", path, *args)
        mine, theirs = pq.read_table(path), pq.read_table(os.path.join(online, name + ".parquet"))
        assert mine.schema == theirs.schema, name
        if name == "keys":
            # A hash's fields come in the order the table holds them, which a reload may change.
            assert sorted_rows(path) == sorted_rows(os.path.join(online, name + ".parquet"))
        else:
            assert mine.equals(theirs), name
    assert dir_hashes(data) == before, "the offline export wrote into the data directory"
    assert sorted(os.listdir(out)) == sorted(n + ".parquet" for n in LAYOUTS)

    # Value for value with the server's answers before the stop.
    money = os.path.join(out, "money.parquet")
    got = duckdb.sql("select campaign, sum(n)::bigint, sum(spend), min(lo), max(hi) from '%s' group by campaign order by campaign" % money).fetchall()
    assert len(got) == len(want["money"]) == 5
    for (campaign, n, spend, lo, hi), w in zip(got, want["money"]):
        assert campaign == w["campaign"].decode() and n == w["n"]
        assert str(spend) == w["spend"].decode()
        assert lo == decimal.Decimal(w["lo"].decode()) and hi == decimal.Decimal(w["hi"].decode())
    plain = {r["state"]: r for r in pq.read_table(os.path.join(out, "plain.parquet")).to_pylist()}
    assert sorted(plain) == [w["state"].decode() for w in want["plain"]]
    for w in want["plain"]:
        g = plain[w["state"].decode()]
        assert g["n"] == w["n"] and str(g["spend"]) == w["spend"].decode() and len(g["names"]) == w["names"]
    rows = pq.read_table(os.path.join(out, "streams.parquet")).to_pylist()
    assert {r["key"]: [(e["id"], dict(e["fields"])) for e in r["entries"]] for r in rows} == want["streams"]
    assert "user:7" not in want["streams"] and len(rows) == 59
    n = duckdb.sql("select count(*) from '%s'" % os.path.join(out, "flat.parquet")).fetchall()[0][0]
    assert n == sum(len(v) for v in want["streams"].values())
    series = collections.defaultdict(list)
    for r in pq.read_table(os.path.join(out, "series.parquet")).to_pylist():
        series[r["key"]].append((int(r["ts"].timestamp() * 1000), r["value"]))
    assert dict(series) == want["series"]
    keys = pq.read_table(os.path.join(out, "keys.parquet")).to_pylist()
    assert {r["member"].decode(): r["value"].decode() for r in keys if r["type"] == "hash"} == want["hash"]
    assert [r["value"].decode() for r in sorted((r for r in keys if r["type"] == "list"), key=lambda r: r["index"])] == want["list"]
    assert sorted((r["member"].decode(), r["score"]) for r in keys if r["type"] == "zset") == sorted(want["zset"])
    assert {r["key"] for r in keys if r["type"] == "string"} == {"g:s:1", "g:s:2"}


def damaged(stopped, workdir, name, damage):
    """A copy of the stopped directory, damaged by `damage(dir)`."""
    data, _, _ = stopped
    d = os.path.join(workdir, name)
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(data, d)
    damage(d)
    return d


def files(d, prefix):
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.startswith(prefix))


def test_bad_input_fails_and_leaves_nothing(stopped, workdir, out):
    data, _, _ = stopped
    rules = os.path.join(workdir, "rules.toml")
    path = os.path.join(out, "x.parquet")

    def truncate_snapshot(d):
        (snap,) = files(d, "snap-")
        size = os.path.getsize(snap)
        with open(snap, "r+b") as f:
            f.truncate(size // 2)

    def corrupt_log(d):
        log = files(d, "log-")[-1]
        b = bytearray(open(log, "rb").read())
        assert len(b) > 200
        b[len(b) // 3] ^= 0xFF
        open(log, "wb").write(bytes(b))

    empty = os.path.join(workdir, "empty")
    os.makedirs(empty, exist_ok=True)
    cases = [
        ([data, "--rules", rules, "--summary", "nope"], "no such summary 'nope' (the server's rules have: money, plain)"),
        ([data, "--summary", "money"], "--rules FILE"),
        ([data, "--streams", "nothing:*"], "no stream key matches 'nothing:*'"),
        ([data, "--keys", "nothing:*"], "no key matches 'nothing:*'"),
        ([data, "--series", "sensor=none"], "no time series matches sensor=none"),
        ([os.path.join(workdir, "no-such-dir"), "--streams", "*"], "no such directory"),
        ([empty, "--streams", "*"], "no manifest"),
        ([damaged(stopped, workdir, "half-snapshot", truncate_snapshot), "--streams", "*"], "snap-"),
        ([damaged(stopped, workdir, "corrupt-log", corrupt_log), "--streams", "*"], "is corrupt at offset"),
    ]
    for args, msg in cases:
        p = offline(*args, "--out", path, check=False)
        assert p.returncode != 0 and msg in p.stderr, (args, p.stderr)
        assert os.listdir(out) == [], args
    p = offline(data, "--streams", "*", "--out", os.path.join(out, "missing-dir", "x.parquet"), check=False)
    assert p.returncode != 0 and "no such directory" in p.stderr and os.listdir(out) == []
    before = dir_hashes(data)
    p = offline(data, "--streams", "*", "--out", os.path.join(data, "x.parquet"), check=False)
    assert p.returncode != 0 and "inside the data directory" in p.stderr
    assert dir_hashes(data) == before


def test_torn_tail_refused_or_skipped_without_touching_the_file(stopped, workdir, out):
    data, _, _ = stopped
    whole = os.path.join(out, "whole.parquet")
    offline(data, "--streams", "user:*", "--out", whole)

    def tear(d):
        log = files(d, "log-")[-1]
        with open(log, "ab") as f:
            f.write(open(log, "rb").read()[:7])  # the start of a record, cut short

    torn = damaged(stopped, workdir, "torn", tear)
    before = dir_hashes(torn)
    path = os.path.join(out, "torn.parquet")
    p = offline(torn, "--streams", "user:*", "--out", path, check=False)
    assert p.returncode != 0 and "incomplete record" in p.stderr and "--skip-torn-tail" in p.stderr, p.stderr
    assert not os.path.exists(path)
    p = offline(torn, "--skip-torn-tail", "--streams", "user:*", "--out", path)
    assert "skipped an incomplete record of 7 bytes" in p.stderr, p.stderr
    assert pq.read_table(path).equals(pq.read_table(whole))
    assert dir_hashes(torn) == before


def test_a_running_servers_directory_is_refused(workdir, out):
    data = os.path.join(workdir, "running")
    os.makedirs(data)
    n = Node(data).start()
    try:
        n.client().xadd("s", {"a": "b"})
        p = offline(data, "--streams", "*", "--out", os.path.join(out, "x.parquet"), check=False)
        assert p.returncode != 0 and "in use by a running server" in p.stderr, p.stderr
        assert os.listdir(out) == []
    finally:
        n.kill()
