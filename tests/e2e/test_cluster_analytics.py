"""Analytics across the cluster (issue 50): TS.MGET, TS.MRANGE, TS.MREVRANGE (GROUPBY and
REDUCE included) and TS.QUERYINDEX asked of any node of a three-primary Abacus cluster answer
for the whole cluster, equal to one Abacus node holding the same series, in RESP2 and RESP3;
a node that does not answer fails the query with an error naming it.

Abacus only: Redis has no TS.* without the module, and the module answers these commands
cluster-wide only with RedisGears."""

import contextlib
import os
import random
import signal

import pytest
import redis
from redis.cluster import ClusterNode, RedisCluster

from conftest import HOST
from test_cluster import create, start_nodes

pytestmark = pytest.mark.abacus_only("TS.* across a cluster is Abacus's (the module needs RedisGears)")

QUERIES = [
    ("TS.MGET", "FILTER", "kind=temp"),
    ("TS.MGET", "WITHLABELS", "FILTER", "region!=", "kind=(temp,load)"),
    ("TS.MGET", "SELECTED_LABELS", "region", "FILTER", "kind=load"),
    ("TS.QUERYINDEX", "kind=temp"),
    ("TS.QUERYINDEX", "region=(eu,us)"),
    ("TS.MRANGE", "-", "+", "FILTER", "kind=temp"),
    ("TS.MRANGE", "-", "+", "WITHLABELS", "AGGREGATION", "avg", "10", "FILTER", "kind=(temp,load)"),
    ("TS.MRANGE", "1000", "1100", "COUNT", "5", "FILTER", "region=eu"),
    ("TS.MREVRANGE", "-", "+", "SELECTED_LABELS", "kind", "FILTER_BY_VALUE", "10", "60", "FILTER", "region=us"),
    ("TS.MRANGE", "-", "+", "WITHLABELS", "FILTER", "kind=temp", "GROUPBY", "region", "REDUCE", "sum"),
    ("TS.MREVRANGE", "-", "+", "AGGREGATION", "max", "20", "FILTER", "kind=(temp,load)", "GROUPBY", "region", "REDUCE", "max"),
    ("TS.MRANGE", "-", "+", "FILTER", "kind=none"),
]


def load(write, rnd):
    """60 series on random keys (so on every node), random labels and samples."""
    for i in range(60):
        key = "series:%d:%d" % (i, rnd.randrange(1 << 30))
        kind = rnd.choice(["temp", "load"])
        region = rnd.choice(["eu", "us", "ap"])
        write("TS.CREATE", key, "LABELS", "kind", kind, "region", region, "n", str(i))
        for t in range(1000, 1000 + rnd.randrange(5, 40) * 7, 7):
            write("TS.ADD", key, t, round(rnd.uniform(0, 100), 2))


@contextlib.contextmanager
def cluster_and_one(count=3, replicas=0, extra=(), both=()):
    """A cluster of `count` Abacus nodes (`extra` arguments) and one single node, both with
    `both`; yields (nodes, single, a RedisCluster client), stops them all after."""
    from conftest import ServerProcess
    nodes = start_nodes(["abacus"] * count, extra=list(extra) + list(both))
    single = ServerProcess("abacus", list(both))
    single.start()
    try:
        create(nodes, replicas=replicas)
        yield nodes, single, RedisCluster(startup_nodes=[ClusterNode(HOST, n.port) for n in nodes], socket_timeout=10)
    finally:
        for n in nodes:
            n.stop()
        single.stop()


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    with cluster_and_one(extra=["--cluster-fanout-timeout", "1000"]) as (nodes, single, rc):
        one = single.client()
        rnd = random.Random(50)
        load(lambda *a: rc.execute_command(*a), rnd)
        load(lambda *a: one.execute_command(*a), random.Random(50))
        yield nodes, single


def client(p, proto):
    return redis.Redis(host=p.host, port=p.port, protocol=proto, socket_timeout=10)


@pytest.mark.parametrize("proto", [2, 3])
def test_every_node_answers_as_one_node(setup, proto):
    nodes, single = setup
    one = client(single, proto)
    # The data is spread: every node holds some of the series.
    counts = [len(client(n, 2).keys("series:*")) for n in nodes]
    assert sum(counts) == 60 and all(c > 5 for c in counts), counts
    for q in QUERIES:
        want = one.execute_command(*q)
        for n in nodes:
            got = client(n, proto).execute_command(*q)
            assert got == want, (q, n.port)


