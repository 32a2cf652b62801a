"""Server commands: INFO DBSIZE FLUSHDB FLUSHALL CONFIG DEBUG SWAPDB FUNCTION."""

import os

import pytest

from helpers import Err, RespClient, encode_command, info_dict, info_sections, kv_fields, wait_until


def wrong_args(cmd):
    return Err("ERR wrong number of arguments for '%s' command" % cmd)


def pairs(lst):
    assert len(lst) % 2 == 0
    return {lst[i]: lst[i + 1] for i in range(0, len(lst), 2)}


# ---------------------------------------------------------------- INFO

def test_info_default_sections(c):
    out = c("INFO")
    assert isinstance(out, bytes)
    assert b"\r\n" in out
    secs = info_sections(out)
    for s in ("Server", "Clients", "Memory", "Persistence", "Stats", "Replication",
              "CPU", "Keyspace"):
        assert s in secs, s
    # commandstats is not part of the default set
    assert "Commandstats" not in secs


def test_info_server(c):
    out = c("INFO", "server")
    assert info_sections(out) == ["Server"]
    d = info_dict(out)
    for f in ("redis_version", "redis_mode", "os", "arch_bits", "process_id",
              "run_id", "tcp_port", "uptime_in_seconds", "uptime_in_days",
              "executable", "config_file"):
        assert f in d, f
    assert d["redis_mode"] == "standalone"
    assert int(d["tcp_port"]) == c.port
    assert len(d["run_id"]) == 40
    major = int(d["redis_version"].split(".")[0])
    assert major >= 7


def test_info_section_name_case_insensitive(c):
    assert info_sections(c("INFO", "SERVER")) == ["Server"]


def test_info_clients(c, raw_conn):
    others = [raw_conn() for _ in range(3)]
    for o in others:
        o("PING")
    d = info_dict(c("INFO", "clients"))
    for f in ("connected_clients", "maxclients", "blocked_clients"):
        assert f in d, f
    assert int(d["connected_clients"]) >= 5  # r, c and the three others


def test_info_memory(c):
    d = info_dict(c("INFO", "memory"))
    for f in ("used_memory", "used_memory_human", "used_memory_peak", "maxmemory",
              "maxmemory_policy"):
        assert f in d, f
    assert int(d["used_memory"]) > 0
    assert d["maxmemory_policy"] == "noeviction"


def test_info_persistence(c):
    d = info_dict(c("INFO", "persistence"))
    for f in ("loading", "rdb_changes_since_last_save", "rdb_bgsave_in_progress",
              "rdb_last_save_time", "aof_enabled"):
        assert f in d, f
    assert d["loading"] == "0"


def test_info_stats(c):
    d1 = info_dict(c("INFO", "stats"))
    for f in ("total_connections_received", "total_commands_processed",
              "instantaneous_ops_per_sec", "expired_keys", "evicted_keys",
              "keyspace_hits", "keyspace_misses", "rejected_connections"):
        assert f in d1, f
    for _ in range(5):
        c("PING")
    d2 = info_dict(c("INFO", "stats"))
    assert int(d2["total_commands_processed"]) >= int(d1["total_commands_processed"]) + 5


def test_info_keyspace_hits_misses(c):
    c("SET", "k", "v")
    d1 = info_dict(c("INFO", "stats"))
    c("GET", "k")
    c("GET", "k")
    c("GET", "missing")
    d2 = info_dict(c("INFO", "stats"))
    assert int(d2["keyspace_hits"]) - int(d1["keyspace_hits"]) == 2
    assert int(d2["keyspace_misses"]) - int(d1["keyspace_misses"]) == 1


def test_info_replication(c):
    d = info_dict(c("INFO", "replication"))
    assert d["role"] == "master"
    assert d["connected_slaves"] == "0"


def test_info_cpu(c):
    d = info_dict(c("INFO", "cpu"))
    for f in ("used_cpu_sys", "used_cpu_user"):
        assert f in d
        float(d[f])


def test_info_keyspace(c):
    assert info_dict(c("INFO", "keyspace")) == {}
    c("SET", "a", "1")
    c("SET", "b", "2", "EX", "100")
    c("SELECT", "3")
    c("SET", "x", "1")
    out = c("INFO", "keyspace")
    assert info_sections(out) == ["Keyspace"]
    d = info_dict(out)
    assert set(d) == {"db0", "db3"}
    db0 = kv_fields(d["db0"])
    assert db0["keys"] == "2"
    assert db0["expires"] == "1"
    assert "avg_ttl" in db0
    assert kv_fields(d["db3"])["keys"] == "1"
    assert kv_fields(d["db3"])["expires"] == "0"


