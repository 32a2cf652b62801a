"""CLIENT NO-TOUCH (Redis 7.2): while on, the client's commands leave the LRU/LFU access
data of the keys they read alone (OBJECT FREQ, OBJECT IDLETIME), except TOUCH, which still
touches; CLIENT LIST/INFO show the `T` flag; RESET and OFF end it.

Abacus only: the Redis the suite runs against (7.0) has no CLIENT NO-TOUCH.

Nothing here depends on timing: the LFU tests set `lfu-log-factor 0` (every access raises
the counter by exactly one) and `lfu-decay-time 0` (no decay), so OBJECT FREQ counts the
accesses that touched; the LRU test only uses that an idle time never goes down unless an
access resets it.
"""

import pytest

from helpers import Err, wait_until

pytestmark = pytest.mark.abacus_only("CLIENT NO-TOUCH is Redis 7.2; the reference Redis is 7.0")


@pytest.fixture
def lfu(r):
    keys = ["maxmemory-policy", "lfu-log-factor", "lfu-decay-time"]
    before = {k: r.config_get(k)[k] for k in keys}
    r.config_set("maxmemory-policy", "allkeys-lfu")
    r.config_set("lfu-log-factor", "0")
    r.config_set("lfu-decay-time", "0")
    yield
    for k, v in before.items():
        r.config_set(k, v)


def freq(r, key):
    return r.object("freq", key)


def test_no_touch_reads_leave_lfu_counters_alone_but_touch_counts(r, raw_conn, lfu):
    keys = [f"nt:k{i}" for i in range(8)]
    for k in keys:
        r.set(k, "v")
    r.rpush("nt:list", "a", "b")
    start = {k: freq(r, k) for k in keys + ["nt:list"]}
    c = raw_conn()
    assert c("CLIENT", "NO-TOUCH", "ON") == "OK"
    # Single commands, a pipeline (one group per shard), a multi-key read across shards,
    # a transaction and a write: none of them touches.
    for k in keys:
        assert c("GET", k) == b"v"
    assert c.pipeline([("GET", k) for k in keys]) == [b"v"] * len(keys)
    assert c("MGET", *keys) == [b"v"] * len(keys)
    assert c("MULTI") == "OK"
    assert c("GET", keys[0]) == "QUEUED"
    assert c("LRANGE", "nt:list", "0", "-1") == "QUEUED"
    assert c("EXEC") == [b"v", [b"a", b"b"]]
    assert c("RPUSH", "nt:list", "c") == 3
    assert {k: freq(r, k) for k in keys + ["nt:list"]} == start
    # TOUCH still touches, once per key.
    assert c("TOUCH", keys[0], keys[1]) == 2
    assert freq(r, keys[0]) == start[keys[0]] + 1
    assert freq(r, keys[1]) == start[keys[1]] + 1
    assert freq(r, keys[2]) == start[keys[2]]
    # Another client's reads touch as before.
    assert r.get(keys[2]) == b"v"
    assert freq(r, keys[2]) == start[keys[2]] + 1
    # OFF: this client's reads touch again.
    assert c("CLIENT", "NO-TOUCH", "OFF") == "OK"
    assert c("GET", keys[3]) == b"v"
    assert freq(r, keys[3]) == start[keys[3]] + 1


def test_reset_ends_no_touch(r, raw_conn, lfu):
    r.set("nt:reset", "v")
    start = freq(r, "nt:reset")
    c = raw_conn()
    assert c("CLIENT", "NO-TOUCH", "on") == "OK"
    assert c("GET", "nt:reset") == b"v"
    assert freq(r, "nt:reset") == start
    assert c("RESET") == "RESET"
    assert "T" not in flags_of(c)
    assert c("GET", "nt:reset") == b"v"
    assert freq(r, "nt:reset") == start + 1


def test_no_touch_reads_do_not_reset_idle_time(r, raw_conn):
    r.set("nt:idle", "v")
    c = raw_conn()
    assert c("CLIENT", "NO-TOUCH", "ON") == "OK"
    idle = wait_until(lambda: r.object("idletime", "nt:idle") >= 1, timeout=10)
    assert idle
    assert c("GET", "nt:idle") == b"v"
    assert c("STRLEN", "nt:idle") == 1
    # An idle time only goes down when an access resets it (to 0).
    assert r.object("idletime", "nt:idle") >= 1


def flags_of(c):
    line = c("CLIENT", "INFO").decode()
    return dict(f.split("=", 1) for f in line.split())["flags"]


def test_client_list_and_info_show_the_t_flag(r, raw_conn):
    c = raw_conn()
    cid = c("CLIENT", "ID")
    assert "T" not in flags_of(c)
    assert c("CLIENT", "NO-TOUCH", "ON") == "OK"
    assert flags_of(c) == "T"
    line = [l for l in r.execute_command("CLIENT", "LIST", "ID", cid).decode().splitlines() if l][0]
    assert " flags=T " in line
    assert c("CLIENT", "NO-TOUCH", "OFF") == "OK"
    assert flags_of(c) == "N"


def test_no_touch_errors(r, raw_conn):
    c = raw_conn()
    assert c("CLIENT", "NO-TOUCH", "maybe") == Err("ERR syntax error")
    assert c("CLIENT", "NO-TOUCH") == Err("ERR wrong number of arguments for 'client|no-touch' command")
    assert c("CLIENT", "NO-TOUCH", "ON", "OFF") == Err("ERR wrong number of arguments for 'client|no-touch' command")
    assert "T" not in flags_of(c)


def test_command_docs_and_info(raw_conn):
    c = raw_conn()
    docs = c("COMMAND", "DOCS", "CLIENT")
    subcommands = docs[1][docs[1].index(b"subcommands") + 1]
    entry = subcommands[subcommands.index(b"client|no-touch") + 1]
    fields = dict(zip(entry[::2], entry[1::2]))
    assert fields[b"since"] == b"7.2.0"
    assert fields[b"complexity"] == b"O(1)"
    assert fields[b"group"] == b"connection"
    info = c("COMMAND", "INFO", "CLIENT")[0]
    sub = [s for s in info[9] if s[0] == b"client|no-touch"][0]
    assert sub[1] == 3
    assert set(sub[2]) == {"loading", "stale"}
    assert set(sub[6]) == {"@slow", "@connection"}
