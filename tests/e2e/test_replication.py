"""Replication: REPLICAOF, PSYNC (full and partial), WAIT, ROLE, INFO replication, read-only
replicas and promotion, against real processes on loopback.

Every comparison of a replica with its primary follows a `WAIT 1 <timeout>` that returned 1:
the replica acknowledged every byte of the stream up to the writes before it, so the data
must be equal at that moment (no sleeps decide a result). The digest compares every key of
every database used: its TYPE, its DUMP payload and whether it has a TTL.

These tests run against Redis too (`--target redis`): what they check is Redis's behaviour.
"""

import re
import socket
import threading

import pytest
import redis

from helpers import kv_fields, wait_until

WAIT_MS = 10000
LINK_TIMEOUT = 20.0


def info(client, section="replication"):
    """INFO's fields as strings (redis-py's parsed `slaveN` lines back to `a=1,b=2` form)."""
    out = {}
    for k, v in client.info(section).items():
        if isinstance(v, dict):
            v = ",".join("%s=%s" % kv for kv in v.items())
        out[k] = str(v)
    return out


def link_up(replica):
    return info(replica).get("master_link_status") == "up"


def attach(replica, primary):
    """Makes `replica` a replica of `primary` and waits for its link to be up."""
    assert replica.client().execute_command("REPLICAOF", primary.host, primary.port) in (b"OK", True)
    assert wait_until(lambda: link_up(replica.client()), timeout=LINK_TIMEOUT), replica.log()


def wait_acked(primary_client, n=1):
    got = primary_client.execute_command("WAIT", n, WAIT_MS)
    assert got >= n, "WAIT %d %d returned %r" % (n, WAIT_MS, got)


def digest(client, dbs=(0,)):
    """Every key's type, value and whether it has a TTL. Values are read by type (a set's
    members sorted, a hash's fields sorted): two servers may lay out the same value
    differently (Redis's DUMP of a set shows its insertion order)."""
    out = {}
    for db in dbs:
        c = redis.Redis(host=client.connection_pool.connection_kwargs["host"],
                        port=client.connection_pool.connection_kwargs["port"], db=db)
        keys = list(c.scan_iter(count=1000))
        p = c.pipeline(transaction=False)
        for k in keys:
            p.type(k)
            p.pttl(k)
        meta = p.execute()
        p = c.pipeline(transaction=False)
        for i, k in enumerate(keys):
            t = meta[2 * i]
            if t == b"string":
                p.get(k)
            elif t == b"list":
                p.lrange(k, 0, -1)
            elif t == b"hash":
                p.hgetall(k)
            elif t == b"set":
                p.smembers(k)
            elif t == b"zset":
                p.zrange(k, 0, -1, withscores=True)
            elif t == b"stream":
                p.xrange(k)
            else:
                p.dump(k)
        values = p.execute()
        for i, k in enumerate(keys):
            v = values[i]
            if isinstance(v, (set, dict)):
                v = sorted(v.items()) if isinstance(v, dict) else sorted(v)
            out[(db, k)] = (meta[2 * i], v, meta[2 * i + 1] > 0)
        c.close()
    return out


def write_every_type(r, tag):
    """Writes of every type, with expiries, across shards, in a transaction and in db 3."""
    r.set("s:%s" % tag, "v" * 10)
    r.set("ttl:%s" % tag, "x", ex=1000)
    r.incrby("n:%s" % tag, 7)
    r.append("s:%s" % tag, "-more")
    r.mset({"m1:%s" % tag: "a", "m2:%s" % tag: "b", "m3:%s" % tag: "c"})
    r.rpush("l:%s" % tag, *range(50))
    r.lpop("l:%s" % tag)
    r.hset("h:%s" % tag, mapping={"f%d" % i: i for i in range(20)})
    r.hdel("h:%s" % tag, "f3")
    r.sadd("si:%s" % tag, *range(100))
    r.sadd("ss:%s" % tag, "a", "b", "c")
    r.spop("ss:%s" % tag)
    r.zadd("z:%s" % tag, {"m%d" % i: i * 1.5 for i in range(30)})
    r.zincrby("z:%s" % tag, 2, "m1")
    r.xadd("x:%s" % tag, {"a": "1"})
    r.xadd("x:%s" % tag, {"b": "2"})
    r.pfadd("p:%s" % tag, *("u%d" % i for i in range(100)))
    r.expire("s:%s" % tag, 5000)
    r.set("gone:%s" % tag, "1")
    r.delete("gone:%s" % tag)
    p = r.pipeline(transaction=True)
    p.set("t1:%s" % tag, "1")
    p.incr("t2:%s" % tag)
    p.lpush("t3:%s" % tag, "z")
    p.execute()
    r.execute_command("SELECT", 3)
    r.set("db3:%s" % tag, "three")
    r.execute_command("SELECT", 0)