def test_info_commandstats(c):
    assert c("CONFIG", "RESETSTAT") == "OK"
    c("SET", "a", "1")
    c("SET", "b", "2")
    c("GET", "a")
    out = c("INFO", "commandstats")
    assert info_sections(out) == ["Commandstats"]
    d = info_dict(out)
    st = kv_fields(d["cmdstat_set"])
    assert st["calls"] == "2"
    for f in ("usec", "usec_per_call", "rejected_calls", "failed_calls"):
        assert f in st
    assert kv_fields(d["cmdstat_get"])["calls"] == "1"


def test_info_commandstats_failed_and_subcommands(c):
    c("CONFIG", "RESETSTAT")
    c("SET", "s", "abc")
    c("INCR", "s")
    c("CLIENT", "ID")
    c("GET")  # arity error is a rejected call
    d = info_dict(c("INFO", "commandstats"))
    incr = kv_fields(d["cmdstat_incr"])
    assert incr["calls"] == "1" and incr["failed_calls"] == "1"
    get = kv_fields(d["cmdstat_get"])
    assert get["calls"] == "0" and get["rejected_calls"] == "1"
    assert kv_fields(d["cmdstat_client|id"])["calls"] == "1"


def test_info_multiple_sections(c):
    secs = info_sections(c("INFO", "server", "keyspace"))
    assert secs == ["Server", "Keyspace"]


def test_info_all_and_everything(c):
    secs = info_sections(c("INFO", "everything"))
    for s in ("Server", "Clients", "Memory", "Stats", "Commandstats", "Keyspace"):
        assert s in secs
    assert "Commandstats" in info_sections(c("INFO", "all"))


REDIS_70_DEFAULT = ["Server", "Clients", "Memory", "Persistence", "Stats", "Replication", "CPU",
                    "Modules", "Errorstats", "Cluster", "Keyspace"]


def test_info_sections_in_redis_70_order(c):
    c("SET", "k", "v")  # so that Keyspace has a line
    assert info_sections(c("INFO")) == REDIS_70_DEFAULT
    assert info_sections(c("INFO", "default")) == REDIS_70_DEFAULT
    for every in ("all", "everything"):
        secs = info_sections(c("INFO", every))
        # Redis 7.0 also lists Latencystats there (not kept by Abacus yet).
        assert [s for s in secs if s != "Latencystats"] == \
            REDIS_70_DEFAULT[:8] + ["Commandstats"] + REDIS_70_DEFAULT[8:], every
    # Asked in any order, printed in the fixed order.
    assert info_sections(c("INFO", "keyspace", "cluster", "server")) == ["Server", "Cluster", "Keyspace"]


def test_info_cluster_and_modules(c):
    assert info_dict(c("INFO", "cluster")) == {"cluster_enabled": "0"}
    assert c("INFO", "modules") == b"# Modules\r\n"


def test_info_errorstats_count_error_replies_by_code(c):
    assert c("CONFIG", "RESETSTAT") == "OK"
    assert info_dict(c("INFO", "errorstats")) == {}
    c("SET", "s", "abc")
    c("HSET", "h", "f", "v")
    assert c("INCR", "s") == Err("ERR value is not an integer or out of range")
    assert isinstance(c("NOSUCHCOMMAND"), Err)
    assert isinstance(c("GET", "h"), Err)  # WRONGTYPE
    assert c("GET") == wrong_args("get")
    # Errors of queued commands count when EXEC runs them; EXECABORT counts as its own code.
    assert c("MULTI") == "OK"
    c("INCR", "s")
    c("HGET", "s", "f")
    assert c("EXEC") == [Err("ERR value is not an integer or out of range"),
                         Err("WRONGTYPE Operation against a key holding the wrong kind of value")]
    assert c("MULTI") == "OK"
    assert c("GET") == wrong_args("get")
    assert c("EXEC") == Err("EXECABORT Transaction discarded because of previous errors.")
    d = info_dict(c("INFO", "errorstats"))
    assert d == {"errorstat_ERR": "count=5", "errorstat_WRONGTYPE": "count=2",
                 "errorstat_EXECABORT": "count=1"}, d
    assert info_dict(c("INFO", "stats"))["total_error_replies"] == "8"
    assert c("CONFIG", "RESETSTAT") == "OK"
    assert info_dict(c("INFO", "errorstats")) == {}
    assert info_dict(c("INFO", "stats"))["total_error_replies"] == "0"


