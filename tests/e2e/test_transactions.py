"""Transactions: MULTI EXEC DISCARD WATCH UNWATCH."""

import pytest
import redis

from helpers import Err, encode_command

EXECABORT = Err("EXECABORT Transaction discarded because of previous errors.")


def wrong_args(cmd):
    return Err("ERR wrong number of arguments for '%s' command" % cmd)


def test_multi_exec_basic(c):
    assert c("MULTI") == "OK"
    assert c("SET", "a", "1") == "QUEUED"
    assert c("INCR", "a") == "QUEUED"
    assert c("GET", "a") == "QUEUED"
    assert c("MGET", "a", "b") == "QUEUED"
    assert c("EXEC") == ["OK", 2, b"2", [b"2", None]]
    assert c("GET", "a") == b"2"


def test_commands_not_executed_before_exec(c, raw_conn):
    other = raw_conn()
    assert c("MULTI") == "OK"
    assert c("SET", "a", "1") == "QUEUED"
    assert other("GET", "a") is None
    assert c("EXEC") == ["OK"]
    assert other("GET", "a") == b"1"


def test_exec_empty_transaction(c):
    assert c("MULTI") == "OK"
    assert c("EXEC") == []


def test_exec_without_multi(c):
    assert c("EXEC") == Err("ERR EXEC without MULTI")


def test_discard(c):
    assert c("MULTI") == "OK"
    assert c("SET", "a", "1") == "QUEUED"
    assert c("DISCARD") == "OK"
    assert c("GET", "a") is None
    assert c("EXEC") == Err("ERR EXEC without MULTI")


def test_discard_without_multi(c):
    assert c("DISCARD") == Err("ERR DISCARD without MULTI")


def test_nested_multi(c):
    assert c("MULTI") == "OK"
    assert c("SET", "a", "1") == "QUEUED"
    assert c("MULTI") == Err("ERR MULTI calls can not be nested")
    # the nested MULTI does not abort the transaction
    assert c("EXEC") == ["OK"]


def test_watch_inside_multi(c):
    assert c("MULTI") == "OK"
    assert c("WATCH", "a") == Err("ERR WATCH inside MULTI is not allowed")
    assert c("SET", "a", "1") == "QUEUED"
    assert c("EXEC") == ["OK"]


def test_unknown_command_aborts(c):
    assert c("MULTI") == "OK"
    assert c("SET", "a", "1") == "QUEUED"
    assert c("NOSUCHCOMMAND", "x") == Err(
        "ERR unknown command 'NOSUCHCOMMAND', with args beginning with: 'x' ")
    assert c("SET", "b", "1") == "QUEUED"
    assert c("EXEC") == EXECABORT
    assert c("EXISTS", "a", "b") == 0
    # the connection is out of the transaction
    assert c("EXEC") == Err("ERR EXEC without MULTI")


def test_wrong_arity_aborts(c):
    assert c("MULTI") == "OK"
    assert c("SET", "a", "1") == "QUEUED"
    assert c("GET") == wrong_args("get")
    assert c("EXEC") == EXECABORT
    assert c("EXISTS", "a") == 0


def test_discard_after_queue_error(c):
    assert c("MULTI") == "OK"
    assert c("GET") == wrong_args("get")
    assert c("DISCARD") == "OK"
    assert c("MULTI") == "OK"
    assert c("SET", "a", "1") == "QUEUED"
    assert c("EXEC") == ["OK"]


def test_runtime_errors_are_per_command(c):
    c("SET", "s", "abc")
    assert c("MULTI") == "OK"
    assert c("SET", "a", "1") == "QUEUED"
    assert c("INCR", "s") == "QUEUED"
    assert c("SET", "k", "v", "EX", "0") == "QUEUED"
    assert c("SET", "k", "v", "NX", "XX") == "QUEUED"
    assert c("RENAME", "nokey", "x") == "QUEUED"
    assert c("INCR", "a") == "QUEUED"
    assert c("EXEC") == [
        "OK",
        Err("ERR value is not an integer or out of range"),
        Err("ERR invalid expire time in 'set' command"),
        Err("ERR syntax error"),
        Err("ERR no such key"),
        2,
    ]
    assert c("GET", "a") == b"2"


def test_exec_redis_py_runtime_error(r):
    r.set("s", "abc")
    p = r.pipeline(transaction=True)
    p.set("a", 1)
    p.incr("s")
    p.incr("a")
    res = p.execute(raise_on_error=False)
    assert res[0] is True
    assert isinstance(res[1], redis.ResponseError)
    assert res[2] == 2