@pytest.fixture
def pair(server):
    primary = server.start()
    replica = server.start()
    return primary, replica


def test_replica_follows_writes_of_every_type(pair):
    primary, replica = pair
    p = primary.client()
    write_every_type(p, "before")  # carried by the full sync
    attach(replica, primary)
    write_every_type(p, "after")  # carried by the stream
    r3 = redis.Redis(host=primary.host, port=primary.port, db=3)
    r3.flushdb()
    r3.set("db3:last", "x")
    wait_acked(p)
    rc = replica.client()
    want = digest(p, dbs=(0, 3))
    assert len(want) > 30
    assert digest(rc, dbs=(0, 3)) == want
    assert rc.get("db3:before") is None  # FLUSHDB in db 3 replicated
    assert rc.pttl("ttl:after") > 0


def test_role_info_and_read_only(pair):
    primary, replica = pair
    attach(replica, primary)
    p, rc = primary.client(), replica.client()
    p.set("k", "v")
    wait_acked(p)
    role = p.execute_command("ROLE")
    assert role[0] == b"master"
    assert [x for x in role[2] if int(x[1]) == replica.port]
    prole = rc.execute_command("ROLE")
    assert prole[0] == b"slave" and prole[2] == primary.port and prole[3] == b"connected"
    pi = info(p)
    assert pi["role"] == "master" and pi["connected_slaves"] == "1"
    s0 = kv_fields(pi["slave0"])
    assert s0["port"] == str(replica.port) and s0["state"] == "online"
    assert int(s0["offset"]) > 0 and int(s0["offset"]) <= int(pi["master_repl_offset"])
    ri = info(rc)
    assert ri["role"] == "slave" and ri["master_port"] == str(primary.port)
    assert ri["master_link_status"] == "up"
    assert ri["master_replid"] == pi["master_replid"]
    for field in ("master_repl_offset", "second_repl_offset", "repl_backlog_active", "repl_backlog_size",
                  "repl_backlog_first_byte_offset", "repl_backlog_histlen", "master_replid2",
                  "slave_priority", "slave_read_only"):
        assert field in ri, field
    assert rc.get("k") == b"v"
    with pytest.raises(redis.ResponseError, match="^You can't write against a read only replica"):
        rc.set("k", "w")
    with pytest.raises(redis.ResponseError, match="WAIT cannot be used with replica instances"):
        rc.execute_command("WAIT", 1, 0)


def test_wait_without_replicas(server):
    p = server.start().client()
    p.set("a", "1")
    assert p.execute_command("WAIT", 0, 0) == 0
    assert p.execute_command("WAIT", 1, 50) == 0
    with pytest.raises(redis.ResponseError, match="timeout is negative"):
        p.execute_command("WAIT", 1, -1)
    with pytest.raises(redis.ResponseError, match="not an integer"):
        p.execute_command("WAIT", "x", 0)