def test_debug_error_replies_with_the_given_error(c):
    assert c("DEBUG", "ERROR", "MYCODE something went wrong") == Err("MYCODE something went wrong")
    assert c("DEBUG", "ERROR", "line\r\nbreak") == Err("line  break")
    assert c("DEBUG", "ERROR") == Err(
        "ERR unknown subcommand or wrong number of arguments for 'ERROR'. Try DEBUG HELP.")


def test_lolwut(c, server):
    assert c("LOLWUT") == b"Redis ver. 7.0.15\n"
    assert c("LOLWUT", "VERSION", "7") == b"Redis ver. 7.0.15\n"
    assert c("LOLWUT", "VERSION", "x") == Err("ERR value is not an integer or out of range")
    for v in ("5", "6"):
        art = c("LOLWUT", "VERSION", v)
        assert art.endswith(b"Redis ver. 7.0.15\n") and art.count(b"\n") > 3, art
    r3 = server.client(protocol=3)
    assert r3.execute_command("LOLWUT") in (b"Redis ver. 7.0.15\n", "Redis ver. 7.0.15\n")
    r3.close()


def test_info_unknown_section_is_empty(c):
    assert c("INFO", "nosuchsection") == b""


def test_info_redis_py(r):
    r.set("foo", "bar")
    info = r.info()
    assert "redis_version" in info
    assert info["db0"]["keys"] == 1
    assert "cmdstat_set" in r.info("commandstats")


# ---------------------------------------------------------------- DBSIZE / FLUSH*

def test_dbsize(c):
    assert c("DBSIZE") == 0
    for i in range(10):
        c("SET", "k%d" % i, "v")
    assert c("DBSIZE") == 10
    c("DEL", "k0")
    assert c("DBSIZE") == 9
    c("SELECT", "1")
    assert c("DBSIZE") == 0
    assert c("DBSIZE", "x") == wrong_args("dbsize")


def test_flushdb(c):
    c("SET", "a", "1")
    c("SELECT", "1")
    c("SET", "b", "1")
    assert c("FLUSHDB") == "OK"
    assert c("DBSIZE") == 0
    c("SELECT", "0")
    assert c("DBSIZE") == 1


@pytest.mark.parametrize("mode", ["ASYNC", "SYNC", "async", "sync"])
def test_flushdb_modes(c, mode):
    c("SET", "a", "1")
    assert c("FLUSHDB", mode) == "OK"
    assert c("DBSIZE") == 0


@pytest.mark.parametrize("mode", ["ASYNC", "SYNC"])
def test_flushall_modes(c, mode):
    for db in (0, 5, 15):
        c("SELECT", db)
        c("SET", "a", "1")
    assert c("FLUSHALL", mode) == "OK"
    for db in (0, 5, 15):
        c("SELECT", db)
        assert c("DBSIZE") == 0


def test_flush_syntax(c):
    assert c("FLUSHALL", "LATER") == Err("ERR syntax error")
    assert c("FLUSHDB", "LATER") == Err("ERR syntax error")
    assert c("FLUSHALL", "SYNC", "ASYNC") == Err("ERR syntax error")


def test_flushall_clears_expires(c):
    c("SET", "a", "1", "EX", "100")
    c("FLUSHALL")
    assert c("TTL", "a") == -2
    assert info_dict(c("INFO", "keyspace")) == {}


# ---------------------------------------------------------------- CONFIG

def test_config_get_exact(c):
    assert c("CONFIG", "GET", "maxmemory") == [b"maxmemory", b"0"]
    assert c("CONFIG", "GET", "databases") == [b"databases", b"16"]
    assert c("CONFIG", "GET", "nosuchparam") == []


def test_config_get_glob(c):
    d = pairs(c("CONFIG", "GET", "max*"))
    assert d[b"maxmemory"] == b"0"
    assert d[b"maxclients"] == b"10000"
    assert d[b"maxmemory-policy"] == b"noeviction"
    assert all(k.startswith(b"max") for k in d)


def test_config_get_multiple_and_case(c):
    # parameter names are case-insensitive (the case of the echoed name is
    # not asserted: Redis 7.0 echoes an exact name as it was requested)
    d = pairs(c("CONFIG", "GET", "MAXMEMORY", "timeout", "databases"))
    d = {k.lower(): v for k, v in d.items()}
    assert d == {b"maxmemory": b"0", b"timeout": b"0", b"databases": b"16"}


