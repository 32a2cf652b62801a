"""maxmemory eviction policies through redis-py: LFU keeps hot keys, FIFO evicts the oldest
writes, volatile policies spare persistent keys, and used memory stays near the limit while
writes continue.

Eviction samples at random; every assertion below holds with overwhelming probability under
the right policy and fails with near certainty under a wrong one (the comments give the
numbers). No assertion depends on timing: LFU decay is switched off (lfu-decay-time 0) where
a minute boundary could otherwise lower the counters mid-test.
"""

import pytest
import redis

VALUE = b"x" * 1000
BATCH = 1000


# Eviction is tested on a private server per test, without persistence: a background
# snapshot's blocks in flight (a few MiB) count in used_memory and would blur a 5% bound on a
# 16 MiB budget. FIFO order is global only within one shard: each shard evicts its share of
# the excess from its own keys, so the FIFO test runs with one thread.
EVICTION_ARGS = ["--save", "", "--appendonly", "no"]


@pytest.fixture
def r(request, server):
    if server.is_redis:
        client = server.client(decode_responses=False)
        client.flushall()
    else:
        threads = ["--threads", "1"] if request.node.get_closest_marker("one_shard") else []
        client = server.start(EVICTION_ARGS + threads).client(decode_responses=False)
    yield client
    client.close()


def used_memory(r):
    return int(r.info("memory")["used_memory"])


@pytest.fixture
def limited(r):
    """Sets maxmemory to 16 MiB above the current use; restores the defaults afterwards.
    Yields a function that applies a policy and returns the limit."""
    base = used_memory(r)
    limit = base + 16 * 1024 * 1024

    def apply(policy, **extra):
        args = {"maxmemory": limit, "maxmemory-policy": policy}
        args.update(extra)
        for k, v in args.items():
            assert r.config_set(k, v)
        return limit

    yield apply
    r.config_set("maxmemory", 0)
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("lfu-decay-time", 1)
    r.config_set("lfu-log-factor", 10)


def write_keys(r, start, stop, ex=None, limit=None, server=None):
    """SETs k:start..k:stop-1 in pipelined batches; with a limit (on Abacus), checks after
    every batch that used memory is within 5% of it."""
    worst = 0
    for b in range(start, stop, BATCH):
        p = r.pipeline(transaction=False)
        for i in range(b, min(b + BATCH, stop)):
            p.set("k:%d" % i, VALUE, ex=ex)
        assert all(p.execute())
        if limit is not None and not server.is_redis:
            used = used_memory(r)
            worst = max(worst, used)
            assert used <= limit * 1.05, (used, limit, b)
    return worst


def evicted(r):
    return int(r.info("stats")["evicted_keys"])


def present(r, indexes):
    p = r.pipeline(transaction=False)
    for i in indexes:
        p.exists("k:%d" % i)
    return sum(p.execute())


def test_lfu_parameters_are_configurable(r):
    assert r.config_get("lfu-*") == {"lfu-log-factor": "10", "lfu-decay-time": "1"}
    try:
        assert r.config_set("lfu-log-factor", 5)
        assert r.config_set("lfu-decay-time", 0)
        assert r.config_get("lfu-*") == {"lfu-log-factor": "5", "lfu-decay-time": "0"}
        with pytest.raises(redis.ResponseError):
            r.config_set("lfu-log-factor", -1)
        for policy in ("allkeys-lfu", "volatile-lfu", "allkeys-lru", "noeviction"):
            assert r.config_set("maxmemory-policy", policy)
            assert r.config_get("maxmemory-policy") == {"maxmemory-policy": policy}
            assert r.info("memory")["maxmemory_policy"] == policy
    finally:
        r.config_set("lfu-log-factor", 10)
        r.config_set("lfu-decay-time", 1)
        r.config_set("maxmemory-policy", "noeviction")


def test_object_freq_counts_accesses_under_lfu(r):
    try:
        assert r.config_set("maxmemory-policy", "allkeys-lfu")
        assert r.config_set("lfu-decay-time", 0)
        assert r.config_set("lfu-log-factor", 0)  # every access counts: deterministic
        # Keys created under an LFU policy start at LFU_INIT_VAL (5); OBJECT FREQ itself
        # does not count as an access.
        r.set("hot", "v")
        assert r.object("freq", "hot") == 5
        assert r.object("freq", "hot") == 5
        for _ in range(20):
            r.get("hot")
        assert r.object("freq", "hot") == 25
        # An overwrite keeps the frequency and counts as an access (Redis's dbOverwrite).
        r.set("hot", "w")
        assert r.object("freq", "hot") == 26
        assert r.object("freq", "missing") is None
    finally:
        r.config_set("maxmemory-policy", "noeviction")
        r.config_set("lfu-decay-time", 1)
        r.config_set("lfu-log-factor", 10)