@pytest.mark.parametrize("side", ["master", "replica"])
def test_dropped_link_resumes_with_partial_resync(pair, side):
    primary, replica = pair
    attach(replica, primary)
    p, rc = primary.client(), replica.client()
    write_every_type(p, "one")
    wait_acked(p)
    before = info(p, "stats")
    if side == "master":
        # On the replica: kill its link to the primary.
        assert rc.execute_command("CLIENT", "KILL", "TYPE", "master") == 1
    else:
        assert p.execute_command("CLIENT", "KILL", "TYPE", "replica") == 1
    # Writes while the link may be down: they come from the backlog.
    write_every_type(p, "two")
    assert wait_until(lambda: int(info(p, "stats")["sync_partial_ok"]) > int(before["sync_partial_ok"]),
                      timeout=LINK_TIMEOUT), replica.log()
    assert wait_until(lambda: link_up(rc), timeout=LINK_TIMEOUT)
    wait_acked(p)
    after = info(p, "stats")
    assert after["sync_full"] == before["sync_full"]
    assert digest(rc, dbs=(0, 3)) == digest(p, dbs=(0, 3))


def test_full_sync_under_concurrent_writes(pair):
    primary, replica = pair
    p = primary.client()
    p.execute_command("DEBUG", "POPULATE", 20000, "pre", 20)
    stop = threading.Event()
    errors = []

    def writer():
        w = primary.client()
        i = 0
        try:
            while not stop.is_set():
                w.incr("counter:%d" % (i % 97))
                w.set("w:%d" % (i % 5000), i)
                if i % 10 == 0:
                    w.rpush("list:%d" % (i % 13), i)
                i += 1
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=writer)
    t.start()
    try:
        attach(replica, primary)
        # Keep writing a little after the sync too.
        wait_until(lambda: False, timeout=0.3)
    finally:
        stop.set()
        t.join()
    assert not errors
    wait_acked(p)
    want = digest(p)
    assert len(want) >= 20000
    assert digest(replica.client()) == want


def test_promotion_and_repointed_replica_continues(server):
    primary = server.start()
    a = server.start()
    b = server.start()
    attach(a, primary)
    attach(b, primary)
    p = primary.client()
    write_every_type(p, "x")
    wait_acked(p, 2)
    old_id = info(p)["master_replid"]
    primary.stop()
    ac, bc = a.client(), b.client()
    assert ac.execute_command("REPLICAOF", "NO", "ONE") in (b"OK", True)
    ai = info(ac)
    assert ai["role"] == "master"
    assert ai["master_replid2"] == old_id and ai["master_replid"] != old_id
    assert ac.execute_command("ROLE")[0] == b"master"
    # Writable now, and its data is the old primary's.
    ac.set("after-promotion", "1")
    assert digest(bc, dbs=(0, 3)) == {k: v for k, v in digest(ac, dbs=(0, 3)).items() if k[1] != b"after-promotion"}
    before = info(ac, "stats")
    attach(b, a)
    wait_acked(ac)
    assert bc.get("after-promotion") == b"1"
    st = info(ac, "stats")
    assert int(st["sync_partial_ok"]) == int(before["sync_partial_ok"]) + 1
    assert st["sync_full"] == before["sync_full"]
    assert digest(bc, dbs=(0, 3)) == digest(ac, dbs=(0, 3))


RESTART_ONLY = "a restarted node keeps its replication ID and offset in its log; the oracle's " \
    "Redis runs without persistence (appendonly no, no save), so it forgets them"


def kill9(node):
    import os
    import signal
    os.killpg(node.proc.pid, signal.SIGKILL)
    node.proc.wait()


def restart(node):
    """Starts `node` again on its port and data directory, and waits until it is ready."""
    node.spawn()
    node.wait_ready()


def snapshot_saved(node):
    """Waits until `node` has no snapshot running and has saved one: a replica's full sync
    loads the data set without log commands, so it is on disk once the snapshot taken
    right after the load is (a restart before that full-syncs again)."""
    def saved():
        p = info(node.client(), "persistence")
        return p["rdb_bgsave_in_progress"] == "0" and int(p["rdb_saves"]) >= 1
    assert wait_until(saved, timeout=LINK_TIMEOUT), node.log()


def stats(client):
    st = info(client, "stats")
    return int(st["sync_full"]), int(st["sync_partial_ok"])