def test_config_get_question_mark_glob(c):
    d = pairs(c("CONFIG", "GET", "timeou?"))
    assert d == {b"timeout": b"0"}


def test_config_get_port(c):
    assert c("CONFIG", "GET", "port") == [b"port", str(c.port).encode()]


def test_config_set_single(c):
    try:
        assert c("CONFIG", "SET", "maxmemory", "10mb") == "OK"
        assert c("CONFIG", "GET", "maxmemory") == [b"maxmemory", b"10485760"]
    finally:
        c("CONFIG", "SET", "maxmemory", "0")
    assert c("CONFIG", "GET", "maxmemory") == [b"maxmemory", b"0"]


def test_config_set_maxmemory_takes_any_u64(c):
    # As Redis 7.0's unsigned long long parameter: up to 2^64 - 1, writes still allowed.
    try:
        for v in (b"9223372036854775808", b"18446744073709551615"):
            assert c("CONFIG", "SET", "maxmemory", v) == "OK"
            assert c("CONFIG", "GET", "maxmemory") == [b"maxmemory", v]
            assert c("SET", "k", "v") == "OK"
        assert c("CONFIG", "SET", "maxmemory", "16777216gb") == "OK"
        assert c("CONFIG", "GET", "maxmemory") == [b"maxmemory", b"18014398509481984"]
    finally:
        c("CONFIG", "SET", "maxmemory", "0")


def test_config_set_multiple_pairs(c):
    try:
        assert c("CONFIG", "SET", "timeout", "300", "maxmemory-policy", "allkeys-lru") == "OK"
        d = pairs(c("CONFIG", "GET", "timeout", "maxmemory-policy"))
        assert d == {b"timeout": b"300", b"maxmemory-policy": b"allkeys-lru"}
    finally:
        c("CONFIG", "SET", "timeout", "0", "maxmemory-policy", "noeviction")


def test_config_set_errors(c):
    assert c("CONFIG", "SET", "nosuchparam", "1") == Err(
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuchparam'")
    assert c("CONFIG", "SET", "timeout") == Err(
        "ERR wrong number of arguments for 'config|set' command")
    # an odd number of arguments beyond the first pair is a syntax error
    assert c("CONFIG", "SET", "timeout", "1", "maxclients") == Err("ERR syntax error")
    rep = c("CONFIG", "SET", "timeout", "abc")
    assert isinstance(rep, Err)
    assert rep.message.startswith(
        "ERR CONFIG SET failed (possibly related to argument 'timeout') - ")
    rep = c("CONFIG", "SET", "databases", "32")
    assert rep == Err("ERR CONFIG SET failed (possibly related to argument 'databases') "
                      "- can't set immutable config")
    rep = c("CONFIG", "SET", "loglevel", "bogus")
    assert isinstance(rep, Err)
    assert rep.message.startswith(
        "ERR CONFIG SET failed (possibly related to argument 'loglevel') - ")
    assert c("CONFIG", "SET", "timeout", "1", "timeout", "2") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'timeout') - duplicate parameter")
    assert c("CONFIG", "GET", "timeout") == [b"timeout", b"0"]


def test_config_get_echoes_exact_name_as_given(c):
    # Redis replies with an exact (non-glob) name as it was requested
    assert c("CONFIG", "GET", "MAXMEMORY") == [b"MAXMEMORY", b"0"]
    assert c("CONFIG", "GET", "maxmemory-pol*") == [b"maxmemory-policy", b"noeviction"]


