"""Client-side caching: CLIENT TRACKING (default, BCAST/PREFIX, OPTIN, OPTOUT, NOLOOP,
REDIRECT), TRACKINGINFO, GETREDIR, CACHING, the invalidation messages (RESP3 pushes and
`__redis__:invalidate` messages), their errors, INFO's figures and redis-py's client-side
cache. Every test also passes against the real Redis (`--target redis`).

Invalidations travel asynchronously to other clients, so a test never concludes from
silence: where a key must NOT be invalidated, a second, tracked "barrier" key is written
after it, and the first invalidation to arrive must be the barrier's (a client's
invalidations arrive in the order of the writes that caused them).
"""

import pytest
import redis
from redis.cache import CacheConfig

from helpers import Err, Push, wait_until


def resp3(raw_conn):
    c = raw_conn()
    c("HELLO", "3")
    return c


def next_push(c):
    """The next message on `c`, which must be a push."""
    m = c.read_reply()
    assert isinstance(m, Push), m
    return list(m)


def invalidated_keys(m):
    assert m[0] == b"invalidate", m
    return m[1]


def test_default_mode_invalidates_a_read_key_once(r, raw_conn):
    c = resp3(raw_conn)
    assert c("CLIENT", "TRACKING", "ON") == "OK"
    r.set("t:k", "1")
    assert c("GET", "t:k") == b"1"
    assert c("GET", "t:barrier") is None
    r.set("t:k", "2")
    assert invalidated_keys(next_push(c)) == [b"t:k"]
    # Invalidated once: the key left the table until it is read again.
    r.set("t:k", "3")
    r.set("t:barrier", "x")
    assert invalidated_keys(next_push(c)) == [b"t:barrier"]
    # Read again: tracked again.
    assert c("GET", "t:k") == b"3"
    r.delete("t:k")
    assert invalidated_keys(next_push(c)) == [b"t:k"]


def test_own_write_invalidates_after_its_reply(raw_conn):
    c = resp3(raw_conn)
    c("CLIENT", "TRACKING", "ON")
    assert c("GET", "t:own") is None
    assert c("SET", "t:own", "v") == "OK"
    assert invalidated_keys(next_push(c)) == [b"t:own"]


def test_multi_key_read_tracks_every_key(r, raw_conn):
    c = resp3(raw_conn)
    c("CLIENT", "TRACKING", "ON")
    assert c("MGET", "t:a", "t:b") == [None, None]
    r.set("t:b", "1")
    assert invalidated_keys(next_push(c)) == [b"t:b"]
    r.set("t:a", "1")
    assert invalidated_keys(next_push(c)) == [b"t:a"]


def test_reads_in_a_transaction_are_tracked(r, raw_conn):
    c = resp3(raw_conn)
    c("CLIENT", "TRACKING", "ON")
    assert c("MULTI") == "OK"
    assert c("GET", "t:tx") == "QUEUED"
    assert c("EXEC") == [None]
    r.set("t:tx", "1")
    assert invalidated_keys(next_push(c)) == [b"t:tx"]


def test_redirect_to_a_resp2_subscriber(r, raw_conn):
    sub = raw_conn()
    sub_id = sub("CLIENT", "ID")
    assert sub("SUBSCRIBE", "__redis__:invalidate") == [b"subscribe", b"__redis__:invalidate", 1]
    c = raw_conn()
    assert c("CLIENT", "TRACKING", "ON", "REDIRECT", str(sub_id)) == "OK"
    assert c("CLIENT", "GETREDIR") == sub_id
    assert c("CLIENT", "TRACKINGINFO") == [b"flags", [b"on"], b"redirect", sub_id, b"prefixes", []]
    assert c("GET", "t:redir") is None
    r.set("t:redir", "1")
    assert sub.read_reply() == [b"message", b"__redis__:invalidate", [b"t:redir"]]
    # FLUSHALL: a null instead of the keys.
    r.flushall()
    assert sub.read_reply() == [b"message", b"__redis__:invalidate", None]


