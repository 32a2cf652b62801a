"""Durability: the append-only log, snapshots, recovery, torn tails, corruption, SHUTDOWN.

Every test runs a private abacus server on a data directory of its own, stops or kills it,
and starts a new process on the same directory: what comes back is what is on disk.

Random commands: ABACUS_FUZZ_SEED and ABACUS_FUZZ_ROUNDS (default 3000 connections).

Crash rounds: ABACUS_CRASH_ROUNDS (default 20) SIGKILLs of a server under write load with
`appendfsync always`, each followed by a restart that must hold every acknowledged write.
scripts/crash-soak.sh runs more.
"""

import os
import shlex
import random
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time

import pytest
import redis

from conftest import PORT_ATTEMPTS, REPO_ROOT, ServerProcess
from helpers import encode_command

pytestmark = pytest.mark.abacus_only("Abacus's own log and snapshot formats and recovery")

ABACUS = os.environ.get("ABACUS_BIN") or os.path.join(REPO_ROOT, "target", "release", "abacus")
LOG_MAGIC = b"ABACUSL1"


class Node:
    """An abacus server on a data directory that outlives the process."""

    def __init__(self, data_dir, *args, log_dir=None):
        self.data_dir = data_dir
        self.log_dir = log_dir or data_dir
        self.args = [str(a) for a in args]
        self.p = None
        self.runs = 0

    def spawn(self):
        p = ServerProcess("abacus", self.args)
        shutil.rmtree(p.dir, ignore_errors=True)
        p.dir = self.data_dir
        self.runs += 1
        p.log_path = os.path.join(self.log_dir, "server-%d.log" % self.runs)
        p.argv = p._argv()
        self.p = p.spawn()
        return self.p

    def start(self):
        for attempt in range(PORT_ATTEMPTS):
            self.spawn()
            try:
                self.p.wait_ready()
                return self
            except RuntimeError:
                # A port taken before the bind: spawn() picks a new one.
                if attempt + 1 == PORT_ATTEMPTS or not self.p.lost_its_port():
                    raise

    def client(self, **kw):
        kw.setdefault("socket_timeout", 20)
        return redis.Redis(host=self.p.host, port=self.p.port, **kw)

    def kill(self):
        os.killpg(self.p.proc.pid, signal.SIGKILL)
        self.p.proc.wait(timeout=10)

    def term(self):
        os.killpg(self.p.proc.pid, signal.SIGTERM)
        assert self.p.proc.wait(timeout=30) == 0, self.p.log()

    def start_fails(self):
        """Starts a process expected to refuse to start; returns its output."""
        self.spawn()
        code = self.p.wait_exit(30)
        assert code is not None and code != 0, "server started but should have refused"
        return self.p.log()

    def files(self, prefix):
        return sorted(f for f in os.listdir(self.data_dir) if f.startswith(prefix))

    def log_path(self):
        logs = self.files("log-")
        assert logs, os.listdir(self.data_dir)
        return os.path.join(self.data_dir, logs[-1])


@pytest.fixture
def data_dir():
    d = tempfile.mkdtemp(prefix="abacus-persist-")
    nodes = []
    yield d, nodes
    for n in nodes:
        if n.p is not None and n.p.proc.poll() is None:
            os.killpg(n.p.proc.pid, signal.SIGKILL)
            n.p.proc.wait(timeout=10)
    shutil.rmtree(d, ignore_errors=True)


def node(data_dir, *args, **kw):
    d, nodes = data_dir
    n = Node(kw.pop("data", d), *args, log_dir=d, **kw)
    nodes.append(n)
    return n


def fill_every_type(r):
    """Writes keys of every type and encoding in two databases."""
    r.set("str", "hello")
    r.set("int", 12345)
    r.append("raw", "abc")
    r.append("raw", "def")
    r.set("bin", bytes(range(256)))
    r.set("ttl", "v", ex=1000)
    r.set("pttl-abs", "v", pxat=int(time.time() * 1000) + 500000)
    r.incrbyfloat("float", 1.5)
    r.sadd("bitmap", *range(1000))
    r.sadd("listpack-set", "a", "b", "c")
    r.sadd("table-set", *["m%d" % i for i in range(300)])
    r.hset("listpack-hash", mapping={"f1": "v1", "f2": "v2"})
    r.hset("table-hash", mapping={"f%d" % i: "v%d" % i for i in range(600)})
    r.execute_command("HLL.ADD", "sketch", *["u%d" % i for i in range(50)])
    r.execute_command("HLL.ADDINT", "sketch-full", *range(5000))
    r.pfadd("pf", *["e%d" % i for i in range(200)])
    r.setbit("bits", 77, 1)
    r.mset({"{t}a": 1, "{t}b": 2, "x1": 3, "x2": 4})
    r.sadd("popped", *range(50))
    r.spop("popped", 10)
    r.rpush("list", "a", "007", "-0", 1, -5, 2**63 - 1, "x" * 300, b"\x00\xff")
    p = r.pipeline(transaction=False)
    for i in range(0, 100000, 1000):
        p.rpush("big-list", *range(i, i + 1000))
    p.execute()
    r.lpush("big-list", "head")
    r.linsert("big-list", "AFTER", "50000", "middle")
    r.lrem("big-list", 0, "7")
    r.ltrim("big-list", 1, -2)
    r.lset("big-list", 10, "set")
    r.rpush("moved-from", "m1", "m2")
    r.lmove("moved-from", "moved-to", "LEFT", "RIGHT")
    r.execute_command("LMPOP", 1, "moved-from", "RIGHT", "COUNT", 5)
    r.rpush("mpop", *range(10))
    r.execute_command("LMPOP", 2, "nothing", "mpop", "LEFT", "COUNT", 3)
    r.zadd("listpack-zset", {"a": 1.5, "b": -0.0, "c": 1e300, "d": float("-inf")})
    r.zadd("skiplist-zset", {"m%d" % i: i / 7 for i in range(300)})
    r.zadd("skiplist-zset", {"negzero": -0.0})
    r.zincrby("skiplist-zset", 0.1, "m1")
    r.zpopmin("skiplist-zset", 3)
    r.zunionstore("zunion", ["listpack-zset", "listpack-set"], aggregate="MAX")
    # Streams: many nodes, tombstones, trims, consumer groups with pending entries.
    p = r.pipeline(transaction=False)
    for i in range(1, 3001):
        p.xadd("stream", {"channel": ["google", "email", "direct"][i % 3], "event": "click" if i % 5 else "purchase",
                          "n": i}, id="%d-%d" % (1700000000000 + i * 1000, i % 3))
    p.execute()
    r.xdel("stream", "1700000005000-2", "1700000007000-1", "1700002999000-1")
    r.execute_command("XTRIM", "stream", "MAXLEN", "~", "2500")
    r.execute_command("XTRIM", "stream", "MINID", "1700000510000")
    r.xgroup_create("stream", "g1", id="0")
    r.xreadgroup("g1", "alice", {"stream": ">"}, count=10)
    r.xreadgroup("g1", "bob", {"stream": ">"}, count=5, noack=True)
    r.xreadgroup("g1", "carol", {"stream": ">"}, count=3)
    r.xack("stream", "g1", r.xpending_range("stream", "g1", "-", "+", 1)[0]["message_id"])
    r.execute_command("XCLAIM", "stream", "g1", "dave", "0", r.xpending_range("stream", "g1", "-", "+", 1)[0]["message_id"], "RETRYCOUNT", "9")
    r.execute_command("XAUTOCLAIM", "stream", "g1", "erin", "0", "0", "COUNT", "2")
    r.execute_command("XGROUP", "CREATE", "stream", "g2", "$", "ENTRIESREAD", "7")
    r.xgroup_createconsumer("stream", "g2", "idle")
    r.xadd("auto-stream", {"a": 1})
    r.xadd("auto-stream", {"b": 2, "c": "x" * 100})
    r.xgroup_create("empty-stream", "g", mkstream=True)
    r.xadd("emptied", {"a": 1}, id="5-5")
    r.xdel("emptied", "5-5")
    r.execute_command("XSETID", "emptied", "9-9", "ENTRIESADDED", "4", "MAXDELETEDID", "6-6")
    r.expire("int", 5000)
    r3 = redis.Redis(host=r.connection_pool.connection_kwargs["host"],
                     port=r.connection_pool.connection_kwargs["port"], db=3)
    r3.set("in-db-3", "yes")
    r3.close()