def test_config_set_values_parsed_like_redis(c):
    def failed(name, why):
        return Err("ERR CONFIG SET failed (possibly related to argument '%s') - %s" % (name, why))
    try:
        # booleans are only yes/no
        assert c("CONFIG", "SET", "protected-mode", "true") == failed(
            "protected-mode", "argument must be 'yes' or 'no'")
        assert c("CONFIG", "SET", "stop-writes-on-bgsave-error", "1") == failed(
            "stop-writes-on-bgsave-error", "argument must be 'yes' or 'no'")
        # integers as string2ll: no '+', no leading zeros
        assert c("CONFIG", "SET", "timeout", "+5") == failed(
            "timeout", "argument couldn't be parsed into an integer")
        assert c("CONFIG", "SET", "timeout", "05") == failed(
            "timeout", "argument couldn't be parsed into an integer")
        # memory as memtoull: no sign; no digits is 0
        assert c("CONFIG", "SET", "maxmemory", "+1") == failed(
            "maxmemory", "argument must be a memory value")
        assert c("CONFIG", "SET", "maxmemory", "1x") == failed(
            "maxmemory", "argument must be a memory value")
        assert c("CONFIG", "SET", "maxmemory", "1gb") == "OK"
        assert c("CONFIG", "GET", "maxmemory") == [b"maxmemory", b"1073741824"]
        assert c("CONFIG", "SET", "maxmemory", "") == "OK"
        assert c("CONFIG", "GET", "maxmemory") == [b"maxmemory", b"0"]
        # hz takes any non-negative int and is clamped to 1..500
        assert c("CONFIG", "SET", "hz", "0") == "OK"
        assert c("CONFIG", "GET", "hz") == [b"hz", b"1"]
        assert c("CONFIG", "SET", "hz", "1000") == "OK"
        assert c("CONFIG", "GET", "hz") == [b"hz", b"500"]
        assert c("CONFIG", "SET", "hz", "-1") == failed(
            "hz", "argument must be between 0 and 2147483647 inclusive")
        assert c("CONFIG", "SET", "save", "1 2 3") == failed("save", "Invalid save parameters")
        assert c("CONFIG", "SET", "save", "10 abc") == failed("save", "Invalid save parameters")
    finally:
        c("CONFIG", "SET", "maxmemory", "0", "hz", "10", "protected-mode", "yes",
          "stop-writes-on-bgsave-error", "yes", "timeout", "0")


def test_config_set_checks_every_name_before_any_value(c):
    # Redis checks names (unknown, immutable, duplicate) first, then values in order
    assert c("CONFIG", "SET", "timeout", "abc", "nosuchparam", "1") == Err(
        "ERR Unknown option or number of arguments for CONFIG SET - 'nosuchparam'")
    assert c("CONFIG", "SET", "timeout", "abc", "databases", "1") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config")
    assert c("CONFIG", "SET", "timeout", "abc", "timeout", "1") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'timeout') - duplicate parameter")
    assert c("CONFIG", "SET", "timeout", "abc", "save", "x") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'timeout') - "
        "argument couldn't be parsed into an integer")
    assert c("CONFIG", "SET", "appendfsync", "bogus") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'appendfsync') - "
        "argument(s) must be one of the following: everysec, always, no")
    assert c("CONFIG", "GET", "timeout") == [b"timeout", b"0"]


def test_config_ziplist_aliases(c):
    # Redis 7.0 still answers to the hash-max-ziplist-* names
    try:
        assert c("CONFIG", "SET", "hash-max-ziplist-entries", "100") == "OK"
        assert c("CONFIG", "GET", "hash-max-ziplist-entries") == [b"hash-max-ziplist-entries", b"100"]
        assert c("CONFIG", "GET", "hash-max-listpack-entries") == [b"hash-max-listpack-entries", b"100"]
        d = pairs(c("CONFIG", "GET", "hash-max-ziplist-*"))
        assert d == {b"hash-max-ziplist-entries": b"100", b"hash-max-ziplist-value": b"64"}
        assert c("CONFIG", "SET", "hash-max-ziplist-value", "abc") == Err(
            "ERR CONFIG SET failed (possibly related to argument 'hash-max-ziplist-value') - "
            "argument must be a memory value")
    finally:
        c("CONFIG", "SET", "hash-max-listpack-entries", "512", "hash-max-listpack-value", "64")


def test_config_set_is_atomic(c):
    # a failing pair leaves the whole command without effect
    rep = c("CONFIG", "SET", "timeout", "77", "loglevel", "bogus")
    assert isinstance(rep, Err)
    assert c("CONFIG", "GET", "timeout") == [b"timeout", b"0"]


def test_config_resetstat(c):
    for _ in range(10):
        c("SET", "a", "1")
        c("GET", "a")
        c("GET", "missing")
    assert c("CONFIG", "RESETSTAT") == "OK"
    d = info_dict(c("INFO", "stats"))
    assert int(d["total_commands_processed"]) <= 2
    assert d["keyspace_hits"] == "0"
    assert d["keyspace_misses"] == "0"
    cs = info_dict(c("INFO", "commandstats"))
    assert "cmdstat_set" not in cs
    assert "cmdstat_get" not in cs


def test_config_unknown_subcommand(c):
    rep = c("CONFIG", "FOO")
    assert isinstance(rep, Err)
    assert rep.message.startswith("ERR unknown subcommand 'FOO'. Try CONFIG HELP.")