def test_errors_are_the_single_nodes(setup):
    nodes, single = setup
    for q in [("TS.MGET", "FILTER", "class=("), ("TS.MRANGE", "-", "+", "FILTER", "a=b", "GROUPBY", "x", "REDUCE", "first")]:
        with pytest.raises(redis.exceptions.ResponseError) as want:
            single.client().execute_command(*q)
        with pytest.raises(redis.exceptions.ResponseError) as got:
            nodes[0].client().execute_command(*q)
        assert str(got.value) == str(want.value)


def test_a_node_that_does_not_answer_fails_the_query_naming_it(setup):
    nodes, _ = setup
    stopped = nodes[2]
    node_id = stopped.client().execute_command("CLUSTER", "MYID").decode()
    os.killpg(stopped.proc.pid, signal.SIGSTOP)
    try:
        with pytest.raises(redis.exceptions.ResponseError) as e:
            nodes[0].client().execute_command("TS.MGET", "FILTER", "kind=temp")
        assert "node %s" % node_id in str(e.value) and "no answer within 1000 ms" in str(e.value), str(e.value)
    finally:
        os.killpg(stopped.proc.pid, signal.SIGCONT)
    assert nodes[0].client().execute_command("TS.QUERYINDEX", "kind=temp")


def test_a_stopped_primary_is_answered_for_by_its_replica(tmp_path):
    """Standby reads: three primaries with a replica each; one primary stops answering
    (SIGSTOP); a query from another node is answered through that primary's replica, equal
    to one node's answer, within the standby deadline rather than the failover's seconds."""
    with cluster_and_one(6, 1, extra=["--cluster-fanout-timeout", "5000", "--cluster-standby-deadline", "200"]) as (nodes, single, rc):
        load(lambda *a: rc.execute_command(*a), random.Random(7))
        load(lambda *a: single.client().execute_command(*a), random.Random(7))
        roles = {n.port: n.client().execute_command("ROLE")[0] for n in nodes}
        primaries = [n for n in nodes if roles[n.port] == b"master"]
        for p in primaries:
            assert p.client().execute_command("WAIT", 1, 10000) == 1
        stopped, asker = primaries[0], primaries[1]
        q = ("TS.MRANGE", "-", "+", "WITHLABELS", "FILTER", "kind=(temp,load)")
        want = single.client().execute_command(*q)
        before = asker.client().info("cluster")["cluster_fanout_standby_answers"]
        os.killpg(stopped.proc.pid, signal.SIGSTOP)
        try:
            assert asker.client().execute_command(*q) == want
            assert asker.client().execute_command("TS.QUERYINDEX", "kind=temp") == single.client().execute_command("TS.QUERYINDEX", "kind=temp")
        finally:
            os.killpg(stopped.proc.pid, signal.SIGCONT)
        info = asker.client().info("cluster")
        assert info["cluster_fanout_standby_answers"] >= before + 2
        assert info["cluster_fanout_queries"] >= 2


SUMMARY_QUERIES = [
    ("SUMMARY.QUERY", "s_all"),
    ("SUMMARY.QUERY", "s_all", "GROUPBY", "campaign"),
    ("SUMMARY.QUERY", "s_all", "GROUPBY", "BUCKET"),
    ("SUMMARY.QUERY", "s_all", "WHERE", "campaign", "c1", "GROUPBY", "BUCKET"),
    ("SUMMARY.QUERY", "s_clicks", "GROUPBY", "state", "campaign"),
    ("SUMMARY.QUERY", "s_states", "GROUPBY", "state"),
    ("SUMMARY.QUERY", "s_all", "WHERE", "campaign", "nosuch"),
]


