"""Cluster mode: Abacus nodes form a Redis Cluster over Redis 7.0's cluster bus.

Three nodes made into a cluster with `redis-cli --cluster create`, checked with
`redis-cli --cluster check`, used through redis-py's RedisCluster (which follows -MOVED by
itself), and the redirections and CLUSTER subcommands a cluster client relies on; a mixed
cluster of Abacus and redis-server 7.0 nodes; a node restarted from its nodes.conf. Also run
against redis-server with `--target redis` (the same tests, all Redis nodes).

Also: replicas, automatic failover after kill -9, manual failover (CLUSTER FAILOVER and its
FORCE and TAKEOVER) under writes, -ASK/-TRYAGAIN/ASKING during a slot migration, resharding
back and forth under writes, replica migration to an orphaned primary, and the cluster
parameters with their effects.
"""
import os
import shutil
import socket
import subprocess
import time

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster

from conftest import HOST, ServerProcess

pytestmark = pytest.mark.skipif(shutil.which("redis-cli") is None, reason="redis-cli not found (apt-get install redis-tools)")


def _free(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((HOST, port))
            return True
        except OSError:
            return False


def cluster_port(taken=()):
    """A client port whose bus port (+10000) is free too."""
    for _ in range(500):
        p = 20000 + int.from_bytes(os.urandom(2), "big") % 10000
        if p not in taken and _free(p) and _free(p + 10000):
            return p
    raise RuntimeError("no free port pair")


def wait_until(what, ok, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def start_nodes(targets, extra=()):
    nodes = []
    taken = set()
    for t in targets:
        p = cluster_port(taken)
        taken.add(p)
        n = ServerProcess(t, ["--cluster-enabled", "yes", "--cluster-node-timeout", "5000"] + list(extra), port=p)
        n.start()
        nodes.append(n)
    return nodes


def create(nodes, replicas=0):
    out = subprocess.run(["redis-cli", "--cluster", "create"] + ["%s:%d" % (HOST, n.port) for n in nodes] + ["--cluster-replicas", str(replicas), "--cluster-yes"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    for n in nodes:
        wait_until("cluster_state:ok on %d" % n.port, lambda n=n: "cluster_state:ok" in n.client().execute_command("CLUSTER", "INFO").decode())


def info(n):
    text = n.client().execute_command("CLUSTER", "INFO").decode()
    return dict(line.split(":", 1) for line in text.strip().split("\r\n"))


@pytest.fixture
def cluster(target):
    nodes = start_nodes([target] * 3)
    try:
        create(nodes)
        yield nodes
    finally:
        for n in nodes:
            n.stop()


def test_create_check_and_route(cluster):
    for n in cluster:
        i = info(n)
        assert i["cluster_state"] == "ok"
        assert i["cluster_slots_assigned"] == "16384"
        assert i["cluster_known_nodes"] == "3"
        assert i["cluster_size"] == "3"
        assert n.client().info("cluster")["cluster_enabled"] == 1
    check = subprocess.run(["redis-cli", "--cluster", "check", "%s:%d" % (HOST, cluster[0].port)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout
    assert "[OK] All 16384 slots covered." in check.stdout
    rc = RedisCluster(startup_nodes=[ClusterNode(HOST, n.port) for n in cluster], socket_timeout=10)
    for i in range(300):
        rc.set("key:%d" % i, "v%d" % i)
    for i in range(300):
        assert rc.get("key:%d" % i) == b"v%d" % i
    # The keys are spread over the three nodes, each holding only its own slots' keys.
    counts = []
    for n in cluster:
        c = n.client()
        keys = c.keys("key:*")
        counts.append(len(keys))
        for k in keys:
            slot = c.execute_command("CLUSTER", "KEYSLOT", k)
            assert c.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) >= 1
            assert k in c.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1000)
    assert sum(counts) == 300 and all(c > 50 for c in counts), counts


def test_primaries_and_replicas(target):
    """The six-node layout of the cluster tutorial: three primaries, three replicas, made by
    redis-cli; the replicas copy their primary's keys and serve reads after READONLY."""
    nodes = start_nodes([target] * 6)
    try:
        create(nodes, replicas=1)
        c = nodes[0].client()
        wait_until("three replicas in CLUSTER NODES", lambda: sum(" slave " in l for l in c.execute_command("CLUSTER", "NODES").decode().split("\n")) == 3)
        lines = c.execute_command("CLUSTER", "NODES").decode().strip().split("\n")
        primaries = {l.split()[0]: l for l in lines if " master " in l or "myself,master" in l}
        replicas = [l for l in lines if "slave" in l.split()[2]]
        assert len(primaries) == 3 and len(replicas) == 3
        assert sorted(l.split()[3] for l in replicas) == sorted(primaries)
        # Each range: start, end, its primary, and (once gossip told this node) one replica.
        wait_until("replicas in CLUSTER SLOTS", lambda: all(len(r) == 4 for r in c.execute_command("CLUSTER", "SLOTS")))
        rc = RedisCluster(startup_nodes=[ClusterNode(HOST, n.port) for n in nodes], socket_timeout=10)
        for i in range(100):
            rc.set("r:%d" % i, i)
        # Every replica ends up with its primary's keys; READONLY lets it answer them.
        by_port = {n.port: n for n in nodes}
        for r in replicas:
            port = int(r.split()[1].split("@")[0].split(":")[1])
            primary = primaries[r.split()[3]]
            pport = int(primary.split()[1].split("@")[0].split(":")[1])
            want = sorted(by_port[pport].client().keys("r:*"))
            assert want
            rep = by_port[port].client()
            wait_until("replica %d to copy its primary" % port, lambda rep=rep, want=want: sorted(rep.keys("r:*")) == want)
            conn = by_port[port].client(single_connection_client=True)
            conn.execute_command("READONLY")
            assert conn.get(want[0]) == by_port[pport].client().get(want[0])
            # Without READONLY a replica sends reads to its primary.
            with pytest.raises(redis.exceptions.ResponseError, match="^MOVED"):
                rep.get(want[0])
    finally:
        for n in nodes:
            n.stop()


def reshard(entry, source, target, slots):
    out = subprocess.run(["redis-cli", "--cluster", "reshard", "%s:%d" % (HOST, entry.port), "--cluster-from", source, "--cluster-to", target,
                          "--cluster-slots", str(slots), "--cluster-yes"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    return out.stdout


def myid(n):
    return n.client().execute_command("CLUSTER", "MYID").decode()


def slot_count(n, node_id):
    line = next(l for l in n.client().execute_command("CLUSTER", "NODES").decode().strip().split("\n") if l.startswith(node_id))
    total = 0
    for s in line.split()[8:]:
        if s.startswith("["):
            continue
        a, _, b = s.partition("-")
        total += int(b or a) - int(a) + 1
    return total


def test_reshard_moves_slots_and_their_keys(cluster):
    rc = RedisCluster(startup_nodes=[ClusterNode(HOST, n.port) for n in cluster], socket_timeout=10)
    for i in range(500):
        rc.set("s:%d" % i, i)
    a, b = myid(cluster[0]), myid(cluster[1])
    before = slot_count(cluster[0], b)
    reshard(cluster[0], a, b, 1000)
    for n in cluster:
        wait_until("every node to see the new owner", lambda n=n: slot_count(n, b) == before + 1000)
    check = subprocess.run(["redis-cli", "--cluster", "check", "%s:%d" % (HOST, cluster[2].port)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0 and "[OK] All 16384 slots covered." in check.stdout, check.stdout
    rc = RedisCluster(startup_nodes=[ClusterNode(HOST, n.port) for n in cluster], socket_timeout=10)
    assert [int(rc.get("s:%d" % i)) for i in range(500)] == list(range(500))
    # Each key sits on the node that serves its slot.
    total = 0
    for n in cluster:
        c = n.client()
        mine = set()
        for r in c.execute_command("CLUSTER", "SLOTS"):
            if int(r[2][1]) == n.port:
                mine.update(range(int(r[0]), int(r[1]) + 1))
        keys = c.keys("s:*")
        total += len(keys)
        assert all(c.execute_command("CLUSTER", "KEYSLOT", k) in mine for k in keys)
    assert total == 500


def test_ask_and_tryagain_during_a_migration(cluster):
    """A slot migrating from one node to another: the source serves the keys it still has,
    sends -ASK for missing ones and -TRYAGAIN for a multi-key command it holds only part
    of; the target serves the slot only after ASKING (one command), all keys or none."""
    c = cluster[0].client()
    slot = c.execute_command("CLUSTER", "KEYSLOT", "{ask}")
    row = next(r for r in c.execute_command("CLUSTER", "SLOTS") if int(r[0]) <= slot <= int(r[1]))
    src = next(n for n in cluster if n.port == int(row[2][1]))
    dst = next(n for n in cluster if n is not src)
    s, d = src.client(), dst.client()
    s.set("{ask}.here", "1")
    assert d.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", myid(src)) in (True, b"OK")
    assert s.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", myid(dst)) in (True, b"OK")
    ask = "ASK %d %s:%d" % (slot, HOST, dst.port)
    assert s.get("{ask}.here") == b"1"
    for cmd in (("GET", "{ask}.gone"), ("SET", "{ask}.new", "x"), ("EXISTS", "{ask}.gone")):
        with pytest.raises(redis.exceptions.ResponseError) as e:
            s.execute_command(*cmd)
        assert str(e.value) == ask, cmd
    # A write to a missing key went nowhere: it was not created on the source.
    assert s.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot) == 1
    with pytest.raises(redis.exceptions.ResponseError, match="^TRYAGAIN Multiple keys request during rehashing of slot$"):
        s.mget("{ask}.here", "{ask}.gone")
    # The target: -MOVED to the source without ASKING; served after it, for one command.
    with pytest.raises(redis.exceptions.ResponseError, match="^MOVED %d " % slot):
        d.get("{ask}.new")
    conn = dst.client(single_connection_client=True)
    assert conn.execute_command("ASKING") in (True, b"OK")
    assert conn.set("{ask}.new", "x")
    with pytest.raises(redis.exceptions.ResponseError, match="^MOVED %d " % slot):
        conn.get("{ask}.new")
    conn.execute_command("ASKING")
    with pytest.raises(redis.exceptions.ResponseError, match="^TRYAGAIN"):
        conn.mget("{ask}.new", "{ask}.here")
    # The last key moves; then the source sends every request of the slot to the target.
    assert s.execute_command("MIGRATE", HOST, dst.port, "", 0, 5000, "KEYS", "{ask}.here") in (True, b"OK")
    with pytest.raises(redis.exceptions.ResponseError) as e:
        s.get("{ask}.here")
    assert str(e.value) == ask
    conn.execute_command("ASKING")
    assert conn.mget("{ask}.new", "{ask}.here") == [b"x", b"1"]
    # The migration ends: the slot is the target's everywhere.
    for n in (dst, src) + tuple(n for n in cluster if n not in (src, dst)):
        assert n.client().execute_command("CLUSTER", "SETSLOT", slot, "NODE", myid(dst)) in (True, b"OK")
    for n in cluster:
        wait_until("every node to see the new owner of slot %d" % slot, lambda n=n: serves_slot(n, slot, dst.port))
    rc = RedisCluster(startup_nodes=[ClusterNode(HOST, n.port) for n in cluster], socket_timeout=10)
    assert rc.get("{ask}.here") == b"1" and rc.get("{ask}.new") == b"x"


def test_reshard_under_writes_loses_nothing(cluster, target):
    """redis-cli --cluster reshard while a cluster client keeps writing: the client follows
    -ASK and -MOVED (and retries -TRYAGAIN), and every acknowledged write is there after.
    (It found issue 49's race: a write admitted as its slot's migration ended ran on the
    source after MIGRATE moved its key.)"""
    import threading
    from redis.crc import key_slot
    acked, errors = {}, []
    stop = threading.Event()
    # redis-cli moves the source's lowest slots: the writes go to keys of those slots, ten
    # per slot, so that keys are written while their slot migrates, before and after they
    # move (a write reaching the source after its key left must go to the target).
    a_slots = [int(r[0]) for r in cluster[0].client().execute_command("CLUSTER", "SLOTS") if int(r[2][1]) == cluster[0].port]
    low = min(a_slots)
    tags = [t for t in ("t%d" % i for i in range(20000)) if low <= key_slot(t.encode()) < low + 300][:150]
    keys = ["{%s}:%d" % (t, j) for t in tags for j in range(10)]

    def writer():
        rc = RedisCluster(startup_nodes=[ClusterNode(HOST, n.port) for n in cluster], socket_timeout=20)
        i = 0
        while not stop.is_set():
            k = keys[i % len(keys)]
            try:
                if rc.set(k, i):
                    acked[k] = i
            except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException) as e:
                errors.append(repr(e))
                acked.pop(k, None)
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        wait_until("writes to flow", lambda: len(acked) >= len(keys) // 2)
        a, b = myid(cluster[0]), myid(cluster[1])
        reshard(cluster[0], a, b, 300)
        reshard(cluster[1], b, a, 300)
    finally:
        stop.set()
        t.join(timeout=60)
    assert not t.is_alive()
    rc = RedisCluster(startup_nodes=[ClusterNode(HOST, n.port) for n in cluster], socket_timeout=10)
    lost = {k: v for k, v in acked.items() if rc.get(k) != str(v).encode()}
    # A key left behind on a node that no longer serves its slot shows in GETKEYSINSLOT.
    left = {k: [n.port for n in cluster if k.encode() in n.client().execute_command("CLUSTER", "GETKEYSINSLOT", rc.keyslot(k), 100)] for k in lost}
    assert not lost, (len(lost), list(lost.items())[:5], left, errors[:5])
    check = subprocess.run(["redis-cli", "--cluster", "check", "%s:%d" % (HOST, cluster[2].port)], capture_output=True, text=True, timeout=60)
    assert check.returncode == 0 and "[OK] All 16384 slots covered." in check.stdout, check.stdout


def test_failover_after_kill_9(target):
    """A primary killed with kill -9: its replica is elected and takes its slots, no write
    acknowledged with WAIT 1 is lost, and the old primary comes back as the new one's
    replica."""
    nodes = start_nodes([target] * 6, extra=["--cluster-node-timeout", "2000"])
    try:
        create(nodes, replicas=1)
        c = nodes[0].client()
        wait_until("replicas in CLUSTER SLOTS", lambda: all(len(r) == 4 for r in c.execute_command("CLUSTER", "SLOTS")))
        rc = RedisCluster(startup_nodes=[ClusterNode(HOST, n.port) for n in nodes], socket_timeout=10)
        for i in range(200):
            k = "f:%d" % i
            rc.set(k, i)
            node = rc.get_node_from_key(k)
            assert rc.get_redis_connection(node).execute_command("WAIT", 1, 5000) >= 1
        # Kill the primary of slot 0.
        slot0 = next(r for r in c.execute_command("CLUSTER", "SLOTS") if int(r[0]) == 0)
        victim = next(n for n in nodes if n.port == int(slot0[2][1]))
        replica_port = int(slot0[3][1])
        os.killpg(victim.proc.pid, 9)
        victim.proc.wait(timeout=10)
        survivors = [n for n in nodes if n is not victim]
        for n in survivors:
            wait_until("the replica to take slot 0 on %d" % n.port, lambda n=n: any(int(r[0]) == 0 and int(r[2][1]) == replica_port for r in n.client().execute_command("CLUSTER", "SLOTS")) and info(n)["cluster_state"] == "ok")
        rc = RedisCluster(startup_nodes=[ClusterNode(HOST, n.port) for n in survivors], socket_timeout=10)
        assert [int(rc.get("f:%d" % i)) for i in range(200)] == list(range(200))
        # The old primary restarts from its nodes.conf and follows its successor.
        victim.spawn()
        victim.wait_ready()
        vid = victim.client().execute_command("CLUSTER", "MYID").decode()
        rid = next(n for n in nodes if n.port == replica_port).client().execute_command("CLUSTER", "MYID").decode()
        wait_until("the old primary to become a replica", lambda: any(l.startswith(vid) and "slave" in l.split()[2] and l.split()[3] == rid for l in c.execute_command("CLUSTER", "NODES").decode().split("\n")))
    finally:
        for n in nodes:
            n.stop()


def node_line(n, node_id):
    return next(l for l in n.client().execute_command("CLUSTER", "NODES").decode().strip().split("\n") if l.startswith(node_id))


def serves_slot(n, slot, port):
    return any(int(r[0]) <= slot <= int(r[1]) and int(r[2][1]) == port for r in n.client().execute_command("CLUSTER", "SLOTS"))


def test_manual_failover_swaps_roles_and_loses_no_acknowledged_write(target):
    """CLUSTER FAILOVER on a replica while a client keeps writing to its primary's slots:
    the primary pauses writes, the replica catches up with the paused primary's offset and
    is elected, the roles swap, and every write the client saw acknowledged is there."""
    import threading
    nodes = start_nodes([target] * 6)
    try:
        create(nodes, replicas=1)
        c = nodes[0].client()
        wait_until("replicas in CLUSTER SLOTS", lambda: all(len(r) == 4 for r in c.execute_command("CLUSTER", "SLOTS")))
        slot = c.execute_command("CLUSTER", "KEYSLOT", "{mf}")
        row = next(r for r in c.execute_command("CLUSTER", "SLOTS") if int(r[0]) <= slot <= int(r[1]))
        by_port = {n.port: n for n in nodes}
        primary, replica = by_port[int(row[2][1])], by_port[int(row[3][1])]
        pid, rid = myid(primary), myid(replica)
        # The primary takes MFSTART only from a node it knows as its replica (from its pings).
        wait_until("the primary to know its replica", lambda: node_line(primary, rid).split()[3] == pid)
        with pytest.raises(redis.exceptions.ResponseError, match="^You should send CLUSTER FAILOVER to a replica$"):
            primary.client().execute_command("CLUSTER", "FAILOVER")
        with pytest.raises(redis.exceptions.ResponseError, match="^syntax error$"):
            replica.client().execute_command("CLUSTER", "FAILOVER", "NOW")
        acked, done, errors = {}, [0], []
        stop = threading.Event()

        def writer():
            rc = RedisCluster(startup_nodes=[ClusterNode(HOST, n.port) for n in nodes], socket_timeout=20)
            i = 0
            while not stop.is_set():
                k = "{mf}:%d" % (i % 500)
                try:
                    if rc.set(k, i):
                        acked[k] = i
                        done[0] += 1
                except (redis.exceptions.RedisError, redis.exceptions.RedisClusterException) as e:  # not acknowledged: may or may not be there
                    errors.append(repr(e))
                    acked.pop(k, None)
                i += 1

        t = threading.Thread(target=writer)
        t.start()
        wait_until("writes to flow", lambda: len(acked) >= 100)
        assert replica.client().execute_command("CLUSTER", "FAILOVER") in (True, b"OK")
        for n in nodes:
            wait_until("the replica to serve slot %d on %d" % (slot, n.port), lambda n=n: serves_slot(n, slot, replica.port))
        wait_until("the old primary to follow the new one", lambda: node_line(primary, pid).split()[2] == "myself,slave" and node_line(primary, pid).split()[3] == rid)
        assert node_line(replica, rid).split()[2] == "myself,master"
        # Writes go on, against the new primary.
        base = done[0]
        wait_until("writes to the new primary", lambda: done[0] >= base + 200)
        stop.set()
        t.join(timeout=60)
        assert not t.is_alive()
        rc = RedisCluster(startup_nodes=[ClusterNode(HOST, n.port) for n in nodes], socket_timeout=10)
        lost = {k: v for k, v in acked.items() if rc.get(k) != str(v).encode()}
        assert not lost, (lost, errors[:5])
        # No failure was involved: nobody flags the old primary.
        assert "fail" not in node_line(nodes[0], pid).split()[2]
    finally:
        if "stop" in locals():
            stop.set()
        for n in nodes:
            n.stop()


def test_failover_force_and_takeover(target):
    """FORCE when the primary is down (before any automatic failover could run, the node
    timeout being a minute), TAKEOVER on a healthy shard."""
    nodes = start_nodes([target] * 6, extra=["--cluster-node-timeout", "60000"])
    try:
        create(nodes, replicas=1)
        c = nodes[0].client()
        wait_until("replicas in CLUSTER SLOTS", lambda: all(len(r) == 4 for r in c.execute_command("CLUSTER", "SLOTS")))
        by_port = {n.port: n for n in nodes}
        rows = sorted(c.execute_command("CLUSTER", "SLOTS"), key=lambda r: int(r[0]))
        # TAKEOVER: the replica of the first range takes its slots at once.
        p1, r1 = by_port[int(rows[0][2][1])], by_port[int(rows[0][3][1])]
        assert r1.client().execute_command("CLUSTER", "FAILOVER", "TAKEOVER") in (True, b"OK")
        for n in nodes:
            wait_until("the TAKEOVER to reach %d" % n.port, lambda n=n: serves_slot(n, int(rows[0][0]), r1.port))
        wait_until("the old primary to follow", lambda: node_line(p1, myid(p1)).split()[3] == myid(r1))
        # FORCE: the primary of the last range is killed; its replica refuses a plain
        # CLUSTER FAILOVER once it lost the link, and takes over with FORCE.
        p3, r3 = by_port[int(rows[-1][2][1])], by_port[int(rows[-1][3][1])]
        os.killpg(p3.proc.pid, 9)
        p3.proc.wait(timeout=10)

        def refused():
            try:
                r3.client().execute_command("CLUSTER", "FAILOVER")
                return False
            except redis.exceptions.ResponseError as e:
                assert str(e) == "Master is down or failed, please use CLUSTER FAILOVER FORCE"
                return True
        wait_until("the replica to notice the primary is gone", refused)
        assert r3.client().execute_command("CLUSTER", "FAILOVER", "FORCE") in (True, b"OK")
        survivors = [n for n in nodes if n is not p3]
        for n in survivors:
            wait_until("the FORCE failover to reach %d" % n.port, lambda n=n: serves_slot(n, int(rows[-1][0]), r3.port), timeout=40)
    finally:
        for n in nodes:
            n.stop()


def test_replica_migrates_to_an_orphaned_primary(target):
    """Seven nodes: three primaries, one of them with two replicas. The only replica of
    another primary dies: after it is marked FAIL, one of the two replicas moves to the
    orphaned primary (cluster-migration-barrier 1 leaves its old primary one)."""
    nodes = start_nodes([target] * 7, extra=["--cluster-node-timeout", "2000"])
    try:
        create(nodes, replicas=1)
        c = nodes[0].client()

        def replicas_by_primary(n):
            lines = n.client().execute_command("CLUSTER", "NODES").decode().strip().split("\n")
            out = {l.split()[0]: [] for l in lines if "master" in l.split()[2] and "fail" not in l.split()[2]}
            for l in lines:
                if "slave" in l.split()[2] and "fail" not in l.split()[2] and l.split()[3] in out:
                    out[l.split()[3]].append(l.split()[0])
            return out
        # Every node must know every replica's role before one dies (only its own pings
        # tell it), or it cannot see the orphan.
        for n in nodes:
            wait_until("four replicas attached as %d sees them" % n.port, lambda n=n: sum(len(r) for r in replicas_by_primary(n).values()) == 4)
        layout = replicas_by_primary(nodes[0])
        rich = next(p for p, r in layout.items() if len(r) == 2)
        poor = next(p for p, r in layout.items() if len(r) == 1)
        victim_id = layout[poor][0]
        victim = next(n for n in nodes if myid(n) == victim_id)
        os.killpg(victim.proc.pid, 9)
        victim.proc.wait(timeout=10)
        survivors = [n for n in nodes if n is not victim]
        wait_until("a replica of the rich primary to move to the orphan",
                   lambda: len(replicas_by_primary(survivors[0]).get(poor, [])) == 1 and len(replicas_by_primary(survivors[0]).get(rich, [])) == 1)
        moved = replicas_by_primary(survivors[0])[poor][0]
        assert moved in layout[rich]
        # It replicates its new primary's data.
        mover = next(n for n in survivors if myid(n) == moved)
        wait_until("the migrated replica to follow its new primary", lambda: mover.client().info("replication").get("master_port") == next(n.port for n in survivors if myid(n) == poor))
    finally:
        for n in nodes:
            n.stop()


def owner_port(c, slot):
    return next(int(r[2][1]) for r in c.execute_command("CLUSTER", "SLOTS") if int(r[0]) <= slot <= int(r[1]))


def test_scripts_reach_only_keys_this_node_serves(cluster):
    """Redis 7.0's scriptVerifyClusterState: a script's command on a key of another node's
    slot, or on keys of several slots at once, fails inside the script; keys of different
    local slots in different commands are allowed; during a migration the keys decide, and
    a script sent after ASKING may use the importing slot."""
    n0 = cluster[0]
    c = n0.client()
    slot = lambda k: c.execute_command("CLUSTER", "KEYSLOT", k)
    names = ["k%d" % i for i in range(200)]
    local = [k for k in names if owner_port(c, slot(k)) == n0.port]
    remote = [k for k in names if owner_port(c, slot(k)) != n0.port]
    a, b = next((x, y) for x in local for y in local if slot(x) != slot(y))
    far = remote[0]
    non_local = "Script attempted to access a non local key in a cluster node"
    with pytest.raises(redis.exceptions.ResponseError, match="^%s script: " % non_local):
        c.eval("return redis.call('get', ARGV[1])", 0, far)
    assert c.eval("return redis.pcall('get', ARGV[1])['err']", 0, far) == ("ERR " + non_local).encode()
    # Undeclared keys of two local slots, one per command: allowed, as in 7.0.
    assert c.eval("redis.call('set', ARGV[1], 'x'); redis.call('set', ARGV[2], 'y'); "
                  "return redis.call('get', ARGV[1])", 0, a, b) == b"x"
    # One command over two slots is not.
    assert c.eval("return redis.pcall('mget', ARGV[1], ARGV[2])['err']", 0, a, b) == ("ERR " + non_local).encode()
    # A declared key of another node: the script is redirected before it runs.
    with pytest.raises(redis.exceptions.ResponseError, match="^MOVED "):
        c.eval("return 1", 1, far)
    assert c.get(b) == b"y"
    # A slot migrating from n0: a key still here is served to the script, a missing one not.
    dst = next(n for n in cluster if n.port != n0.port)
    s = slot(a)
    d = dst.client()
    assert d.execute_command("CLUSTER", "SETSLOT", s, "IMPORTING", myid(n0)) in (True, b"OK")
    assert c.execute_command("CLUSTER", "SETSLOT", s, "MIGRATING", myid(dst)) in (True, b"OK")
    assert c.eval("return redis.call('get', ARGV[1])", 0, a) == b"x"
    gone = next(k for k in ("{%s}.%d" % (a, i) for i in range(100)) if slot(k) == s)
    assert c.eval("return redis.pcall('get', ARGV[1])['err']", 0, gone) == ("ERR " + non_local).encode()
    # The target serves the importing slot to a script sent after ASKING, and only then.
    conn = dst.client(single_connection_client=True)
    with pytest.raises(redis.exceptions.ResponseError, match="^MOVED "):
        conn.eval("return redis.call('set', KEYS[1], 'new')", 1, gone)
    assert conn.execute_command("ASKING") in (True, b"OK")
    assert conn.eval("return redis.call('set', KEYS[1], 'new')", 1, gone) == b"OK"
    assert c.execute_command("CLUSTER", "SETSLOT", s, "STABLE") in (True, b"OK")
    assert d.execute_command("CLUSTER", "SETSLOT", s, "STABLE") in (True, b"OK")


def test_redirections(cluster):
    c = cluster[0].client()
    slots = c.execute_command("CLUSTER", "SLOTS")
    mine = {(int(r[0]), int(r[1])) for r in slots if int(r[2][1]) == cluster[0].port}
    # A key of a slot another node serves: -MOVED with that node's address.
    key = next("k%d" % i for i in range(1000) if not any(a <= c.execute_command("CLUSTER", "KEYSLOT", "k%d" % i) <= b for a, b in mine))
    slot = c.execute_command("CLUSTER", "KEYSLOT", key)
    owner = next(r for r in slots if int(r[0]) <= slot <= int(r[1]))
    with pytest.raises(redis.exceptions.ResponseError) as e:
        c.get(key)
    assert str(e.value) == "MOVED %d %s:%d" % (slot, owner[2][0].decode(), owner[2][1])
    # Keys in different slots in one command: -CROSSSLOT, wherever they are.
    with pytest.raises(redis.exceptions.ResponseError) as e:
        c.mset({"a": 1, "b": 2})
    assert str(e.value) == "CROSSSLOT Keys in request don't hash to the same slot"
    # A hash tag keeps keys together.
    target = next(n for n in cluster if n.port == owner[2][1]).client()
    assert target.mset({"{%s}.a" % key: 1, "{%s}.b" % key: 2})
    assert target.mget("{%s}.a" % key, "{%s}.b" % key) == [b"1", b"2"]
    # Commands without keys run anywhere.
    assert c.ping() and c.execute_command("CLUSTER", "MYID")


def test_cluster_subcommands(cluster):
    c = cluster[0].client()
    myid = c.execute_command("CLUSTER", "MYID").decode()
    nodes = c.execute_command("CLUSTER", "NODES").decode().strip().split("\n")
    assert len(nodes) == 3
    me = next(l for l in nodes if "myself" in l)
    assert me.startswith(myid + " %s:%d@%d " % (HOST, cluster[0].port, cluster[0].port + 10000))
    assert c.execute_command("CLUSTER", "KEYSLOT", "somekey") == 11058
    assert c.execute_command("CLUSTER", "KEYSLOT", "{user1000}.following") == c.execute_command("CLUSTER", "KEYSLOT", "user1000")
    with pytest.raises(redis.exceptions.ResponseError, match="already busy"):
        c.execute_command("CLUSTER", "ADDSLOTS", *range(0, 16384, 4096))
    with pytest.raises(redis.exceptions.ResponseError, match="Invalid or out of range slot"):
        c.execute_command("CLUSTER", "ADDSLOTS", 16384)
    with pytest.raises(redis.exceptions.ResponseError, match="greater than end slot"):
        c.execute_command("CLUSTER", "ADDSLOTSRANGE", 10, 5)
    with pytest.raises(redis.exceptions.ResponseError, match="Unknown node"):
        c.execute_command("CLUSTER", "FORGET", "0" * 40)
    with pytest.raises(redis.exceptions.ResponseError, match="can't forget myself"):
        c.execute_command("CLUSTER", "FORGET", myid)
    with pytest.raises(redis.exceptions.ResponseError, match="any other node"):
        c.execute_command("CLUSTER", "SET-CONFIG-EPOCH", 99)
    shards = c.execute_command("CLUSTER", "SHARDS")
    assert len(shards) == 3
    assert c.execute_command("CLUSTER", "COUNT-FAILURE-REPORTS", myid) == 0
    ok = (True, b"OK")  # redis-py turns some +OK replies into True
    assert c.execute_command("CLUSTER", "SAVECONFIG") in ok
    assert c.execute_command("READONLY") in ok and c.execute_command("READWRITE") in ok
    assert c.execute_command("ASKING") in ok
    help_lines = c.execute_command("CLUSTER", "HELP")
    assert help_lines[0].startswith(b"CLUSTER <subcommand>")
    links = c.execute_command("CLUSTER", "LINKS")
    assert len(links) >= 2


def test_a_node_restarts_from_its_nodes_conf(target):
    if target == "redis":
        pytest.skip("restarts an Abacus node in place")
    nodes = start_nodes([target] * 3)
    try:
        create(nodes)
        n = nodes[1]
        myid = n.client().execute_command("CLUSTER", "MYID")
        conf = open(os.path.join(n.dir, "nodes.conf")).read()
        assert myid.decode() + " " in conf and "myself,master" in conf and "vars currentEpoch" in conf
        # Stop it (keeping its directory) and start it again on the same port and directory.
        os.killpg(n.proc.pid, 9)
        n.proc.wait(timeout=10)
        n.spawn()
        n.wait_ready()
        assert n.client().execute_command("CLUSTER", "MYID") == myid
        for m in nodes:
            wait_until("the cluster to be whole again", lambda m=m: info(m)["cluster_state"] == "ok" and "disconnected" not in m.client().execute_command("CLUSTER", "NODES").decode())
    finally:
        for m in nodes:
            m.stop()


def test_mixed_cluster_with_redis_nodes(target):
    if target == "redis":
        pytest.skip("mixes Abacus and redis-server nodes")
    nodes = start_nodes(["abacus", "redis", "abacus", "redis"])
    try:
        create(nodes)
        rc = RedisCluster(startup_nodes=[ClusterNode(HOST, n.port) for n in nodes], socket_timeout=10)
        for i in range(200):
            rc.set("m:%d" % i, i)
        assert [int(rc.get("m:%d" % i)) for i in range(200)] == list(range(200))
        check = subprocess.run(["redis-cli", "--cluster", "check", "%s:%d" % (HOST, nodes[1].port)], capture_output=True, text=True, timeout=60)
        assert check.returncode == 0 and "[OK] All 16384 slots covered." in check.stdout, check.stdout
        # Slots move from a Redis node to an Abacus node and back, keys and all.
        redis_id, abacus_id = myid(nodes[1]), myid(nodes[0])
        reshard(nodes[0], redis_id, abacus_id, 500)
        reshard(nodes[1], abacus_id, redis_id, 700)
        rc = RedisCluster(startup_nodes=[ClusterNode(HOST, n.port) for n in nodes], socket_timeout=10)
        assert [int(rc.get("m:%d" % i)) for i in range(200)] == list(range(200))
        # PUBLISH reaches every node's subscribers over the bus, both ways.
        for pub_node, sub_node in ((nodes[0], nodes[1]), (nodes[1], nodes[2]), (nodes[2], nodes[0])):
            ps = sub_node.client().pubsub()
            ps.subscribe("news")
            assert ps.get_message(timeout=5)["type"] == "subscribe"
            # The reply counts the publishing node's own receivers only.
            assert pub_node.client().publish("news", "from %d" % pub_node.port) == 0
            msg = ps.get_message(timeout=10)
            assert msg and msg["data"] == b"from %d" % pub_node.port, msg
            ps.close()
        # Every node, Abacus or Redis, sees the same four primaries.
        views = []
        for n in nodes:
            lines = n.client().execute_command("CLUSTER", "NODES").decode().strip().split("\n")
            views.append(sorted((l.split()[0], l.split()[1].split(",")[0], tuple(l.split()[8:])) for l in lines))
        assert all(v == views[0] for v in views), views
    finally:
        for n in nodes:
            n.stop()


CLUSTER_PARAMETERS = {
    "cluster-allow-reads-when-down": "no",
    "cluster-replica-validity-factor": "10",
    "cluster-migration-barrier": "1",
    "cluster-allow-replica-migration": "yes",
    "cluster-replica-no-failover": "no",
    "cluster-preferred-endpoint-type": "ip",
    "cluster-announce-port": "0",
    "cluster-announce-bus-port": "0",
}


def test_cluster_parameters_and_their_effects(cluster):
    c = cluster[0].client()
    for name, default in CLUSTER_PARAMETERS.items():
        assert c.config_get(name) == {name: default}
    with pytest.raises(redis.exceptions.ResponseError):
        c.config_set("cluster-preferred-endpoint-type", "nowhere")
    # The endpoint clients are sent to: the IP, the hostname ('?' when none is announced),
    # or none at all (a client reuses the address it used).
    slots = c.execute_command("CLUSTER", "SLOTS")
    mine = [(int(r[0]), int(r[1])) for r in slots if int(r[2][1]) == cluster[0].port]
    key = next("k%d" % i for i in range(1000) if not any(a <= c.execute_command("CLUSTER", "KEYSLOT", "k%d" % i) <= b for a, b in mine))
    slot = c.execute_command("CLUSTER", "KEYSLOT", key)
    owner = next(r for r in slots if int(r[0]) <= slot <= int(r[1]))
    for kind, endpoint in (("unknown-endpoint", ""), ("hostname", "?"), ("ip", owner[2][0].decode())):
        c.config_set("cluster-preferred-endpoint-type", kind)
        with pytest.raises(redis.exceptions.ResponseError) as e:
            c.get(key)
        assert str(e.value) == "MOVED %d %s:%d" % (slot, endpoint, owner[2][1])
    c.config_set("cluster-preferred-endpoint-type", "unknown-endpoint")
    row = c.execute_command("CLUSTER", "SLOTS")[0]
    assert row[2][0] is None and row[2][3] == [b"ip", owner[2][0]]
    c.config_set("cluster-preferred-endpoint-type", "ip")
    # The announced client port is what the other nodes learn.
    n1 = cluster[1].client()
    n1.config_set("cluster-announce-port", "1234")
    n1_id = myid(cluster[1])
    wait_until("node 0 to learn the announced port", lambda: ":1234@" in node_line(cluster[0], n1_id).split()[1])
    n1.config_set("cluster-announce-port", "0")
    wait_until("node 0 to learn the real port again", lambda: ":%d@" % cluster[1].port in node_line(cluster[0], n1_id).split()[1])
    # A cluster that is down serves reads of this node's slots only when allowed to.
    own_key = next("k%d" % i for i in range(1000) if any(a <= c.execute_command("CLUSTER", "KEYSLOT", "k%d" % i) <= b for a, b in mine))
    c.set(own_key, "v")
    victim = cluster[2]
    os.killpg(victim.proc.pid, 9)
    victim.proc.wait(timeout=10)
    wait_until("the cluster to be down", lambda: info(cluster[0])["cluster_state"] == "fail")
    with pytest.raises(redis.exceptions.ResponseError, match="^CLUSTERDOWN The cluster is down$"):
        c.get(own_key)
    c.config_set("cluster-allow-reads-when-down", "yes")
    assert c.get(own_key) == b"v"
    with pytest.raises(redis.exceptions.ResponseError, match="^CLUSTERDOWN The cluster is down and only accepts read commands$"):
        c.set(own_key, "w")


def test_cluster_mode_off(server, r):
    if server.is_redis:
        pytest.skip("the shared server runs without cluster mode")
    with pytest.raises(redis.exceptions.ResponseError, match="cluster support disabled"):
        r.execute_command("CLUSTER", "INFO")
    assert r.info("cluster")["cluster_enabled"] == 0


def test_bad_bus_input_is_refused_and_the_node_stays_up(cluster):
    """Truncated, oversized, wrongly signed and forged bus messages: the link is closed or
    the message ignored, the node keeps serving, and the cluster stays OK."""
    import struct
    n = cluster[0]
    bus = n.port + 10000

    def send(payload, wait_close=True):
        with socket.create_connection((HOST, bus), timeout=5) as s:
            s.sendall(payload)
            s.settimeout(2)
            try:
                while s.recv(65536):
                    pass
            except (socket.timeout, ConnectionResetError):
                pass

    send(b"GET / HTTP/1.1\r\n\r\n")                          # not RCmb
    send(b"RCmb" + struct.pack(">I", 1 << 30) + b"x" * 100)      # announces 1 GB
    send(b"RCmb" + struct.pack(">I", 100) + b"\0" * 92)          # shorter than a header
    send(b"RCmb" + struct.pack(">I", 2256) + b"\0" * 10)         # truncated, then closed
    # A well-formed PING from an unknown node claiming every slot at a huge epoch: a node
    # only takes claims from nodes it knows, so nothing changes.
    hdr = bytearray(2256)
    hdr[0:4] = b"RCmb"
    hdr[4:8] = struct.pack(">I", 2256)
    hdr[8:10] = struct.pack(">H", 1)
    hdr[12:14] = struct.pack(">H", 0)  # PING
    hdr[16:24] = struct.pack(">Q", 1 << 60)
    hdr[24:32] = struct.pack(">Q", 1 << 60)
    hdr[40:80] = b"f" * 40
    hdr[80:80 + 2048] = b"\xff" * 2048
    hdr[2250:2252] = struct.pack(">H", 1)  # master
    send(bytes(hdr))
    for _ in range(200):
        send(os.urandom(int.from_bytes(os.urandom(2), "big") % 3000), wait_close=False)
    for m in cluster:
        i = info(m)
        assert i["cluster_state"] == "ok" and i["cluster_known_nodes"] == "3", i
        assert i["cluster_current_epoch"] != str(1 << 60)
    assert n.client().ping()