def test_config_redis_py(r):
    assert r.config_get("timeout") == {"timeout": "0"}
    try:
        assert r.config_set("timeout", 5) is True
        assert r.config_get("timeout") == {"timeout": "5"}
    finally:
        r.config_set("timeout", 0)


def test_config_set_name_errors_show_the_name_as_given(c):
    # Redis 7.0 names an immutable or duplicate parameter as the client spelled it
    # (value errors use the parameter's own name)
    assert c("CONFIG", "SET", "DATABASES", "4") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'DATABASES') - can't set immutable config")
    assert c("CONFIG", "SET", "timeout", "1", "TimeOut", "2") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'TimeOut') - duplicate parameter")
    assert c("CONFIG", "SET", "TIMEOUT", "x") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'timeout') - "
        "argument couldn't be parsed into an integer")
    assert c("CONFIG", "GET", "timeout") == [b"timeout", b"0"]


def test_config_set_memory_unit_overflow_wraps(c):
    # Redis 7.0's memtoull multiplies by the unit without an overflow check
    try:
        assert c("CONFIG", "SET", "maxmemory", "17179869184gb") == "OK"  # 2^64
        assert c("CONFIG", "GET", "maxmemory") == [b"maxmemory", b"0"]
        assert c("CONFIG", "SET", "maxmemory", "99999999999999999999kb") == "OK"
        assert c("CONFIG", "GET", "maxmemory") == [b"maxmemory", b"18446744073709550592"]
    finally:
        c("CONFIG", "SET", "maxmemory", "0")


def test_config_set_maxclients_and_samples_ranges(c):
    def failed(name, why):
        return Err("ERR CONFIG SET failed (possibly related to argument '%s') - %s" % (name, why))
    try:
        assert c("CONFIG", "SET", "maxclients", "0") == failed(
            "maxclients", "argument must be between 1 and 4294967295 inclusive")
        assert c("CONFIG", "SET", "maxclients", "4294967296") == failed(
            "maxclients", "argument must be between 1 and 4294967295 inclusive")
        assert c("CONFIG", "SET", "maxmemory-samples", "100") == "OK"
        assert c("CONFIG", "GET", "maxmemory-samples") == [b"maxmemory-samples", b"100"]
        assert c("CONFIG", "SET", "maxmemory-samples", "2147483648") == failed(
            "maxmemory-samples", "argument must be between 1 and 2147483647 inclusive")
    finally:
        c("CONFIG", "SET", "maxmemory-samples", "5")


def test_config_get_name_after_a_glob_that_matched_it(c):
    # the first pattern that matches a parameter decides how its name is shown: an
    # exact name as given, a glob's match as the parameter's own name
    assert c("CONFIG", "GET", "timeou?", "TIMEOUT") == [b"timeout", b"0"]
    assert c("CONFIG", "GET", "TIMEOUT", "timeou?") == [b"TIMEOUT", b"0"]
    # a name without glob characters is looked up as is: a backslash is no escape
    assert c("CONFIG", "GET", "h\\z") == []
    assert c("CONFIG", "GET", "h\\z*") == [b"hz", b"10"]


# ---------------------------------------------------------------- DEBUG SLEEP

def test_debug_sleep_zero(c):
    assert c("DEBUG", "SLEEP", "0") == "OK"
    assert c("DEBUG", "sleep", "0.01") == "OK"
    # Redis's addReplySubcommandSyntaxError, for an unknown subcommand or a wrong arity
    assert c("DEBUG", "nosuch") == Err(
        "ERR unknown subcommand or wrong number of arguments for 'nosuch'. Try DEBUG HELP.")
    assert c("DEBUG", "sleep") == Err(
        "ERR unknown subcommand or wrong number of arguments for 'sleep'. Try DEBUG HELP.")
    assert c("PING") == "PONG"