def type_and_value(c, k):
    """A key's type and its value in a comparable form (None for other types)."""
    t = c.type(k)
    if t == b"string":
        return t, c.get(k)
    if t == b"set":
        return t, sorted(c.smembers(k))
    if t == b"hash":
        return t, sorted(c.hgetall(k).items())
    if t == b"list":
        return t, c.lrange(k, 0, -1)
    if t == b"zset":
        # Raw replies: the scores' exact text (-0 and 0 differ).
        return t, c.execute_command("ZRANGE", k, 0, -1, "WITHSCORES")
    if t == b"stream":
        # Entries, metadata, groups, consumers and pending entries with their times.
        return t, repr(c.execute_command("XINFO", "STREAM", k, "FULL", "COUNT", "0"))
    return t, None


def dump(r, dbs=(0, 3)):
    """Everything observable about the keyspace, for comparison."""
    host = r.connection_pool.connection_kwargs["host"]
    port = r.connection_pool.connection_kwargs["port"]
    out = {}
    for db in dbs:
        c = redis.Redis(host=host, port=port, db=db)
        for k in sorted(c.keys("*")):
            t, v = type_and_value(c, k)
            ttl = c.pttl(k)
            out[(db, k)] = (t, v, c.object("encoding", k), ttl > 0)
        c.close()
    return out


def test_every_type_survives_restart_kill_and_snapshot(data_dir):
    n = node(data_dir).start()
    r = n.client()
    fill_every_type(r)
    before = dump(r)
    assert r.execute_command("HLL.CARD", "sketch-full")
    n.term()
    n.start()
    r = n.client()
    assert dump(r) == before, "clean restart (log only)"
    # A snapshot, more writes after it, then a crash: snapshot + log tail.
    r.bgsave()
    wait_snapshot(r)
    r.set("after-snapshot", "1")
    r.hset("table-hash", "new", "field")
    before = dump(r)
    n.kill()
    n.start()
    r = n.client()
    assert dump(r) == before, "snapshot + log after a crash"
    assert len(n.files("snap-")) == 1
    assert r.pttl("ttl") > 900000


def shutdown_and_restart(n, r, *args):
    """SHUTDOWN succeeds by closing the connection without a reply and exiting with 0."""
    with pytest.raises(redis.exceptions.ConnectionError):
        r.execute_command("SHUTDOWN", *args)
    assert n.p.proc.wait(timeout=30) == 0
    n.start()