def test_summary_query_answers_for_the_cluster(tmp_path):
    """SUMMARY.QUERY from any node folds every node's summary keys: counts, exact sums,
    min/max, last, HLL unions and distinct sets merge across nodes as across shards."""
    from test_summarizer import RULES, csv_line, gen_events
    rules = tmp_path / "rules.toml"
    rules.write_text(RULES)
    with cluster_and_one(both=["--summarizer-rules", str(rules)]) as (nodes, single, rc):
        one = single.client()
        events = gen_events(3000, 51)
        one.execute_command("SUMMARY.INGEST", "v1", "\n".join(csv_line(e) for e in events))
        # The same summary keys, each on the node serving its slot.
        keys = list(one.scan_iter(count=1000))
        assert len(keys) > 100
        for k in keys:
            rc.restore(k, 0, one.dump(k))
        counts = [client(n, 2).dbsize() for n in nodes]
        assert sum(counts) == len(keys) and all(c > 10 for c in counts), counts
        for proto in (2, 3):
            want = [client(single, proto).execute_command(*q) for q in SUMMARY_QUERIES]
            assert want[0]
            for n in nodes:
                c = client(n, proto)
                assert [c.execute_command(*q) for q in SUMMARY_QUERIES] == want, (n.port, proto)


WATERFALLS = [
    ("TS.WATERFALL", "-", "+", "SOURCES", "exchange", "composite", "vendor", "FILTER", "field=px"),
    ("TS.WATERFALL", "1000", "1200", "SOURCES", "vendor", "exchange", "FILTER", "field=(px,vol)", "WITHSOURCE"),
    ("TS.WATERFALL", "1049", "1049", "SOURCES", "composite", "exchange", "vendor", "FILTER", "instrument=(I1,I2,I3)"),
]


@pytest.mark.parametrize("proto", [2, 3])
def test_waterfall_answers_for_the_cluster(proto):
    """TS.WATERFALL from any node: a group's sources live on different nodes (their keys
    hash apart), and every timestamp still gets the first source in precedence order."""
    with cluster_and_one() as (nodes, single, rc):
        one = single.client()
        rnd = random.Random(53)
        for i in range(12):
            for field in ("px", "vol"):
                for src in ("exchange", "composite", "vendor"):
                    key = "wf:I%d:%s:%s" % (i, field, src)
                    labels = ("LABELS", "instrument", "I%d" % i, "field", field, "source", src)
                    samples = [(t, round(rnd.uniform(1, 9), 3)) for t in range(1000, 1300, 7) if rnd.random() < 0.5]
                    for c in (rc, one):
                        c.execute_command("TS.CREATE", key, *labels)
                        for t, v in samples:
                            c.execute_command("TS.ADD", key, t, v)
        for q in WATERFALLS:
            want = client(single, proto).execute_command(*q)
            assert want
            for n in nodes:
                assert client(n, proto).execute_command(*q) == want, (q, n.port)


def test_attribute_match_answers_for_the_cluster():
    """ATTRIBUTE MATCH from any node sums every node's users: counts exact, values credited
    whole exact; fractional credits (linear) equal up to the order doubles were added in."""
    with cluster_and_one() as (nodes, single, rc):
        one = single.client()
        rnd = random.Random(54)
        for u in range(150):
            t = 1_700_000_000_000
            for _ in range(rnd.randrange(1, 8)):
                t += rnd.randrange(1, 3_600_000)
                if rnd.random() < 0.25:
                    fields = ("type", "purchase", "value", "%d.%02d" % (rnd.randrange(100), rnd.randrange(100)))
                else:
                    fields = ("type", "touch", "channel", rnd.choice(["email", "search", "social", "tv"]))
                for c in (rc, one):
                    c.execute_command("XADD", "u:%d" % u, "%d-0" % t, *fields)
        q = ("ATTRIBUTE", "MATCH", "u:*", "CHANNEL", "channel", "CONVERSION", "type", "purchase", "VALUE", "value", "MODELS", "first", "last")
        want = one.execute_command(*q)
        assert want
        for n in nodes:
            assert n.client().execute_command(*q) == want, n.port
        q = q[:-2] + ("linear",)
        want = one.execute_command(*q)
        for n in nodes:
            got = n.client().execute_command(*q)
            assert got[:-1] == want[:-1]
            assert len(got[-1][1]) == len(want[-1][1]) > 0
            for (ch1, n1, v1), (ch2, n2, v2) in zip(got[-1][1], want[-1][1]):
                assert ch1 == ch2 and abs(float(n1) - float(n2)) < 1e-9 and abs(float(v1) - float(v2)) < 1e-6