def test_debug_sleep_pauses_other_clients(server, r, raw_conn):
    """As Redis's, DEBUG SLEEP stops the whole server: a command another client sends while
    it sleeps is answered after the sleeper's reply. The other client sends its commands
    only once a third one has seen the sleeper inside DEBUG (CLIENT LIST's cmd); the check
    is on the order of the replies, which the pause alone decides.

    CLIENT LIST shows `cmd=debug` as soon as the command is dispatched, a moment before the
    sleeper holds every shard and pauses the connections, and nothing outside can see the
    pause begin (a paused server answers no one). On a loaded machine the other client's
    commands can land in that moment, so the check is tried up to 5 times: a server that
    does not pause answers the other client first every time."""
    import select
    r.set("k", "v")
    outcomes = []
    for attempt in range(5):
        sleeper, other, watcher = raw_conn(), raw_conn(), raw_conn()
        sleeper("CLIENT", "SETNAME", "sleeper%d" % attempt)
        sleeper.send(encode_command("DEBUG", "SLEEP", "0.5"))

        def sleeping():
            listing = watcher("CLIENT", "LIST").decode()
            return any("name=sleeper%d " % attempt in line and "cmd=debug" in line for line in listing.splitlines())
        assert wait_until(sleeping, timeout=10)
        # A keyed command (on either shard) and a connection-level one.
        other.send(encode_command("GET", "k") + encode_command("PING"))
        readable, _, _ = select.select([sleeper.sock, other.sock], [], [], 10)
        outcomes.append(sleeper.sock in readable)
        assert sleeper.read_reply() == "OK"
        assert other.read_reply() == b"v"
        assert other.read_reply() == "PONG"
        if outcomes[-1]:
            break
    assert outcomes[-1], "another client was answered during DEBUG SLEEP in %d attempts" % len(outcomes)


# ---------------------------------------------------------------- SWAPDB

def test_swapdb(c):
    c("SET", "a", "in0")
    c("SELECT", "1")
    c("SET", "b", "in1")
    c("SET", "c", "in1", "EX", "100")
    assert c("SWAPDB", "0", "1") == "OK"
    # the connection stays on db 1, which now holds the old db 0 data
    assert c("GET", "a") == b"in0"
    assert c("GET", "b") is None
    c("SELECT", "0")
    assert c("GET", "b") == b"in1"
    assert 0 < c("TTL", "c") <= 100
    assert c("DBSIZE") == 2


def test_swapdb_same_and_empty(c):
    c("SET", "a", "1")
    assert c("SWAPDB", "0", "0") == "OK"
    assert c("GET", "a") == b"1"
    assert c("SWAPDB", "0", "9") == "OK"
    assert c("DBSIZE") == 0
    c("SELECT", "9")
    assert c("GET", "a") == b"1"


def test_swapdb_errors(c):
    assert c("SWAPDB", "0", "16") == Err("ERR DB index is out of range")
    assert c("SWAPDB", "-1", "0") == Err("ERR DB index is out of range")
    assert c("SWAPDB", "a", "0") == Err("ERR invalid first DB index")
    assert c("SWAPDB", "0", "b") == Err("ERR invalid second DB index")
    assert c("SWAPDB", "0") == wrong_args("swapdb")


def test_swapdb_visible_to_other_connections(c, raw_conn):
    other = raw_conn()
    other("SET", "k", "zero")
    assert c("SWAPDB", "0", "2") == "OK"
    assert other("GET", "k") is None
    other("SELECT", "2")
    assert other("GET", "k") == b"zero"


# ---------------------------------------------------------------- FUNCTION FLUSH

def test_function_flush(c):
    assert c("FUNCTION", "FLUSH") == "OK"
    assert c("FUNCTION", "FLUSH", "ASYNC") == "OK"
    assert c("FUNCTION", "FLUSH", "SYNC") == "OK"
    assert c("FUNCTION", "FLUSH", "LATER") == Err(
        "ERR FUNCTION FLUSH only supports SYNC|ASYNC option")


# ---------------------------------------------------------------- start-up options

def test_option_databases(server):
    s = server.start(["--databases", "4"])
    cl = s.raw()
    try:
        assert cl("SELECT", "3") == "OK"
        assert cl("SELECT", "4") == Err("ERR DB index is out of range")
        assert cl("CONFIG", "GET", "databases") == [b"databases", b"4"]
        assert cl("SWAPDB", "0", "4") == Err("ERR DB index is out of range")
    finally:
        cl.close()


def test_option_maxclients(server):
    s = server.start(["--maxclients", "2"])
    a = RespClient(s.host, s.port)
    b = RespClient(s.host, s.port)
    extra = None
    try:
        assert a("PING") == "PONG"
        assert b("PING") == "PONG"
        # wait (bounded) until only our two connections are counted
        assert wait_until(
            lambda: info_dict(a("INFO", "clients"))["connected_clients"] == "2", timeout=5)
        assert a("CONFIG", "GET", "maxclients") == [b"maxclients", b"2"]
        extra = RespClient(s.host, s.port)
        assert extra.read_reply() == Err("ERR max number of clients reached")
        assert extra.is_closed()
        d = info_dict(a("INFO", "stats"))
        assert int(d["rejected_connections"]) >= 1
    finally:
        for cl in (a, b, extra):
            if cl is not None:
                cl.close()