@pytest.mark.abacus_only(RESTART_ONLY)
@pytest.mark.parametrize("how", ["shutdown", "kill"])
def test_restarted_replica_resumes_with_partial_resync(pair, how):
    primary, replica = pair
    p = primary.client()
    r3 = redis.Redis(host=primary.host, port=primary.port, db=3)
    write_every_type(p, "before")
    attach(replica, primary)
    write_every_type(p, "streamed")
    r3.set("last-db", "3")  # the stream is in database 3 when the replica stops
    wait_acked(p)
    snapshot_saved(replica)
    before = stats(p)
    if how == "shutdown":
        try:
            replica.client().execute_command("SHUTDOWN")
        except redis.ConnectionError:
            pass
        assert replica.wait_exit(10) == 0, replica.log()
    else:
        kill9(replica)
    # Writes the replica misses, still in database 3 (the stream selects no database again).
    r3.incrby("last-db-counter", 5)
    r3.rpush("last-db-list", "a", "b")
    write_every_type(p, "missed")
    restart(replica)
    attach(replica, primary)
    wait_acked(p)
    full, partial = stats(p)
    assert (full, partial) == (before[0], before[1] + 1), replica.log()
    assert digest(replica.client(), dbs=(0, 3)) == digest(p, dbs=(0, 3))


@pytest.mark.abacus_only(RESTART_ONLY)
def test_restarted_primary_keeps_its_replicas_partial(pair):
    primary, replica = pair
    attach(replica, primary)
    p = primary.client()
    write_every_type(p, "one")
    wait_acked(p)
    replid = info(p)["master_replid"]
    kill9(primary)
    restart(primary)
    p = primary.client()
    assert info(p)["master_replid"] == replid
    # The replica's link comes back by itself, from the restored offset.
    assert wait_until(lambda: stats(p)[1] >= 1, timeout=LINK_TIMEOUT), replica.log()
    write_every_type(p, "two")
    wait_acked(p)
    assert stats(p) == (0, 1)
    assert digest(replica.client(), dbs=(0, 3)) == digest(p, dbs=(0, 3))


@pytest.mark.abacus_only(RESTART_ONLY)
def test_old_primary_rejoins_the_promoted_replica_partially(pair):
    old, new = pair
    attach(new, old)
    po = old.client()
    write_every_type(po, "one")
    redis.Redis(host=old.host, port=old.port, db=3).incr("db3-counter")
    wait_acked(po)
    kill9(old)  # everything it wrote had reached the replica
    pn = new.client()
    assert pn.execute_command("REPLICAOF", "NO", "ONE") in (b"OK", True)
    write_every_type(pn, "after")
    before = stats(pn)
    restart(old)
    attach(old, new)
    wait_acked(pn)
    assert stats(pn) == (before[0], before[1] + 1), old.log()
    assert digest(old.client(), dbs=(0, 3)) == digest(pn, dbs=(0, 3))


@pytest.mark.abacus_only(RESTART_ONLY)
def test_old_primary_with_writes_the_replica_lacks_gets_a_full_sync(pair):
    old, new = pair
    attach(new, old)
    po = old.client()
    write_every_type(po, "one")
    wait_acked(po)
    pn = new.client()
    assert pn.execute_command("REPLICAOF", "NO", "ONE") in (b"OK", True)
    # History the promoted replica never saw: the old primary's offset passes the new
    # primary's second_repl_offset, so continuing would keep these writes.
    po.set("only-on-the-old-primary", "1")
    po.incr("n:one")
    kill9(old)
    write_every_type(pn, "after")
    before = stats(pn)
    restart(old)
    assert old.client().get("only-on-the-old-primary") == b"1"  # recovered from its log
    attach(old, new)
    wait_acked(pn)
    assert stats(pn) == (before[0] + 1, before[1]), old.log()
    oc = old.client()
    assert oc.get("only-on-the-old-primary") is None
    assert digest(oc, dbs=(0, 3)) == digest(pn, dbs=(0, 3))


def caught_up(replica, primary_client):
    """Whether `replica` applied every byte of the primary's stream so far."""
    return int(info(replica.client())["slave_repl_offset"]) >= int(info(primary_client)["master_repl_offset"])


