"""`keyspace-density`: the key tables' fill, dense (the default) or balanced.

A dense key table (about 88% full on average instead of 80%) must hold exactly what a balanced
one holds through growth, overwrites and deletions, and cost less memory for the same keys;
the parameter is chosen at start-up only. (The rest of the suite runs dense, the default; the
test of growth and deletion below runs both.)
"""

import pytest
import redis

pytestmark = pytest.mark.abacus_only("keyspace-density is Abacus's table layout")

KEYS = 300_000


def used_memory(c):
    return int(c.info("memory")["used_memory"])


def load(c, n):
    """n keys of ~10 bytes with 16-byte values, as keys10m.sh's DEBUG POPULATE."""
    before = used_memory(c)
    c.execute_command("DEBUG", "POPULATE", n, "key", 16)
    assert c.dbsize() == n
    return used_memory(c) - before


def test_default_is_dense_and_fixed_at_start(server):
    c = server.client()
    assert c.config_get("keyspace-density") == {"keyspace-density": "dense"}
    with pytest.raises(redis.ResponseError):
        c.config_set("keyspace-density", "balanced")
    assert c.config_get("keyspace-density") == {"keyspace-density": "dense"}


def test_unknown_density_refused_at_start(server):
    p = server.start(["--keyspace-density", "sparse"], wait=False)
    assert p.wait_exit(10) not in (None, 0)


@pytest.mark.parametrize("density", ["dense", "balanced"])
def test_each_density_keeps_every_key_through_growth_and_deletion(server, density):
    p = server.start(["--keyspace-density", density])
    c = p.client()
    assert c.config_get("keyspace-density") == {"keyspace-density": density}
    n = 60_000
    pipe = c.pipeline(transaction=False)
    for i in range(n):
        pipe.set(f"k:{i}", f"v{i}" * (1 + i % 7))
    pipe.execute()
    assert c.dbsize() == n
    # Delete every third key, overwrite every fifth, then check all of them.
    pipe = c.pipeline(transaction=False)
    for i in range(0, n, 3):
        pipe.delete(f"k:{i}")
    for i in range(0, n, 5):
        pipe.set(f"k:{i}", b"new")
    pipe.execute()
    got = c.mget([f"k:{i}" for i in range(n)])
    for i, v in enumerate(got):
        if i % 5 == 0:
            assert v == b"new", i
        elif i % 3 == 0:
            assert v is None, i
        else:
            assert v == f"v{i}".encode() * (1 + i % 7), i
    live = sum(1 for i in range(n) if i % 5 == 0 or i % 3 != 0)
    assert c.dbsize() == live
    seen = set(c.scan_iter(count=1000))
    assert len(seen) == live


def test_dense_uses_less_memory_for_the_same_keys(server):
    balanced = server.start(["--keyspace-density", "balanced"])
    dense = server.start([])
    b = load(balanced.client(), KEYS)
    d = load(dense.client(), KEYS)
    # The table is 37 B per slot: at 80% against 88% full about 4.4 B per key apart (of
    # about 50); allow half of that for the sawtooth of either table at this size.
    assert d < b - 2 * KEYS, (b / KEYS, d / KEYS)