def test_option_timeout_closes_idle_clients(server):
    s = server.start(["--timeout", "1"])
    idle = RespClient(s.host, s.port)
    try:
        # One round trip: a pause over a second between two would let the timeout fire.
        assert idle.pipeline([("PING",), ("CONFIG", "GET", "timeout")]) == [
            "PONG", [b"timeout", b"1"]]
        # idle for more than 1 s: the server closes the connection (bounded wait)
        assert idle.is_closed(timeout=15)
    finally:
        idle.close()


def test_default_timeout_keeps_idle_clients(c):
    assert c("CONFIG", "GET", "timeout") == [b"timeout", b"0"]
    assert not c.is_closed(timeout=1.5)
    assert c("PING") == "PONG"


def test_option_port_and_dir(server):
    s = server.start([])
    cl = s.raw()
    try:
        assert cl("CONFIG", "GET", "port") == [b"port", str(s.port).encode()]
        d = cl("CONFIG", "GET", "dir")
        assert d[0] == b"dir"
        assert os.path.realpath(d[1].decode()) == os.path.realpath(s.dir)
    finally:
        cl.close()


def test_debug_populate(c):
    assert c("DEBUG", "POPULATE", "100") == "OK"
    assert c("DBSIZE") == 100
    assert c("GET", "key:7") == b"value:7"
    c("SET", "key:8", "mine")
    assert c("DEBUG", "POPULATE", "100", "key", "10") == "OK"
    assert c("GET", "key:8") == b"mine"
    assert c("DBSIZE") == 100
    assert c("DEBUG", "POPULATE", "3", "p", "10") == "OK"
    assert c("GET", "p:1") == b"value:1\x00\x00\x00"
    assert c("DEBUG", "POPULATE", "2", "q", "3") == "OK"
    assert c("GET", "q:1") == b"val"
    assert isinstance(c("DEBUG", "POPULATE", "-1"), Err)


def info_int(c, section, field):
    return int(info_dict(c("INFO", section))[field])


@pytest.mark.abacus_only("Redis's used_memory counts differently; the bound is Abacus's contract")
def test_maxmemory_eviction_keeps_memory_near_the_limit(c):
    base = info_int(c, "memory", "used_memory")
    limit = base + 32 * 1024 * 1024
    try:
        assert c("CONFIG", "SET", "maxmemory", str(limit), "maxmemory-policy", "allkeys-lru") == "OK"
        value = "x" * 1000
        for start in range(0, 100000, 1000):
            cmds = b"".join(encode_command("SET", "k:%d" % i, value) for i in range(start, start + 1000))
            c.send(cmds)
            for _ in range(1000):
                assert c.read_reply() == "OK"
        used = info_int(c, "memory", "used_memory")
        assert used <= limit * 1.05, (used, limit)
        assert info_int(c, "stats", "evicted_keys") > 0
        assert c("DBSIZE") < 100000
        assert c("GET", "k:99999") == value.encode()
    finally:
        c("CONFIG", "SET", "maxmemory", "0", "maxmemory-policy", "noeviction")


def test_maxmemory_noeviction_refuses_writes(c):
    try:
        assert c("CONFIG", "SET", "maxmemory", "1", "maxmemory-policy", "noeviction") == "OK"
        assert c("SET", "a", "1") == Err("OOM command not allowed when used memory > 'maxmemory'.")
        # reads and deletes still work
        assert c("GET", "a") is None
        assert c("DEL", "a") == 0
    finally:
        c("CONFIG", "SET", "maxmemory", "0")
    assert c("SET", "a", "1") == "OK"


def test_maxmemory_volatile_policy_only_evicts_keys_with_ttl(c):
    c("SET", "persistent", "1")
    try:
        assert c("CONFIG", "SET", "maxmemory", "1", "maxmemory-policy", "volatile-lru") == "OK"
        # nothing volatile to evict: the write is refused
        assert c("SET", "b", "1") == Err("OOM command not allowed when used memory > 'maxmemory'.")
        assert c("GET", "persistent") == b"1"
    finally:
        c("CONFIG", "SET", "maxmemory", "0", "maxmemory-policy", "noeviction")