def test_chained_replica_follows_through_a_replica(server):
    primary, middle, sub = server.start(), server.start(), server.start()
    p = primary.client()
    write_every_type(p, "one")
    attach(middle, primary)
    r3 = redis.Redis(host=primary.host, port=primary.port, db=3)
    r3.set("db3-last", "1")  # the stream is in database 3 when the sub-replica syncs
    wait_acked(p)
    # The sub-replica's full sync is served by the replica, from its own snapshot.
    attach(sub, middle)
    assert info(sub.client())["master_replid"] == info(p)["master_replid"]
    r3.incr("db3-counter")  # still database 3: the stream selects none again
    write_every_type(p, "two")
    wait_acked(p)
    assert wait_until(lambda: caught_up(sub, p), timeout=LINK_TIMEOUT), sub.log()
    assert digest(sub.client(), dbs=(0, 3)) == digest(p, dbs=(0, 3))
    # A dropped link between the two replicas resumes from the middle one's backlog.
    m = middle.client()
    before = stats(m)
    assert sub.client().execute_command("CLIENT", "KILL", "TYPE", "master") == 1
    write_every_type(p, "three")
    assert wait_until(lambda: stats(m)[1] > before[1], timeout=LINK_TIMEOUT), sub.log()
    wait_acked(p)
    assert wait_until(lambda: caught_up(sub, p), timeout=LINK_TIMEOUT), sub.log()
    assert stats(m)[0] == before[0]
    assert digest(sub.client(), dbs=(0, 3)) == digest(p, dbs=(0, 3))


def test_replicaof_errors(server):
    c = server.start().client()
    with pytest.raises(redis.ResponseError):
        c.execute_command("REPLICAOF", "127.0.0.1")
    with pytest.raises(redis.ResponseError):
        c.execute_command("REPLICAOF", "127.0.0.1", "notaport")
    assert c.execute_command("REPLICAOF", "NO", "ONE") in (b"OK", True)
    assert c.execute_command("ROLE")[0] == b"master"


@pytest.mark.abacus_only("Abacus's stream carries DEBUG POPULATE's keys; Redis does not propagate DEBUG")
def test_debug_populate_is_replicated(pair):
    primary, replica = pair
    attach(replica, primary)
    p = primary.client()
    p.execute_command("DEBUG", "POPULATE", 500, "pop", 8)
    wait_acked(p)
    assert replica.client().dbsize() == 500
    assert digest(replica.client()) == digest(p)


class FakePrimary:
    """A TCP server that answers a replica's handshake and then sends `payload` as its
    full sync: bad input a replica must survive."""

    def __init__(self, payload):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(4)
        self.port = self.sock.getsockname()[1]
        self.payload = payload
        self.served = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(10)
            buf = b""
            try:
                # PSYNC as a command name (`REPLCONF capa psync2` holds the word too).
                while b"\r\nPSYNC\r\n" not in buf.upper() or not buf.endswith(b"\r\n"):
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    buf += chunk
                    # Each handshake command gets +OK (PING gets +PONG).
                    if b"\r\nPSYNC\r\n" not in buf.upper():
                        conn.sendall(b"+PONG\r\n" if b"PING" in chunk.upper() else b"+OK\r\n")
                conn.sendall(self.payload)
                self.served.set()
                conn.shutdown(2)
            except OSError:
                pass
            conn.close()

    def close(self):
        self.sock.close()


@pytest.mark.abacus_only("Abacus's snapshot format; Redis drops its data set before loading")
@pytest.mark.parametrize("payload", [
    b"+FULLRESYNC " + b"a" * 40 + b" 0\r\n$1000\r\n" + b"\x00" * 100,  # cut short
    b"+FULLRESYNC " + b"a" * 40 + b" 0\r\n$64\r\n" + b"ABACUSS1" + b"\xff" * 56,  # corrupt
    b"+FULLRESYNC nonsense\r\n",
    b"-ERR no\r\n",
])
def test_bad_primary_leaves_data_untouched(server, payload):
    replica = server.start()
    rc = replica.client()
    rc.set("mine", "kept")
    fake = FakePrimary(payload)
    try:
        rc.execute_command("REPLICAOF", "127.0.0.1", fake.port)
        assert fake.served.wait(10)
        # The attempt fails and is retried; the data set is never replaced by a bad one.
        assert wait_until(lambda: "Replication link with" in replica.log(), timeout=10), replica.log()
        assert rc.get("mine") == b"kept"
        assert info(rc)["master_link_status"] == "down"
        rc.execute_command("REPLICAOF", "NO", "ONE")
        assert rc.get("mine") == b"kept"
    finally:
        fake.close()