def wait_snapshot(r, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = r.info("persistence")
        if info["rdb_bgsave_in_progress"] == 0:
            assert info["rdb_last_bgsave_status"] == "ok"
            return info
        time.sleep(0.05)
    raise AssertionError("snapshot did not finish")


def test_snapshot_only_mode_save_and_shutdown(data_dir):
    n = node(data_dir, "--appendonly", "no", "--save", "").start()
    r = n.client()
    fill_every_type(r)
    assert r.save() is True
    assert r.lastsave()
    r.set("not-saved", "1")
    before = dump(r)
    assert not n.files("log-")
    n.kill()
    n.start()
    r = n.client()
    after = dump(r)
    assert (0, b"not-saved") not in after
    del before[(0, b"not-saved")]
    lost = {k: v for k, v in before.items() if after.get(k) != v}
    extra = {k: v for k, v in after.items() if k not in before}
    assert not lost and not extra, "changed or lost %r, appeared %r" % (lost, extra)
    # SHUTDOWN SAVE snapshots; the connection just closes.
    r.set("saved-at-shutdown", "1")
    shutdown_and_restart(n, r, "SAVE")
    assert n.client().get("saved-at-shutdown") == b"1"


def test_sigterm_saves_when_a_schedule_is_set_and_the_log_is_off(data_dir):
    n = node(data_dir, "--appendonly", "no", "--save", "3600 1").start()
    r = n.client()
    r.set("k", "v")
    n.term()
    assert n.files("snap-")
    n.start()
    assert n.client().get("k") == b"v"


def test_snapshot_under_writes_is_point_in_time(data_dir):
    """Keys written while the sweep runs must not leak into the snapshot, and
    keys overwritten must appear with their old value."""
    n = node(data_dir, "--appendonly", "no", "--save", "").start()
    r = n.client()
    r.execute_command("DEBUG", "POPULATE", 200000, "key", 8)
    r.bgsave()
    pipe = r.pipeline(transaction=False)
    for i in range(0, 200000, 7):
        pipe.set("key:%d" % i, "changed")
        pipe.set("new:%d" % i, "x")
    pipe.execute()
    wait_snapshot(r)
    n.kill()
    n.start()
    r = n.client()
    assert r.dbsize() == 200000
    assert not r.keys("new:*")
    vals = r.mget(["key:%d" % i for i in range(0, 200000, 7)])
    assert all(v and v.startswith(b"value:") for v in vals)


def test_compaction_bounds_the_log_and_keeps_data(data_dir):
    n = node(data_dir).start()
    r = n.client()
    pipe = r.pipeline(transaction=False)
    for i in range(20000):
        pipe.set("hot", "value-%d" % i)
        pipe.incr("counter")
    pipe.execute()
    big = os.path.getsize(n.log_path())
    assert big > 500000
    assert r.bgrewriteaof()
    info = wait_snapshot(r)
    assert info["aof_enabled"] == 1
    total = sum(os.path.getsize(os.path.join(n.data_dir, f)) for f in n.files("log-") + n.files("snap-"))
    assert total < big / 10, (total, big)
    assert len(n.files("log-")) == 1
    r.incr("counter")
    n.kill()
    n.start()
    r = n.client()
    assert r.get("hot") == b"value-19999"
    assert r.get("counter") == b"20001"


def test_auto_rewrite_when_the_log_grows(data_dir):
    n = node(data_dir, "--auto-aof-rewrite-min-size", "200kb", "--auto-aof-rewrite-percentage", "100",
             "--save", "").start()
    r = n.client()
    first = n.files("log-")
    pipe = r.pipeline(transaction=False)
    for i in range(30000):
        pipe.set("k%d" % (i % 100), "x" * 20)
    pipe.execute()
    deadline = time.monotonic() + 20
    while n.files("log-") == first and time.monotonic() < deadline:
        time.sleep(0.1)
    assert n.files("log-") != first, "no automatic compaction"
    wait_snapshot(r)
    assert r.dbsize() == 100


def test_auto_rewrite_base_is_the_snapshot(data_dir):
    """As Redis's rule with the snapshot as the rewritten file: after a compaction the log
    must grow by auto-aof-rewrite-percentage of the snapshot's data, not of nothing."""
    # Automatic compaction stays off while the 100 keys load: its driver checks every 250 ms,
    # and a check during the loop would snapshot only part of them.
    n = node(data_dir, "--auto-aof-rewrite-min-size", "64kb", "--auto-aof-rewrite-percentage", "0",
             "--save", "").start()
    r = n.client()
    for i in range(100):
        r.set("big%d" % i, os.urandom(10000))  # ~1 MB, incompressible
    r.config_set("auto-aof-rewrite-percentage", 100)
    wait_until(lambda: n.files("snap-"), "the first automatic compaction")
    wait_snapshot(r)
    snap = n.files("snap-")
    info = r.info("persistence")
    snap_bytes = os.path.getsize(os.path.join(n.data_dir, snap[-1]))
    assert info["aof_base_size"] == snap_bytes > 1000000
    assert info["aof_base_data_size"] > 1000000
    assert info["aof_current_size"] >= snap_bytes
    # 200 KB of log: over the minimum, far under 100% of the snapshot.
    for i in range(200):
        r.set("small%d" % i, os.urandom(1000))
    time.sleep(1.5)  # the driver checks every 250 ms
    assert n.files("snap-") == snap, "compacted although the log is a fifth of the snapshot"
    # Past the snapshot's size: compaction.
    for i in range(1100):
        r.set("more%d" % i, os.urandom(1000))
    wait_until(lambda: n.files("snap-") != snap, "compaction once the log outgrew the snapshot")
    wait_snapshot(r)
    assert r.dbsize() == 1400


def test_auto_rewrite_weighs_the_log_against_uncompressed_data(data_dir):
    """The log is not compressed, so the percentage is of the snapshot's data before LZ4:
    a well-compressing dataset must not be compacted every time the log passes its tiny file."""
    # Automatic compaction stays off while the 100 keys load: its driver checks every 250 ms,
    # and a check during the loop would snapshot only part of them.
    n = node(data_dir, "--auto-aof-rewrite-min-size", "64kb", "--auto-aof-rewrite-percentage", "0",
             "--save", "").start()
    r = n.client()
    for i in range(100):
        r.set("big%d" % i, b"x" * 10000)  # ~1 MB of data, a few KB compressed
    r.config_set("auto-aof-rewrite-percentage", 100)
    wait_until(lambda: n.files("snap-"), "the first automatic compaction")
    wait_snapshot(r)
    snap = n.files("snap-")
    info = r.info("persistence")
    assert info["aof_base_size"] < 100000
    assert info["aof_base_data_size"] > 1000000
    # 300 KB of log: several times the file, under a third of the data.
    for i in range(300):
        r.set("small%d" % i, b"y" * 1000)
    time.sleep(1.5)  # the driver checks every 250 ms
    assert n.files("snap-") == snap, "compacted when the log passed the compressed file's size"
    for i in range(1100):
        r.set("more%d" % i, b"z" * 1000)
    wait_until(lambda: n.files("snap-") != snap, "compaction once the log outgrew the data")
    wait_snapshot(r)
    assert r.dbsize() == 1500


def test_relative_expiries_are_logged_as_absolute_times(data_dir):
    n = node(data_dir).start()
    r = n.client()
    r.set("a", "1", ex=100)
    r.setex("b", 100, "1")
    r.set("c", "1")
    r.expire("c", 100)
    r.getex("a", px=50000)
    # A repeated option: the last one wins, in the log too.
    r.execute_command("GETEX", "c", "EX", "10", "EX", "200")
    n.term()
    cmds = logged_commands(n.log_path())
    names = [c[2].upper() for c in cmds]
    assert names == ["SET", "SET", "SET", "PEXPIREAT", "PEXPIREAT", "PEXPIREAT"], cmds
    for c in cmds:
        upper = [a.upper() for a in c[2:]]
        assert "EX" not in upper and "PX" not in upper, c
    # SET a 1 PXAT <ms>, SET b 1 PXAT <ms> (SETEX), then EXPIRE c and GETEX a as PEXPIREAT.
    assert [c[3] for c in cmds] == ["a", "b", "c", "c", "a", "c"]
    assert cmds[0][5].upper() == "PXAT" and cmds[1][5].upper() == "PXAT"
    now_ms = time.time() * 1000
    assert abs(int(cmds[0][6]) - (now_ms + 100000)) < 60000
    assert abs(int(cmds[4][4]) - (now_ms + 50000)) < 60000
    assert abs(int(cmds[5][4]) - (now_ms + 200000)) < 60000


def test_list_writes_are_logged_as_redis_propagates_them(data_dir):
    """LMPOP is logged as the LPOP/RPOP with the count it took; list writes that change
    nothing are not logged."""
    n = node(data_dir).start()
    r = n.client()
    r.rpush("{l}a", 1, 2, 3)
    r.execute_command("LMPOP", 2, "{l}none", "{l}a", "RIGHT", "COUNT", 10)
    r.lpop("{l}a")
    r.lrem("{l}b", 0, "x")
    r.rpush("{l}b", "x", "y")
    r.ltrim("{l}b", 0, -1)
    r.lrem("{l}b", 0, "z")
    r.linsert("{l}b", "BEFORE", "z", "w")
    r.lpushx("{l}none", "v")
    r.lmove("{l}b", "{l}c", "LEFT", "LEFT")
    r.lmove("{l}none", "{l}c", "LEFT", "LEFT")
    r.execute_command("LMPOP", 1, "{l}b", "LEFT")
    n.term()
    cmds = [[c[2].upper()] + c[3:] for c in logged_commands(n.log_path())]
    assert cmds == [["RPUSH", "{l}a", "1", "2", "3"], ["RPOP", "{l}a", "3"], ["RPUSH", "{l}b", "x", "y"],
                    ["LMOVE", "{l}b", "{l}c", "LEFT", "LEFT"], ["LPOP", "{l}b", "1"]], cmds
    n.start()
    r = n.client()
    assert r.keys("*") == [b"{l}c"] and r.lrange("{l}c", 0, -1) == [b"x"]


def logged_commands(path):
    """Every command of a log file, as `abacus check-aof --print` shows them: lists of
    [time_ms, db, arg, arg...] (arguments unquoted; the tests log only printable ones)."""
    out = subprocess.run([ABACUS, "check-aof", "--print", path], capture_output=True, text=True, check=True).stdout
    return [shlex.split(line) for line in out.splitlines()]


def test_log_records_are_compact(data_dir):
    """A pipelined APPEND costs its arguments' bytes plus a few: varint lengths, its command
    name as two bytes and its time only when it differs from the command before it."""
    n = node(data_dir).start()
    r = n.client()
    p = r.pipeline(transaction=False)
    for i in range(1000):
        p.append("key:%012d" % i, "v" * 16)
    p.execute()
    n.term()
    path = n.log_path()
    size = os.path.getsize(path)
    # 16-byte key and value: 1 (db, time flag) + 1 (argc) + 2 (name) + 17 + 17 = 38 bytes.
    assert size < 8 + 1000 * 38 + 1000 * 6 + 64 * 12, size
    cmds = logged_commands(path)
    # The two shards' records interleave in the file: compare as a set.
    assert sorted(c[2:] for c in cmds) == [["APPEND", "key:%012d" % i, "v" * 16] for i in range(1000)]


def read_records(path):
    """(start, end) byte offsets of each record of a log file."""
    data = open(path, "rb").read()
    assert data[:8] == LOG_MAGIC
    at, out = 8, []
    while at < len(data):
        (word,) = struct.unpack_from("<Q", data, at)
        end = at + 12 + (word & ((1 << 56) - 1))  # the top byte is the record's format
        out.append((at, end))
        at = end
    return data, out


def logged_keys(data_dir, count):
    """A killed server whose log holds `count` records (SET k<i> v<i>); returns the node,
    the log's path, its bytes and its records."""
    n = node(data_dir).start()
    r = n.client()
    for i in range(count):
        r.set("k%d" % i, "v%d" % i)
    n.kill()
    path = n.log_path()
    data, records = read_records(path)
    assert len(records) == count
    return n, path, data, records


def test_torn_tail_at_every_offset_keeps_everything_before(data_dir):
    n, path, data, records = logged_keys(data_dir, 5)
    for cut in range(records[3][0], len(data)):
        with open(path, "wb") as f:
            f.write(data[:cut])
        n.start()
        r = n.client()
        whole = sum(1 for (_, end) in records if end <= cut)
        got = r.mget(["k%d" % i for i in range(5)])
        assert got == [b"v%d" % i if i < whole else None for i in range(5)], cut
        if cut != records[whole - 1][1]:
            assert "dropping the last %d bytes" % (cut - records[whole - 1][1]) in n.p.log()
        n.kill()


def test_torn_tail_refused_when_aof_load_truncated_is_no(data_dir):
    n = node(data_dir).start()
    n.client().set("a", "1")
    n.kill()
    path = n.log_path()
    data = open(path, "rb").read()
    open(path, "wb").write(data[:-3])
    n.args += ["--aof-load-truncated", "no"]
    out = n.start_fails()
    assert "incomplete record" in out and "check-aof" in out


def test_corruption_in_the_middle_stops_start_and_check_aof_fixes_it(data_dir):
    n, path, data, records = logged_keys(data_dir, 6)
    bad = bytearray(data)
    bad[records[2][0] + 14] ^= 0xFF
    open(path, "wb").write(bytes(bad))
    out = n.start_fails()
    assert "corrupt at offset %d" % records[2][0] in out, out
    assert "check-aof --fix" in out
    check = subprocess.run([ABACUS, "check-aof", path], capture_output=True, text=True)
    assert check.returncode != 0 and "corruption at offset" in check.stdout
    fix = subprocess.run([ABACUS, "check-aof", "--fix", path], capture_output=True, text=True)
    assert fix.returncode == 0 and "truncated" in fix.stdout, fix.stdout + fix.stderr
    n.start()
    assert n.client().mget(["k%d" % i for i in range(6)]) == [b"v0", b"v1", None, None, None, None]


def test_corrupt_snapshot_is_rejected_by_checksum(data_dir):
    n = node(data_dir, "--appendonly", "no", "--save", "").start()
    r = n.client()
    r.execute_command("DEBUG", "POPULATE", 10000)
    r.save()
    n.kill()
    snap = os.path.join(n.data_dir, n.files("snap-")[-1])
    data = bytearray(open(snap, "rb").read())
    good = bytes(data)
    ok = subprocess.run([ABACUS, "check-snapshot", snap], capture_output=True, text=True)
    assert ok.returncode == 0 and "10000 keys" in ok.stdout
    # Flip a byte inside the first block's compressed payload (header: 28 bytes; block header:
    # kind, shard u16, raw len u32, compressed len u32, crc u32), so the damage is one the
    # block checksum must catch, not a length field that fails the structure check first.
    compressed_len = int.from_bytes(data[28 + 7:28 + 11], "little")
    assert data[28] == 1 and compressed_len > 2
    data[28 + 15 + compressed_len // 2] ^= 0x01
    open(snap, "wb").write(bytes(data))
    out = n.start_fails()
    assert "corrupt" in out and "checksum" in out, out
    bad = subprocess.run([ABACUS, "check-snapshot", snap], capture_output=True, text=True)
    assert bad.returncode != 0 and "checksum" in bad.stderr
    open(snap, "wb").write(good[:-5])
    out = n.start_fails()
    assert "corrupt" in out


def test_a_key_too_big_for_a_snapshot_block_is_refused_never_written(data_dir):
    """With proto-max-bulk-len raised past 1 GiB a value can outgrow the largest snapshot
    block a reader accepts: the snapshot fails naming the key (the log keeps it), rather than
    writing a file the next start would reject. A big value that fits is snapshotted."""
    d, _ = data_dir
    n = node(data_dir, "--proto-max-bulk-len", "4gb", "--save", "").start()
    r = n.client()
    fits, big = 600 * 1024 * 1024, 1 << 30
    assert r.setrange("fits", fits, "x") == fits + 1
    assert r.setrange("big", big, "x") == big + 1
    with pytest.raises(redis.ResponseError, match="snapshot failed"):
        r.save()
    assert "key 'big' (database 0) takes" in n.p.log(), n.p.log()
    assert not [f for f in os.listdir(d) if f.endswith(".tmp")], os.listdir(d)
    assert not n.files("snap-"), "no snapshot file: the failed one was removed"
    n.term()
    r = n.start().client()
    assert r.strlen("big") == big + 1 and r.strlen("fits") == fits + 1
    assert r.delete("big") == 1
    assert r.save()
    n.term()
    r = n.start().client()
    assert r.strlen("fits") == fits + 1 and r.exists("big") == 0
    assert r.getrange("fits", fits - 1, fits) == b"\x00x"


def test_pfcount_cache_refresh_is_logged(data_dir):
    """PFCOUNT stores the cardinality it computed in the HyperLogLog's header (GET shows it):
    a read that changes the value, so it is logged as Redis propagates it, and a replay gives
    the same bytes (a fuzz seed found the replayed header still marked stale)."""
    n = node(data_dir).start()
    r = n.client()
    assert r.pfadd("p", "a", "b", "c") == 1
    stale = r.get("p")
    assert stale[15] & 0x80, "PFADD leaves the cache marked stale"
    assert r.pfcount("p") == 3
    fresh = r.get("p")
    assert fresh != stale and not fresh[15] & 0x80
    n.kill()
    assert n.start().client().get("p") == fresh


def test_shutdown_nosave_keeps_logged_writes_and_rejects_bad_args(data_dir):
    n = node(data_dir).start()
    r = n.client()
    with pytest.raises(redis.ResponseError, match="syntax error"):
        r.execute_command("SHUTDOWN", "SAVE", "NOSAVE")
    with pytest.raises(redis.ResponseError, match="No shutdown in progress"):
        r.execute_command("SHUTDOWN", "ABORT")
    r.set("k", "v")
    shutdown_and_restart(n, r, "NOSAVE")
    assert n.client().get("k") == b"v"


def test_appendfsync_always_config_and_info(data_dir):
    n = node(data_dir, "--appendfsync", "always").start()
    r = n.client()
    assert r.config_get("appendfsync") == {"appendfsync": "always"}
    r.set("a", "1")
    info = r.info("persistence")
    assert info["aof_enabled"] == 1 and info["aof_fsync_policy"] == "always"
    assert info["aof_pending_bio_fsync"] == 0
    r.config_set("appendfsync", "everysec")
    assert r.info("persistence")["aof_fsync_policy"] == "everysec"
    with pytest.raises(redis.ResponseError):
        r.config_set("appendfsync", "sometimes")
    with pytest.raises(redis.ResponseError):
        r.config_set("save", "10")
    assert r.bgsave()
    wait_snapshot(r)
    assert r.lastsave()


def test_last_save_durations_are_minus_one_before_the_first(data_dir):
    # Redis reports -1 for the last snapshot's and rewrite's duration until one has run.
    n = node(data_dir, "--save", "").start()
    r = n.client()
    info = r.info("persistence")
    assert info["rdb_saves"] == 0
    assert info["rdb_last_bgsave_time_sec"] == -1
    assert info["aof_last_rewrite_time_sec"] == -1
    assert r.bgsave()
    wait_snapshot(r)
    info = r.info("persistence")
    assert info["rdb_saves"] == 1
    assert info["rdb_last_bgsave_time_sec"] >= 0
    assert info["aof_last_rewrite_time_sec"] >= 0


CRASH_ROUNDS = int(os.environ.get("ABACUS_CRASH_ROUNDS", "20"))


def test_sigkill_under_load_loses_no_acknowledged_write(data_dir):
    """appendfsync always: writers record what was acknowledged; the server is
    SIGKILLed at a random moment; after the restart every acknowledged write
    is there, and recovery always succeeds."""
    n = node(data_dir, "--appendfsync", "always").start()
    rng = random.Random(int(os.environ.get("ABACUS_CRASH_SEED", "7")))
    acked_counters = {}
    attempted_counters = {}
    acked_sets = {}
    acked_multi = {}
    acked_entries = {}
    acked_pending = {}
    for rnd in range(CRASH_ROUNDS):
        stop = threading.Event()
        lock = threading.Lock()

        def writer(wid):
            c = n.client(socket_timeout=5)
            # Counts on across rounds: until this round's first acknowledged MSET, `acked_multi`
            # holds the previous round's last number, and this round's writes (durable even
            # when the kill cut their reply) must not compare below it. Restarting at 1 made
            # the check fail now and then on a correct server (stored 1, last acked 9).
            i = rnd * 1_000_000
            stream = "st:%d" % wid
            try:
                try:
                    c.xgroup_create(stream, "g", id="0", mkstream=True)
                except redis.exceptions.ResponseError:
                    pass  # BUSYGROUP: created in an earlier round
                while not stop.is_set():
                    i += 1
                    key = "w%d:r%d:%d" % (wid, rnd, i)
                    c.set(key, "v%d" % i)
                    with lock:
                        acked_sets[key] = b"v%d" % i
                    with lock:
                        attempted_counters[wid] = attempted_counters.get(wid, 0) + 1
                    c.incr("counter:%d" % wid)
                    with lock:
                        acked_counters[wid] = acked_counters.get(wid, 0) + 1
                    # Atomic over shards: both or neither.
                    c.mset({"m:%d:a" % wid: i, "m:%d:b" % wid: i})
                    p = c.pipeline(transaction=True)
                    p.set("tx:%d:a" % wid, i)
                    p.set("tx:%d:b" % wid, i)
                    p.execute()
                    with lock:
                        acked_multi[wid] = i
                    # Streams: entries and the consumer group's deliveries.
                    c.xadd(stream, {"i": i, "kind": "click"}, id="%d-1" % i)
                    with lock:
                        acked_entries.setdefault(wid, set()).add(b"%d-1" % i)
                    if i % 7 == 0:
                        got = c.xreadgroup("g", "c%d" % wid, {stream: ">"}, count=5)
                        with lock:
                            for _, entries in got:
                                acked_pending.setdefault(wid, set()).update(e[0] for e in entries)
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
                pass
            finally:
                c.close()

        threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
        for t in threads:
            t.start()
        if rnd % 5 == 2:
            try:
                n.client().bgsave()
            except redis.exceptions.RedisError:
                pass
        time.sleep(rng.uniform(0.05, 0.6))
        n.kill()
        stop.set()
        for t in threads:
            t.join(timeout=30)
        n.start()
        r = n.client()
        keys = list(acked_sets)
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            got = r.mget(chunk)
            missing = [k for k, v in zip(chunk, got) if v != acked_sets[k]]
            assert not missing, "round %d lost acknowledged writes: %s" % (rnd, missing[:5])
        for wid, count in acked_counters.items():
            v = int(r.get("counter:%d" % wid) or 0)
            # Increments whose replies were lost in a kill may be there too.
            assert count <= v <= attempted_counters[wid], (rnd, wid, count, v)
        for wid, ids in acked_entries.items():
            have = {e[0] for e in r.xrange("st:%d" % wid)}
            assert ids <= have, "round %d lost acknowledged XADDs: %s" % (rnd, sorted(ids - have)[:5])
        for wid, ids in acked_pending.items():
            have = {p["message_id"] for p in r.xpending_range("st:%d" % wid, "g", "-", "+", 10**6)}
            assert ids <= have, "round %d lost acknowledged deliveries: %s" % (rnd, sorted(ids - have)[:5])
        for wid, i in acked_multi.items():
            a, b = r.mget("m:%d:a" % wid, "m:%d:b" % wid)
            assert a == b and int(a) >= i, (rnd, wid, a, b, i)
            a, b = r.mget("tx:%d:a" % wid, "tx:%d:b" % wid)
            assert a == b and int(a) >= i, (rnd, wid, a, b, i)
        r.close()
    assert acked_sets, "the writers never got a write acknowledged"


def test_clients_get_loading_errors_never_partial_data_while_loading(data_dir):
    """While a restart loads the data, every reply is -LOADING or the loaded value, never a
    missing key; INFO answers throughout."""
    n = node(data_dir, "--appendonly", "no", "--save", "").start()
    r = n.client()
    r.execute_command("DEBUG", "POPULATE", 2000000)
    r.save()
    n.kill()
    n.spawn()
    seen = set()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            c = redis.Redis(host=n.p.host, port=n.p.port, socket_timeout=20)
            info = c.info("persistence")
            assert info["loading"] in (0, 1)
            if info["loading"] == 1:
                assert 0 <= info["loading_loaded_perc"] <= 100
            v = c.get("key:1999999")
            assert v == b"value:1999999", v
            seen.add("loaded")
            break
        except redis.exceptions.BusyLoadingError:
            seen.add("loading")
        except redis.exceptions.ConnectionError:
            time.sleep(0.01)
    assert "loaded" in seen
    assert n.client().dbsize() == 2000000


@pytest.fixture
def small_disk():
    """A 6 MiB tmpfs: a disk that fills up. Needs root (the test command runs as root)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    d = tempfile.mkdtemp(prefix="abacus-small-disk-")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", d], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here: %s" % mounted.stderr.decode(errors="replace"))
    yield d
    subprocess.run(["umount", "-l", d], check=False)
    shutil.rmtree(d, ignore_errors=True)


def wait_until(pred, what, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError("timed out waiting for: " + what)


def test_disk_full_refuses_writes_loses_no_acknowledged_write_and_recovers(data_dir, small_disk):
    """The log's disk fills up: the write whose record failed is kept and retried, later
    writes get Redis's MISCONF error (queued ones in MULTI too), reads go on, SHUTDOWN and
    SIGTERM refuse to exit while acknowledged writes are only in memory, a snapshot refuses
    to start; once space is freed, writes resume by themselves, and after a crash every
    acknowledged write is back."""
    filler = os.path.join(small_disk, "filler")
    with open(filler, "wb") as f:
        f.write(b"\0" * (2 << 20))
    n = node(data_dir, "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", data=small_disk)
    n.start()
    r = n.client()
    value = lambda i: (b"%08d" % i) * 512  # 4 KiB
    acked = []
    refused = None
    for i in range(10000):
        try:
            r.set("k%d" % i, value(i))
            acked.append(i)
        except redis.ResponseError as e:
            refused = str(e)
            break
    assert refused is not None, "the disk never filled up"
    assert refused.startswith("MISCONF Errors writing to the AOF file: No space left on device"), refused
    assert len(acked) > 100
    info = r.info("persistence")
    assert info["aof_last_write_status"] == "err"
    # Reads go on; writes of every kind are refused.
    assert r.get("k%d" % acked[-1]) == value(acked[-1])
    assert r.dbsize() == len(acked)
    with pytest.raises(redis.ResponseError, match="^MISCONF"):
        r.incr("counter")
    with pytest.raises(redis.ResponseError, match="^MISCONF"):
        r.delete("k0")
    p = r.pipeline(transaction=True)
    p.get("k0").set("in-multi", "x")
    with pytest.raises(redis.ResponseError, match="EXECABORT|MISCONF"):
        p.execute()
    assert r.exists("in-multi") == 0
    # No snapshot can start past a record waiting for its retry.
    with pytest.raises(redis.ResponseError, match="append-only log cannot be written"):
        r.execute_command("BGSAVE")
    # SHUTDOWN and SIGTERM refuse to drop the record that waits for space.
    with pytest.raises(redis.ResponseError, match="Errors trying to SHUTDOWN"):
        r.execute_command("SHUTDOWN")
    os.kill(n.p.proc.pid, signal.SIGTERM)
    wait_until(lambda: "errors trying to shut down" in n.p.log(), "SIGTERM refusal in the log")
    assert n.p.proc.poll() is None, "the server exited with an unwritten acknowledged write"
    # PING reports the failure too, as Redis's does (health checks must see it).
    with pytest.raises(redis.ResponseError, match="^MISCONF Errors writing to the AOF file"):
        r.ping()
    # Space comes back: the retry lands and writes resume without intervention.
    os.remove(filler)

    def writable():
        try:
            return r.set("after", "space")
        except redis.ResponseError:
            return False

    wait_until(writable, "writes to resume after space was freed")
    assert r.info("persistence")["aof_last_write_status"] == "ok"
    r.bgsave()
    wait_snapshot(r)
    r.set("after-snapshot", "1")
    n.kill()
    n.start()
    r = n.client()
    for i in acked:
        assert r.get("k%d" % i) == value(i), "acknowledged key k%d lost" % i
    assert r.get("after") == b"space" and r.get("after-snapshot") == b"1"
    assert r.dbsize() == len(acked) + 2


def test_snapshot_on_a_full_disk_fails_cleanly_and_sigterm_waits_for_one_that_fits(data_dir, small_disk):
    """Snapshots only (the log off): a snapshot bigger than the disk fails with an error and
    leaves no partial file; SIGTERM, which must save, refuses to exit instead of dropping
    the writes since the last good snapshot; once the data fits, SIGTERM saves and exits."""
    n = node(data_dir, "--appendonly", "no", "--save", "3600 1", data=small_disk).start()
    r = n.client()
    r.set("first", "1")
    assert r.save()
    for i in range(4000):  # 16 MiB of incompressible values on a 6 MiB disk
        r.set("big%d" % i, os.urandom(4096))
    with pytest.raises(redis.ResponseError):
        r.save()
    assert r.info("persistence")["rdb_last_bgsave_status"] == "err"
    assert not [f for f in os.listdir(small_disk) if f.endswith(".tmp")], os.listdir(small_disk)
    # stop-writes-on-bgsave-error (default yes) with a save schedule: writes and PING are
    # refused until a snapshot succeeds or the operator says otherwise; reads go on.
    with pytest.raises(redis.ResponseError, match="^MISCONF .*stop-writes-on-bgsave-error"):
        r.set("second", "2")
    with pytest.raises(redis.ResponseError, match="^MISCONF"):
        r.ping()
    p = r.pipeline(transaction=True)
    p.set("in-multi", "x")
    with pytest.raises(redis.ResponseError, match="EXECABORT|MISCONF"):
        p.execute()
    assert r.get("first") == b"1"
    r.config_set("stop-writes-on-bgsave-error", "no")
    assert r.ping()
    r.set("second", "2")
    os.kill(n.p.proc.pid, signal.SIGTERM)
    wait_until(lambda: "errors trying to shut down" in n.p.log(), "SIGTERM refusal in the log")
    assert n.p.proc.poll() is None, "the server exited without saving"
    r.delete(*["big%d" % i for i in range(4000)])
    os.kill(n.p.proc.pid, signal.SIGTERM)
    assert n.p.proc.wait(timeout=60) == 0, n.p.log()
    n.start()
    r = n.client()
    assert r.get("first") == b"1" and r.get("second") == b"2" and r.dbsize() == 2


def test_everysec_writes_acknowledged_by_the_other_thread_survive_sigkill(data_dir):
    """A pipeline mixing both shards gets all its replies from the other worker thread
    (direct replies), including those of the writes that ran on the connection's own shard:
    those must be in the log (written, with everysec) before the other thread replies, so a
    process crash right after the replies loses none of them."""
    n = node(data_dir, "--appendonly", "yes", "--appendfsync", "everysec",
             "--migrate-connections-after", "0").start()
    r = n.client()
    keys = ["dr:%d" % i for i in range(16)]  # both shards
    acked = {k: 0 for k in keys}
    for round_ in range(300):
        p = r.pipeline(transaction=False)
        for k in keys:
            p.incr(k)
        for k, v in zip(keys, p.execute()):
            assert v == acked[k] + 1
            acked[k] = v
    assert int(r.info("stats")["direct_replies"]) > 0
    n.kill()
    n.start()
    r = n.client()
    assert {k: int(r.get(k)) for k in keys} == acked


# Commands the random-command test leaves out: they stop the server, pause it
# (DEBUG SLEEP), or change its configuration for every later connection (CONFIG SET of
# requirepass, maxmemory, timeout, ...); each has tests of its own.
FUZZ_SKIP = {b"shutdown", b"debug", b"config"}
# ...and these it sends ten times less often than the others, so that data accumulates.
FUZZ_RARE = {b"flushall", b"flushdb", b"swapdb"}


def fuzz_args(rng, keys):
    """One random argument: a key (of every type, in both shards and one hash tag), a
    number at the edges, an option keyword, binary junk, or a long string. Numbers stay
    below sizes that would make the test allocate hundreds of MB (SETRANGE and SETBIT
    offsets are the client's to choose, as in Redis)."""
    pool = rng.random()
    if pool < 0.35:
        return rng.choice(keys)
    if pool < 0.6:
        return rng.choice([b"0", b"1", b"-1", b"2", b"3", b"5", b"11", b"17", b"100", b"1000",
                           b"1.5", b"-2.5e3", b"inf", b"-inf", b"nan", b"0x10", b" 1", b"",
                           b"9223372036854775807", b"-9223372036854775808",
                           b"99999999999999999999", b"4294967296"])
    if pool < 0.85:
        return rng.choice([b"NX", b"XX", b"GT", b"LT", b"EX", b"PX", b"EXAT", b"PXAT",
                           b"KEEPTTL", b"GET", b"PERSIST", b"COUNT", b"MATCH", b"TYPE", b"BYTE",
                           b"BIT", b"REPLACE", b"DB", b"LIMIT", b"WITHVALUES", b"LOG2M",
                           b"REGWIDTH", b"EXPTHRESH", b"SPARSEON", b"SEED", b"ASYNC", b"SYNC",
                           b"IDX", b"LEN", b"MINMATCHLEN", b"WITHMATCHLEN", b"ID", b"LIST",
                           b"INFO", b"SETNAME", b"ENCODING", b"FREQ", b"*", b"k*", b"string"])
    if pool < 0.95:
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 24)))
    # Sketch-looking and long strings: the HLL / PF parsers' paths.
    return rng.choice([b"\x11\x8b\x7f", b"\x12\x8b\x7f" + bytes(rng.getrandbits(8) for _ in range(16)),
                       b"HYLL\x00\x00\x00\x00" + bytes(rng.getrandbits(8) for _ in range(12)),
                       b"x" * rng.randint(100, 3000)])