def test_exec_abort_redis_py(r):
    p = r.pipeline(transaction=True)
    p.set("a", 1)
    p.execute_command("NOSUCHCOMMAND")
    with pytest.raises(redis.ResponseError):
        p.execute()
    assert r.exists("a") == 0


def test_select_inside_multi(c):
    assert c("MULTI") == "OK"
    assert c("SELECT", "2") == "QUEUED"
    assert c("SET", "a", "db2") == "QUEUED"
    assert c("EXEC") == ["OK", "OK"]
    assert c("GET", "a") == b"db2"
    c("SELECT", "0")
    assert c("GET", "a") is None


# ---------------------------------------------------------------- WATCH

def test_watch_no_change(c):
    c("SET", "a", "1")
    assert c("WATCH", "a") == "OK"
    assert c("MULTI") == "OK"
    assert c("INCR", "a") == "QUEUED"
    assert c("EXEC") == [2]


def test_watch_modified_by_other_client(c, raw_conn):
    other = raw_conn()
    c("SET", "a", "1")
    assert c("WATCH", "a") == "OK"
    assert other("SET", "a", "2") == "OK"
    assert c("MULTI") == "OK"
    assert c("SET", "a", "3") == "QUEUED"
    c.send(encode_command("EXEC"))
    assert c._readline() == b"*-1"
    assert c("GET", "a") == b"2"


def test_watch_abort_resp3_null(c, raw_conn):
    c("HELLO", "3")
    c("WATCH", "a")
    raw_conn()("SET", "a", "x")
    c("MULTI")
    c("GET", "a")
    c.send(encode_command("EXEC"))
    assert c._readline() == b"_"


def test_watch_modified_after_multi(c, raw_conn):
    other = raw_conn()
    c("WATCH", "a")
    c("MULTI")
    c("SET", "a", "mine")
    other("SET", "a", "theirs")
    assert c("EXEC") is None
    assert c("GET", "a") == b"theirs"


def test_watch_same_value_still_aborts(c, raw_conn):
    c("SET", "a", "1")
    c("WATCH", "a")
    raw_conn()("SET", "a", "1")
    c("MULTI")
    c("GET", "a")
    assert c("EXEC") is None


def test_watch_missing_key_created(c, raw_conn):
    c("WATCH", "newkey")
    raw_conn()("SET", "newkey", "x")
    c("MULTI")
    c("SET", "newkey", "y")
    assert c("EXEC") is None
    assert c("GET", "newkey") == b"x"


def test_watch_key_deleted(c, raw_conn):
    c("SET", "a", "1")
    c("WATCH", "a")
    assert raw_conn()("DEL", "a") == 1
    c("MULTI")
    c("SET", "b", "1")
    assert c("EXEC") is None
    assert c("EXISTS", "b") == 0


def test_watch_expire_change_aborts(c, raw_conn):
    c("SET", "a", "1")
    c("WATCH", "a")
    assert raw_conn()("EXPIRE", "a", "100") == 1
    c("MULTI")
    c("GET", "a")
    assert c("EXEC") is None


def test_watch_modified_by_self_before_multi(c):
    c("SET", "a", "1")
    c("WATCH", "a")
    c("SET", "a", "2")
    c("MULTI")
    c("GET", "a")
    assert c("EXEC") is None


def test_watch_read_does_not_abort(c, raw_conn):
    c("SET", "a", "1")
    c("WATCH", "a")
    other = raw_conn()
    other("GET", "a")
    other("EXISTS", "a")
    other("TTL", "a")
    other("SET", "unrelated", "1")
    c("MULTI")
    c("GET", "a")
    assert c("EXEC") == [b"1"]


def test_watch_multiple_keys(c, raw_conn):
    c("WATCH", "a", "b", "c")
    raw_conn()("SET", "c", "1")
    c("MULTI")
    c("SET", "a", "1")
    assert c("EXEC") is None


def test_watch_other_db_not_affected(c, raw_conn):
    c("WATCH", "a")
    other = raw_conn()
    other("SELECT", "1")
    other("SET", "a", "1")
    c("MULTI")
    c("SET", "a", "0")
    assert c("EXEC") == ["OK"]


def test_watch_flushall_aborts(c, raw_conn):
    c("SET", "a", "1")
    c("WATCH", "a")
    raw_conn()("FLUSHALL")
    c("MULTI")
    c("SET", "x", "1")
    assert c("EXEC") is None


def test_watch_flushdb_aborts(c, raw_conn):
    c("SET", "a", "1")
    c("WATCH", "a")
    raw_conn()("FLUSHDB")
    c("MULTI")
    c("SET", "x", "1")
    assert c("EXEC") is None