def test_replica_sending_garbage_is_dropped(server):
    from helpers import RespClient
    primary = server.start()
    p = primary.client()
    p.set("k", "v")
    c = RespClient(primary.host, primary.port)
    c.send(b"*3\r\n$5\r\nPSYNC\r\n$1\r\n?\r\n$2\r\n-1\r\n")
    line = c._readline()
    while line == b"":
        line = c._readline()
    assert line.startswith(b"+FULLRESYNC ")
    c.send(b"*\xff garbage\r\n")
    # The primary closes that link and keeps serving.
    assert wait_until(lambda: info(p)["connected_slaves"] == "0", timeout=10)
    assert p.get("k") == b"v"
    c.close()


@pytest.mark.abacus_only("Abacus's config file format (name value lines) and parameters")
def test_config_rewrite(server, tmp_path):
    c = server.start().client()
    with pytest.raises(redis.ResponseError, match="running without a config file"):
        c.execute_command("CONFIG", "REWRITE")
    conf = tmp_path / "abacus.conf"
    conf.write_text("# mine\nreplica-priority 100\nhz 10\n")
    s = server.start(["--config", str(conf)])
    c = s.client()
    c.config_set("replica-priority", "7")
    c.config_set("min-replicas-max-lag", "3")
    assert c.execute_command("CONFIG", "REWRITE") in (b"OK", True)
    lines = conf.read_text().splitlines()
    assert lines[0] == "# mine"
    assert "replica-priority 7" in lines and "hz 10" in lines
    assert "min-replicas-max-lag 3" in lines


SENTINEL_ROUNDS = 5


def start_sentinels(tmp_path, primary, n=3):
    """Stock Redis Sentinels (Debian's redis-sentinel; `redis-server --sentinel` is the same
    program) monitoring `primary` as "m", quorum 2."""
    import os
    import shutil
    import subprocess
    from conftest import free_port
    binary = shutil.which("redis-sentinel")
    argv0 = [binary] if binary else [shutil.which("redis-server") or "/usr/bin/redis-server"]
    procs, ports = [], []
    for i in range(n):
        port = free_port()
        conf = tmp_path / ("sentinel-%d.conf" % i)
        conf.write_text(
            "port %d\nbind 127.0.0.1\ndir %s\n"
            "sentinel monitor m %s %d 2\n"
            "sentinel down-after-milliseconds m 1000\n"
            "sentinel failover-timeout m 6000\n"
            "sentinel parallel-syncs m 2\n" % (port, tmp_path, primary.host, primary.port))
        log = open(tmp_path / ("sentinel-%d.log" % i), "wb")
        args = argv0 + [str(conf)] + ([] if binary else ["--sentinel"])
        procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        ports.append(port)
    return procs, ports


def follows(node, primary):
    """Whether `node` is a replica of `primary` with its link up (False while it restarts or
    while Sentinel's CLIENT KILL TYPE normal cuts the connection asking)."""
    try:
        i = info(node.client())
    except redis.ConnectionError:
        return False
    return i.get("master_port") == str(primary.port) and i.get("master_link_status") == "up"