def persistent_state(host, port):
    """Type and value of every key without an expiry, in every database."""
    out = {}
    for db in range(16):
        c = redis.Redis(host=host, port=port, db=db, socket_timeout=20)
        for k in c.scan_iter(count=1000):
            if c.pttl(k) != -1:
                continue  # may expire at any moment, or already has
            out[(db, k)] = type_and_value(c, k)
        c.close()
    return out


def test_random_commands_never_crash_and_replay_to_the_same_state(data_dir):
    # Every command the server lists, with random arguments, pipelined a few at a time on
    # fresh connections: each gets replies or a clean close, the server never panics, and
    # after a SIGKILL the log (and whatever snapshots BGSAVE / BGREWRITEAOF left) replays
    # to exactly the keys and values the clients could read before it.
    n = node(data_dir).start()
    r = n.client()
    names = sorted({name.split(b"|")[0] for name in r.command_list()}
                   - FUZZ_SKIP)
    assert b"set" in names and b"hll.add" in names and b"sinterstore" in names
    keys = [b"s", b"n", b"h", b"z", b"p", b"hl", b"{t}a", b"{t}b", b"k1", b"k2", b"nokey"]
    r.set("s", "hello")
    r.set("n", 42)
    r.hset("h", mapping={"f": "v", "g": "1"})
    r.sadd("z", 1, 2, 3, 70000)
    r.pfadd("p", "a", "b")
    r.execute_command("HLL.ADD", "hl", "a", "b")
    r.sadd("{t}a", "x", "y")
    r.set("{t}b", "1")

    # ABACUS_FUZZ_SEED and ABACUS_FUZZ_ROUNDS explore further (the default is fixed, so a
    # failure in CI reproduces).
    seed = int(os.environ.get("ABACUS_FUZZ_SEED", "20261122"))
    rng = random.Random(seed)
    host, port = n.p.host, n.p.port
    for i in range(int(os.environ.get("ABACUS_FUZZ_ROUNDS", "3000"))):
        # A third of the connections work in another database.
        payload = encode_command(b"SELECT", rng.choice([b"1", b"3", b"15"])) if rng.random() < 0.33 else b""
        for _ in range(rng.randint(1, 4)):
            name = rng.choice(names)
            while name in FUZZ_RARE and rng.random() < 0.9:
                name = rng.choice(names)
            args = [fuzz_args(rng, keys) for _ in range(rng.choice([0, 1, 1, 2, 2, 3, 4, 6]))]
            payload += encode_command(name, *args)
        with socket.create_connection((host, port), timeout=20) as s:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            try:
                while s.recv(65536):
                    pass
            except ConnectionResetError:
                pass
        if i % 200 == 0:
            assert n.p.proc.poll() is None, n.p.log()
    assert r.ping()
    assert "panicked" not in n.p.log(), n.p.log()

    before = persistent_state(host, port)
    n.kill()
    n.start()
    after = persistent_state(n.p.host, n.p.port)
    assert "panicked" not in n.p.log(), n.p.log()
    lost = {k: v for k, v in before.items() if after.get(k) != v}
    extra = {k: v for k, v in after.items() if k not in before}
    assert not lost and not extra, "seed %d: changed or lost %r, appeared %r, now %r" % (seed, lost, extra, {k: after.get(k) for k in lost})


def test_loaded_keys_start_with_a_fresh_access_field(data_dir):
    # The access field is Redis's 24-bit `lru` and wraps, so loaded keys are stamped at load
    # as Redis stamps loaded objects: idle 0 under LRU (and the default policy), LFU_INIT_VAL
    # under LFU (what Redis's RDB FREQ opcode would restore for a key never read).
    n = node(data_dir, "--appendonly", "no", "--save", "").start()
    r = n.client()
    r.set("k", "v")
    assert r.save() is True
    n.kill()
    n.start()
    assert n.client().object("idletime", "k") <= 2
    n.kill()
    lfu = node(data_dir, "--appendonly", "no", "--save", "", "--maxmemory-policy", "allkeys-lfu").start()
    assert lfu.client().object("freq", "k") == 5