def test_watch_rename_aborts(c, raw_conn):
    c("SET", "src", "1")
    c("WATCH", "dst")
    raw_conn()("RENAME", "src", "dst")
    c("MULTI")
    c("GET", "dst")
    assert c("EXEC") is None


def test_unwatch(c, raw_conn):
    c("WATCH", "a")
    assert c("UNWATCH") == "OK"
    raw_conn()("SET", "a", "1")
    c("MULTI")
    c("INCR", "a")
    assert c("EXEC") == [2]


def test_exec_clears_watch(c, raw_conn):
    c("WATCH", "a")
    c("MULTI")
    c("SET", "a", "1")
    assert c("EXEC") == ["OK"]
    raw_conn()("SET", "a", "2")
    c("MULTI")
    c("GET", "a")
    assert c("EXEC") == [b"2"]


def test_discard_clears_watch(c, raw_conn):
    c("WATCH", "a")
    c("MULTI")
    c("DISCARD")
    raw_conn()("SET", "a", "2")
    c("MULTI")
    c("GET", "a")
    assert c("EXEC") == [b"2"]


def test_aborted_exec_clears_watch(c, raw_conn):
    other = raw_conn()
    c("WATCH", "a")
    other("SET", "a", "1")
    c("MULTI")
    assert c("EXEC") is None
    other("SET", "a", "2")
    c("MULTI")
    c("GET", "a")
    assert c("EXEC") == [b"2"]


def test_watch_arity(c):
    assert c("WATCH") == wrong_args("watch")
    assert c("UNWATCH") == "OK"


def test_watch_redis_py(r, server):
    other = server.client()
    try:
        r.set("cnt", 0)
        with r.pipeline() as p:
            p.watch("cnt")
            other.incr("cnt")
            p.multi()
            p.incr("cnt")
            with pytest.raises(redis.WatchError):
                p.execute()
        assert r.get("cnt") == b"1"
    finally:
        other.close()


def test_multi_arity(c):
    assert c("MULTI", "x") == wrong_args("multi")
    assert c("DISCARD", "x") == wrong_args("discard")
    # rejected EXEC calls are reported with an EXECABORT prefix
    assert c("EXEC", "x") == Err(
        "EXECABORT Transaction discarded because of: "
        "wrong number of arguments for 'exec' command")


def test_exec_arity_inside_multi_discards(c):
    assert c("MULTI") == "OK"
    assert c("SET", "a", "1") == "QUEUED"
    assert c("EXEC", "x") == Err(
        "EXECABORT Transaction discarded because of: "
        "wrong number of arguments for 'exec' command")
    assert c("EXEC") == Err("ERR EXEC without MULTI")
    assert c("EXISTS", "a") == 0


# ------------------------------------------- found by test_differential.py

def test_unwatch_inside_multi_is_queued(c, raw_conn):
    c("SET", "a", "1")
    assert c("WATCH", "a") == "OK"
    assert c("MULTI") == "OK"
    assert c("UNWATCH") == "QUEUED"  # not run at once: the WATCH still holds
    raw_conn()("SET", "a", "2")
    assert c("GET", "a") == "QUEUED"
    assert c("EXEC") is None


def test_malformed_exec_ends_watch(c, raw_conn):
    c("SET", "a", "1")
    c("WATCH", "a")
    raw_conn()("SET", "a", "2")
    c("MULTI")
    assert c("EXEC", "x") == Err("EXECABORT Transaction discarded because of: wrong number "
                                 "of arguments for 'exec' command")
    # the WATCH ended with it, so a new transaction runs
    assert c("MULTI") == "OK"
    assert c("GET", "a") == "QUEUED"
    assert c("EXEC") == [b"2"]


def test_watch_of_expired_key_then_lazy_expiry_runs(c, raw_conn):
    c("SET", "a", "1", "PXAT", "1")  # already expired
    c("WATCH", "a")
    assert raw_conn()("GET", "a") is None  # reclaims it: no logical change
    c("MULTI")
    c("SET", "x", "1")
    assert c("EXEC") == ["OK"]


def test_watch_flushdb_or_swapdb_without_the_key_runs(c, raw_conn):
    other = raw_conn()
    c("SET", "b", "1")
    c("WATCH", "a")
    other("FLUSHDB")
    other("SELECT", "1")
    other("SET", "c", "1")
    other("SWAPDB", "0", "1")  # "a" is in neither database
    c("MULTI")
    c("SET", "x", "1")
    assert c("EXEC") == ["OK"]
    c("WATCH", "c")
    other("SWAPDB", "0", "1")  # "c" was in db 0: changed
    c("MULTI")
    c("SET", "x", "1")
    assert c("EXEC") is None