@pytest.mark.abacus_only("Sentinel failover of Abacus servers (the oracle run has no Abacus)")
def test_sentinel_failover_keeps_every_waited_write(server, tmp_path):
    import os
    import signal
    import redis.sentinel
    from redis.sentinel import Sentinel
    nodes = [server.start() for _ in range(3)]
    for n in nodes[1:]:
        attach(n, nodes[0])
    procs, ports = start_sentinels(tmp_path, nodes[0])
    try:
        sentinel = Sentinel([("127.0.0.1", p) for p in ports], socket_timeout=2)
        s0 = redis.Redis(host="127.0.0.1", port=ports[0], socket_timeout=2)

        def discovered():
            try:
                return len(s0.sentinel_slaves("m")) == 2 and len(s0.sentinel_sentinels("m")) == 2
            except redis.ConnectionError:
                return False

        # The Sentinels found both replicas (INFO) and each other (the hello channel).
        assert wait_until(discovered, timeout=30), open(tmp_path / "sentinel-0.log").read()
        acked = {}
        partial_rejoins = 0
        for rnd in range(SENTINEL_ROUNDS):
            addr = sentinel.discover_master("m")
            victim = next(n for n in nodes if n.port == addr[1])
            stop = threading.Event()

            def writer(rnd=rnd):
                i = 0
                while not stop.is_set():
                    key = "r%d:%d" % (rnd, i)
                    try:
                        m = sentinel.master_for("m", socket_timeout=2)
                        m.set(key, i)
                        if m.execute_command("WAIT", 1, 2000) >= 1:
                            acked[key] = str(i).encode()
                    except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                        pass
                    i += 1

            t = threading.Thread(target=writer)
            t.start()
            assert wait_until(lambda: sum(k.startswith("r%d:" % rnd) for k in list(acked)) >= 20, timeout=20)
            os.killpg(victim.proc.pid, signal.SIGKILL)
            victim.proc.wait()
            def moved():
                try:
                    return sentinel.discover_master("m") != addr
                except redis.sentinel.MasterNotFoundError:
                    return False  # the old primary is down and none is promoted yet

            assert wait_until(moved, timeout=30), open(tmp_path / "sentinel-0.log").read()
            stop.set()
            t.join()
            new = sentinel.master_for("m", socket_timeout=5)
            assert new.execute_command("ROLE")[0] == b"master"
            missing = [k for k, v in acked.items() if new.get(k) != v]
            assert not missing, "acknowledged writes lost: %r" % missing[:10]
            # The other replica follows the new primary before the old one comes back, so the
            # new primary's sync counters below count the old primary's sync alone.
            new_node = next(n for n in nodes if n.port == sentinel.discover_master("m")[1])
            sibling = next(n for n in nodes if n is not victim and n is not new_node)
            assert wait_until(lambda: follows(sibling, new_node), timeout=40), sibling.log()
            nc = new_node.client()
            before = stats(nc)
            ni = info(nc)
            # The old primary comes back (same port and data directory) and Sentinel makes it
            # a replica of the new one.
            restart(victim)
            m = re.search(r"Recovered replication ID and offset from the log: ([0-9a-f]{40}):(\d+)", victim.log())
            # Redis's rule: the new primary continues its previous history up to where it
            # took over, so the old primary continues if it has nothing the new one lacks
            # (it was killed with every byte it wrote received by the promoted replica).
            can_continue = m is not None and (
                m.group(1) == ni["master_replid"] or
                (m.group(1) == ni["master_replid2"] and int(m.group(2)) + 1 <= int(ni["second_repl_offset"])))
            def rejoined():
                try:
                    port = sentinel.discover_master("m")[1]
                except redis.sentinel.MasterNotFoundError:
                    return None
                now = next((n for n in nodes if n.port == port and n is not victim), None)
                return now if now is not None and follows(victim, now) else None

            primary_now = wait_until(rejoined, timeout=40)
            assert primary_now is not None, victim.log()
            if primary_now is not new_node:
                # A loaded machine can make a Sentinel's failover time out and another one
                # promote the other replica: the counters above belong to a node that is no
                # longer the primary, so this round's resync is not checked.
                print("round %d: Sentinel failed over again, to %d; resync not checked" % (rnd, primary_now.port))
                continue
            full, partial = stats(nc)
            if can_continue:
                assert (full, partial) == (before[0], before[1] + 1), (ni, m.group(0), victim.log())
                partial_rejoins += 1
            else:
                assert full == before[0] + 1, (ni, m and m.group(0), victim.log())
            print("round %d: the old primary rejoined with a %s resync" % (rnd, "partial" if can_continue else "full"))
    finally:
        for p in procs:
            p.kill()
            p.wait()