@pytest.mark.abacus_only("allkeys-fifo is an Abacus policy")
def test_idletime_is_not_tracked_under_fifo(r):
    r.set("k", "v")
    try:
        assert r.config_set("maxmemory-policy", "allkeys-fifo")
        with pytest.raises(redis.ResponseError, match="FIFO maxmemory policy is selected"):
            r.object("idletime", "k")
        assert r.object("idletime", "missing") is None
    finally:
        r.config_set("maxmemory-policy", "noeviction")


def test_lfu_keeps_frequently_read_keys_under_memory_pressure(r, server, limited):
    # 100 hot keys are read 30 times each, then 50,000 cold keys are written once each. The
    # hot keys are then the least *recently* used, so LRU would evict them; LFU must keep all
    # of them (counters about 7-8 against 5 for the cold keys: a hot key goes only if all 5
    # samples are hot, about (100/15000)^5 = 1e-11 per eviction).
    # The policy is set first: Redis reinterprets an LRU clock as LFU data after a switch.
    limit = limited("allkeys-lfu", **{"lfu-decay-time": 0})
    before = evicted(r)
    hot = range(100)
    p = r.pipeline(transaction=False)
    for i in hot:
        p.set("k:%d" % i, VALUE)
    p.execute()
    for _ in range(30):
        p = r.pipeline(transaction=False)
        for i in hot:
            p.get("k:%d" % i)
        assert all(p.execute())
    write_keys(r, 100, 50_100, limit=limit, server=server)
    assert evicted(r) - before > 10_000
    assert r.dbsize() < 40_000
    assert present(r, hot) == 100
    cold_left = present(r, range(100, 50_100))
    assert cold_left < 40_000


def test_lru_evicts_those_keys_under_the_same_load(r, server, limited):
    # The control for the LFU test above: the same workload under allkeys-lru loses most hot
    # keys (they are the oldest accesses), so the LFU test does measure frequency.
    hot = range(100)
    p = r.pipeline(transaction=False)
    for i in hot:
        p.set("k:%d" % i, VALUE)
    p.execute()
    limit = limited("allkeys-lru")
    for _ in range(30):
        p = r.pipeline(transaction=False)
        for i in hot:
            p.get("k:%d" % i)
        p.execute()
    write_keys(r, 100, 50_100, limit=limit, server=server)
    assert present(r, hot) < 50


@pytest.mark.abacus_only("allkeys-fifo is an Abacus policy")
@pytest.mark.one_shard
def test_fifo_evicts_oldest_writes_first(r, server, limited):
    # Keys are written in order and the oldest ones are read all along (reads must not
    # matter to FIFO). Expected from a simulation of 5-sample FIFO: about 99% of the newest
    # half of the kept keys survive, and nothing older than three times the kept count;
    # random eviction would keep ~80% of the newest half and ~5% of the old ones (e^-3).
    limit = limited("allkeys-fifo")
    total = 60_000
    for b in range(0, total, BATCH):
        write_keys(r, b, b + BATCH, limit=limit, server=server)
        p = r.pipeline(transaction=False)
        for i in range(max(0, b - 5 * BATCH), b, 10):
            p.get("k:%d" % i)
        p.execute()
    kept = r.dbsize()
    assert 1000 < kept < total / 3, kept
    newest = range(total - kept // 2, total)
    assert present(r, newest) >= 0.95 * len(newest)
    old = range(0, total - 3 * kept)
    assert present(r, old) <= 0.005 * len(old) + 5


@pytest.mark.parametrize("policy", ["allkeys-lfu", "allkeys-fifo", "allkeys-random", "volatile-lfu"])
@pytest.mark.abacus_only("Redis's used_memory counts differently; the bound is Abacus's contract")
def test_used_memory_stays_within_5_percent_while_writing(r, server, limited, policy):
    limit = limited(policy)
    before = evicted(r)
    ex = 3600 if policy.startswith("volatile") else None
    worst = write_keys(r, 0, 60_000, ex=ex, limit=limit, server=server)
    assert worst > limit * 0.9, "the limit was never approached: nothing was tested"
    assert evicted(r) - before > 10_000
    assert r.get("k:59999") == VALUE


def test_volatile_lfu_spares_persistent_keys(r, server, limited):
    persistent = range(0, 2000)
    p = r.pipeline(transaction=False)
    for i in persistent:
        p.set("k:%d" % i, VALUE)
    p.execute()
    limit = limited("volatile-lfu")
    before = evicted(r)
    write_keys(r, 2000, 40_000, ex=3600, limit=limit, server=server)
    assert evicted(r) - before > 10_000
    assert present(r, persistent) == 2000