def test_save_and_shutdown_refused_inside_multi(c):
    # Redis 7.0's no-multi commands: refused when sent, and EXEC then aborts. SHUTDOWN inside
    # MULTI must not stop the server.
    for cmd in (("SAVE",), ("SHUTDOWN",), ("SHUTDOWN", "NOSAVE")):
        assert c("MULTI") == "OK"
        assert c("SET", "a", "1") == "QUEUED"
        assert c(*cmd) == Err("ERR Command not allowed inside a transaction")
        assert c("EXEC") == EXECABORT
    assert c("PING") == "PONG"
    assert c("GET", "a") is None


def _persistence(c):
    return dict(line.split(":", 1) for line in c("INFO", "persistence").decode().split("\r\n")
                if ":" in line)


def _wait_saved(c, saves_before=None):
    """Until no save runs and, given `saves_before` (INFO's rdb_saves), one more has finished
    (30 s at most)."""
    import time
    deadline = time.time() + 30
    while time.time() < deadline:
        p = _persistence(c)
        if (p["rdb_bgsave_in_progress"] == "0" and p["aof_rewrite_in_progress"] == "0"
                and (saves_before is None or int(p["rdb_saves"]) > saves_before)):
            return
        time.sleep(0.05)
    raise AssertionError("no background save after the transaction within 30 s: %r" % p)


def test_bgsave_inside_multi_is_scheduled_by_exec(c, raw_conn):
    # Not no-multi in Redis: queued, and EXEC schedules it (a save starts after the
    # transaction; Abacus's EXEC holds the shards' locks, which the save must not wait for).
    saves = int(_persistence(c)["rdb_saves"])
    assert c("MULTI") == "OK"
    assert c("SET", "a", "1") == "QUEUED"
    assert c("BGSAVE") == "QUEUED"
    assert c("BGSAVE", "x") == "QUEUED"
    assert c("EXEC") == ["OK", "Background saving scheduled", Err("ERR syntax error")]
    assert raw_conn()("SET", "b", "2") == "OK"
    _wait_saved(c, saves)
    assert c("MULTI") == "OK"
    assert c("BGREWRITEAOF") == "QUEUED"
    assert c("INCR", "a") == "QUEUED"
    assert c("EXEC") == ["Background append only file rewriting scheduled", 2]
    # (With appendonly no, Redis's rewrite is not an RDB save: only wait for it to end.)
    _wait_saved(c)


def test_watch_retry_loops_under_contention_are_exact(server, r):
    """Many clients increment few keys with WATCH/GET/MULTI/SET/EXEC retry loops (an INCR
    built from a read and a write): WATCH must abort every transaction whose key changed
    since its GET, so no increment is lost, and each successful EXEC counts once. Counts,
    not time, bound the run."""
    import threading
    from helpers import RespClient
    clients, keys, per_client = 12, 3, 60
    names = ["cnt:%d" % i for i in range(keys)]
    errors, retries = [], [0]

    def run(n):
        try:
            c = RespClient(server.host, server.port)
            for j in range(per_client):
                key = names[(n + j) % keys]
                while True:
                    assert c("WATCH", key) == "OK"
                    value = int(c("GET", key) or 0)
                    replies = c.pipeline([("MULTI",), ("SET", key, value + 1), ("EXEC",)])
                    assert replies[:2] == ["OK", "QUEUED"], replies
                    if replies[2] is not None:
                        assert replies[2] == ["OK"]
                        break
                    retries[0] += 1
            c.close()
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    total = [int(r.get(k) or 0) for k in names]
    assert sum(total) == clients * per_client, (total, retries[0])
    assert total == [clients * per_client // keys] * keys


def test_pipelined_watch_then_own_write_aborts(c):
    """WATCH k, then a write of k in the same pipeline, by the same client: the write
    comes after the watch, so EXEC aborts (as Redis), whichever shard k lives on, even when
    the registration and the write travel to that shard together."""
    from helpers import key_on
    for shard in (0, 1):
        k, other = key_on(shard, "pw"), key_on(1 - shard, "pw")
        for write in (("SET", k, "v"), ("MSET", k, "v", other, "w")):
            replies = c.pipeline([("WATCH", k), write, ("SET", other, "x"), ("MULTI",), ("PING",), ("EXEC",)])
            assert replies == ["OK", "OK", "OK", "OK", "QUEUED", None], (k, write, replies)
        # Reads and writes of other keys leave it alone.
        replies = c.pipeline([("WATCH", k), ("GET", k), ("SET", other, "y"), ("MULTI",), ("PING",), ("EXEC",)])
        assert replies == ["OK", b"v", "OK", "OK", "QUEUED", ["PONG"]], (k, replies)