def test_broken_redirect_is_reported_to_a_resp3_client(r, raw_conn):
    target = raw_conn()
    target_id = target("CLIENT", "ID")
    c = resp3(raw_conn)
    c("CLIENT", "TRACKING", "ON", "REDIRECT", str(target_id))
    c("GET", "t:broken")
    target.close()
    assert wait_until(lambda: b"id=%d " % target_id not in r.execute_command("CLIENT", "LIST"))
    r.set("t:broken", "1")
    assert next_push(c) == [b"tracking-redir-broken", target_id]
    flags = c("CLIENT", "TRACKINGINFO")[b"flags"]
    assert sorted(flags) == [b"broken_redirect", b"on"]


def test_bcast_with_prefixes(r, raw_conn):
    c = resp3(raw_conn)
    assert c("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "user:", "PREFIX", "obj:") == "OK"
    info = c("CLIENT", "TRACKINGINFO")
    assert sorted(info[b"flags"]) == [b"bcast", b"on"]
    assert info[b"redirect"] == 0
    assert info[b"prefixes"] == [b"obj:", b"user:"]
    # No read needed; keys outside the prefixes are not sent.
    r.set("other", "1")
    r.set("user:1", "1")
    assert invalidated_keys(next_push(c)) == [b"user:1"]
    r.set("obj:9", "1")
    assert invalidated_keys(next_push(c)) == [b"obj:9"]
    # Every write, not once per read.
    r.set("user:1", "2")
    assert invalidated_keys(next_push(c)) == [b"user:1"]
    # More prefixes add to those the client has.
    assert c("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "z:") == "OK"
    assert c("CLIENT", "TRACKINGINFO")[b"prefixes"] == [b"obj:", b"user:", b"z:"]
    assert wait_until(lambda: r.info("stats")["tracking_total_prefixes"] >= 3)


def test_bcast_without_prefix_sends_every_key(r, raw_conn):
    c = resp3(raw_conn)
    c("CLIENT", "TRACKING", "ON", "BCAST")
    assert c("CLIENT", "TRACKINGINFO")[b"prefixes"] == [b""]
    r.set("anything", "1")
    assert invalidated_keys(next_push(c)) == [b"anything"]


def test_optin_tracks_only_after_caching_yes(r, raw_conn):
    c = resp3(raw_conn)
    assert c("CLIENT", "TRACKING", "ON", "OPTIN") == "OK"
    assert c("GET", "t:notcached") is None
    assert c("CLIENT", "CACHING", "YES") == "OK"
    assert sorted(c("CLIENT", "TRACKINGINFO")[b"flags"]) == [b"caching-yes", b"on", b"optin"]
    assert c("GET", "t:cached") is None
    # CACHING lasts for one command.
    assert c("GET", "t:after") is None
    assert sorted(c("CLIENT", "TRACKINGINFO")[b"flags"]) == [b"on", b"optin"]
    r.set("t:notcached", "1")
    r.set("t:after", "1")
    r.set("t:cached", "1")
    assert invalidated_keys(next_push(c)) == [b"t:cached"]


def test_optout_tracks_unless_caching_no(r, raw_conn):
    c = resp3(raw_conn)
    assert c("CLIENT", "TRACKING", "ON", "OPTOUT") == "OK"
    assert c("CLIENT", "CACHING", "NO") == "OK"
    assert c("GET", "t:skipped") is None
    assert c("GET", "t:tracked") is None
    r.set("t:skipped", "1")
    r.set("t:tracked", "1")
    assert invalidated_keys(next_push(c)) == [b"t:tracked"]


def test_noloop_skips_own_writes(r, raw_conn):
    c = resp3(raw_conn)
    assert c("CLIENT", "TRACKING", "ON", "NOLOOP") == "OK"
    assert sorted(c("CLIENT", "TRACKINGINFO")[b"flags"]) == [b"noloop", b"on"]
    assert c("MGET", "t:mine", "t:theirs") == [None, None]
    assert c("SET", "t:mine", "1") == "OK"
    r.set("t:theirs", "1")
    assert invalidated_keys(next_push(c)) == [b"t:theirs"]


def test_noloop_with_bcast(r, raw_conn):
    c = resp3(raw_conn)
    c("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "nl:", "NOLOOP")
    assert c("SET", "nl:mine", "1") == "OK"
    r.set("nl:theirs", "1")
    assert invalidated_keys(next_push(c)) == [b"nl:theirs"]


def test_flushall_and_flushdb_send_a_null(r, raw_conn):
    c = resp3(raw_conn)
    c("CLIENT", "TRACKING", "ON")
    c("GET", "t:f")
    r.flushall()
    assert next_push(c) == [b"invalidate", None]
    c("GET", "t:f")
    r.flushdb()
    assert next_push(c) == [b"invalidate", None]
    # The table was emptied: nothing of it remains.
    assert wait_until(lambda: r.info("stats")["tracking_total_keys"] == 0)


def test_expiry_invalidates(r, raw_conn):
    c = resp3(raw_conn)
    c("CLIENT", "TRACKING", "ON")
    # The read must see the key before it expires; retried if this machine was slower.
    for _ in range(20):
        r.set("t:exp", "v", px=300)
        if c("GET", "t:exp") == b"v":
            break
        # Read when already gone: wait for nothing, try again with a fresh key.
    else:
        pytest.fail("could not read the key before it expired")
    # Another client's access reclaims it (or active expiry did already).
    assert wait_until(lambda: r.get("t:exp") is None, timeout=10)
    assert invalidated_keys(next_push(c)) == [b"t:exp"]


def test_tracking_off_and_reset_stop_invalidations(r, raw_conn):
    c = resp3(raw_conn)
    c("CLIENT", "TRACKING", "ON")
    c("GET", "t:off")
    assert c("CLIENT", "TRACKING", "OFF") == "OK"
    info = c("CLIENT", "TRACKINGINFO")
    assert list(info[b"flags"]) == [b"off"] and info[b"redirect"] == -1 and info[b"prefixes"] == []
    assert c("CLIENT", "GETREDIR") == -1
    r.set("t:off", "1")
    # Tracking again, a barrier shows nothing came for t:off.
    c("CLIENT", "TRACKING", "ON")
    c("GET", "t:bar")
    r.set("t:bar", "1")
    assert invalidated_keys(next_push(c)) == [b"t:bar"]
    assert c("RESET") == "RESET"
    assert c("CLIENT", "TRACKINGINFO") == [b"flags", [b"off"], b"redirect", -1, b"prefixes", []]


def test_info_and_client_list(r, raw_conn):
    c = resp3(raw_conn)
    c("CLIENT", "TRACKING", "ON")
    cid = c("CLIENT", "ID")
    c("MGET", "t:i1", "t:i2")
    stats = r.info("stats")
    assert stats["tracking_total_keys"] >= 2
    assert stats["tracking_total_items"] >= 2
    assert r.info("clients")["tracking_clients"] >= 1
    line = [l for l in r.execute_command("CLIENT", "LIST").decode().splitlines() if l.startswith("id=%d " % cid)][0]
    fields = dict(kv.split("=", 1) for kv in line.split(" "))
    assert "t" in fields["flags"]
    assert fields["redir"] == "0"


def test_tracking_table_max_keys_invalidates_to_fit(r, raw_conn):
    old = list(r.config_get("tracking-table-max-keys").values())[0]
    r.config_set("tracking-table-max-keys", 1)
    try:
        c = resp3(raw_conn)
        c("CLIENT", "TRACKING", "ON")
        pushes = []

        def command(*args):
            """Runs a command; the pushes before its reply go to `pushes`."""
            m = c(*args)
            while isinstance(m, Push):
                pushes.append(list(m))
                m = c.read_reply()
            return m

        for k in ("t:m1", "t:m2", "t:m3"):
            assert command("GET", k) is None
        assert command("PING") == "PONG"
        assert pushes, "no invalidation for the keys over the bound"
        for p in pushes:
            assert p[0] == b"invalidate" and set(p[1]) <= {b"t:m1", b"t:m2", b"t:m3"}
        assert r.info("stats")["tracking_total_keys"] <= 2
    finally:
        r.config_set("tracking-table-max-keys", old)


@pytest.mark.parametrize("args,error", [
    (("ON", "PREFIX", "a"), "PREFIX option requires BCAST mode to be enabled"),
    (("ON", "REDIRECT", "999999"), "The client ID you want redirect to does not exist"),
    (("ON", "REDIRECT", "0"), "The client ID you want redirect to does not exist"),
    (("ON", "REDIRECT", "x"), "value is not an integer or out of range"),
    (("ON", "BCAST", "OPTIN"), "OPTIN and OPTOUT are not compatible with BCAST"),
    (("ON", "OPTIN", "OPTOUT"), "You can't specify both OPTIN mode and OPTOUT mode"),
    (("ON", "BOGUS"), "syntax error"),
    (("MAYBE",), "syntax error"),
    (("ON", "BCAST", "PREFIX", "a", "PREFIX", "ab"), "Prefix 'a' overlaps with another provided prefix 'ab'. Prefixes for a single client must not overlap."),
])
def test_tracking_errors(raw_conn, args, error):
    c = raw_conn()
    reply = c("CLIENT", "TRACKING", *args)
    assert isinstance(reply, Err) and reply == "ERR " + error, reply


def test_mode_switch_and_caching_errors(raw_conn):
    c = raw_conn()
    reply = c("CLIENT", "CACHING", "YES")
    assert isinstance(reply, Err) and reply == "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"
    assert c("CLIENT", "TRACKING", "ON", "OPTIN") == "OK"
    assert c("CLIENT", "CACHING", "NO") == "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."
    assert c("CLIENT", "CACHING", "MAYBE") == "ERR syntax error"
    assert c("CLIENT", "TRACKING", "ON", "OPTOUT") == "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."
    assert c("CLIENT", "TRACKING", "ON", "BCAST") == "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."
    assert c("CLIENT", "TRACKING", "OFF") == "OK"
    assert c("CLIENT", "TRACKING", "ON", "OPTOUT") == "OK"
    assert c("CLIENT", "CACHING", "YES") == "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."
    assert c("CLIENT", "TRACKING", "OFF") == "OK"
    assert c("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "abc") == "OK"
    assert c("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "ab") == "ERR Prefix 'ab' overlaps with an existing prefix 'abc'. Prefixes for a single client must not overlap."
    assert c("CLIENT", "TRACKING", "ON", "REDIRECT", str(c("CLIENT", "ID")), "REDIRECT", "1") == "ERR A client can only redirect to a single other client"
    assert c("CLIENT", "TRACKINGINFO", "x") == "ERR wrong number of arguments for 'client|trackinginfo' command"


def test_redis_py_client_side_cache(server, r, monkeypatch):
    # redis-py 5.3 enables its cache only for servers that say 7.4 or later (a policy of the
    # client; it speaks CLIENT TRACKING as 7.0 defines it). Both targets say 7.0.
    monkeypatch.setattr(redis.connection.CacheProxyConnection, "MIN_ALLOWED_VERSION", "7.0.0")
    cached = server.client(protocol=3, cache_config=CacheConfig())
    try:
        r.set("t:py", "1")
        assert cached.get("t:py") == b"1"
        assert cached.get_cache().size >= 1
        r.set("t:py", "2")
        # The invalidation reaches the cache; the next reads see the new value.
        assert wait_until(lambda: cached.get("t:py") == b"2")
        r.delete("t:py")
        assert wait_until(lambda: cached.get("t:py") is None)
    finally:
        cached.close()
