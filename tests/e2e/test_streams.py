"""The stream family through redis-py: XADD, XRANGE, XREVRANGE, XLEN, XDEL, XTRIM, XSETID,
XREAD, XREADGROUP, XGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM, XINFO, and the generic
commands on streams (TYPE, OBJECT ENCODING, COPY, RENAME, DEL, expiry, SCAN TYPE), with
Redis 7.0's replies and error texts.

Every test runs against Redis too (`--target redis`); IDs are explicit wherever a reply is
compared, and idle times are only compared as bounds. Blocking reads are in
test_streams_blocking.py, persistence in test_persistence.py, the seeded comparison with a
real Redis in test_differential_streams.py.
"""

import time

import pytest
import redis

from helpers import Err, key_on


def err(r, *args):
    """The error text a command gets (redis-py drops the `ERR ` prefix; others stay)."""
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command(*args)
    return str(e.value)


def ids(entries):
    return [e[0] for e in entries]


# ----- XADD -----

def test_xadd_ids_auto_explicit_and_partial(r):
    now = int(time.time() * 1000)
    auto = r.xadd("s", {"a": 1})
    ms, seq = map(int, auto.split(b"-"))
    assert abs(ms - now) < 60000 and seq == 0
    assert r.execute_command("XADD", "t", "5-*", "a", "1") == b"5-0"
    assert r.execute_command("XADD", "t", "5-*", "a", "1") == b"5-1"
    assert r.execute_command("XADD", "t", "6", "a", "1") == b"6-0"
    assert r.execute_command("XADD", "t", "6-5", "a", "1") == b"6-5"
    assert r.execute_command("XADD", "t", "7-*", "a", "1") == b"7-0"
    assert r.execute_command("XADD", "u", "0-*", "a", "1") == b"0-1"
    assert r.execute_command("XADD", "v", "18446744073709551615-18446744073709551614", "a", "1") == b"18446744073709551615-18446744073709551614"
    assert r.execute_command("XADD", "v", "18446744073709551615-*", "a", "1") == b"18446744073709551615-18446744073709551615"
    assert err(r, "XADD", "v", "*", "a", "1") == "The stream has exhausted the last possible ID, unable to add more items"


def test_xadd_errors(r):
    r.xadd("s", {"a": 1}, id="5-5")
    assert err(r, "XADD", "s", "5-5", "a", "1") == "The ID specified in XADD is equal or smaller than the target stream top item"
    assert err(r, "XADD", "s", "4", "a", "1") == "The ID specified in XADD is equal or smaller than the target stream top item"
    assert err(r, "XADD", "s", "0-0", "a", "1") == "The ID specified in XADD must be greater than 0-0"
    assert err(r, "XADD", "new", "0", "a", "1") == "The ID specified in XADD must be greater than 0-0"
    for bad in ["abc", "-", "+", "1-2-3", "-5", "5-", "18446744073709551616", "1-x"]:
        assert err(r, "XADD", "s", bad, "a", "1") == "Invalid stream ID specified as stream command argument", bad
    assert err(r, "XADD", "s", "9-1", "a") == "wrong number of arguments for 'xadd' command"
    assert err(r, "XADD", "s", "9-1", "a", "1", "b") == "wrong number of arguments for 'xadd' command"
    assert err(r, "XADD", "s", "MAXLEN", "5", "*", "a") == "wrong number of arguments for 'xadd' command"
    assert err(r, "XADD", "s", "MAXLEN", "-1", "*", "a", "1") == "The MAXLEN argument must be >= 0."
    assert err(r, "XADD", "s", "MAXLEN", "x", "*", "a", "1") == "value is not an integer or out of range"
    assert err(r, "XADD", "s", "MAXLEN", "1", "MINID", "1", "*", "a", "1") == "syntax error, MAXLEN and MINID options at the same time are not compatible"
    assert err(r, "XADD", "s", "MAXLEN", "5", "LIMIT", "10", "*", "a", "1") == "syntax error, LIMIT cannot be used without the special ~ option"
    assert err(r, "XADD", "s", "LIMIT", "10", "*", "a", "1") == "syntax error, LIMIT cannot be used without specifying a trimming strategy"
    assert err(r, "XADD", "s", "LIMIT", "-1", "MAXLEN", "~", "5", "*", "a", "1") == "The LIMIT argument must be >= 0."
    assert err(r, "XADD", "s", "MINID", "-", "*", "a", "1") == "Invalid stream ID specified as stream command argument"
    r.set("str", "x")
    assert err(r, "XADD", "str", "*", "a", "1").startswith("WRONGTYPE")
    assert r.exists("new") == 0


def test_xadd_nomkstream_and_trimming(r):
    assert r.execute_command("XADD", "s", "NOMKSTREAM", "*", "a", "1") is None
    assert r.exists("s") == 0
    for i in range(1, 11):
        r.xadd("s", {"f": i}, id="%d-0" % i)
    assert r.execute_command("XADD", "s", "NOMKSTREAM", "MAXLEN", "=", "5", "11-0", "f", "11") == b"11-0"
    assert ids(r.xrange("s")) == [b"%d-0" % i for i in range(7, 12)]
    assert r.execute_command("XADD", "s", "MINID", "9", "12-0", "f", "12") == b"12-0"
    assert ids(r.xrange("s")) == [b"%d-0" % i for i in range(9, 13)]
    # Approximate trimming removes whole nodes only: 100 entries per node by default.
    for i in range(100, 350):
        r.xadd("big", {"f": i}, id="%d-0" % i)
    r.execute_command("XADD", "big", "MAXLEN", "~", "120", "400-0", "f", "x")
    assert r.xlen("big") == 151
    r.execute_command("XADD", "big", "MAXLEN", "~", "10", "LIMIT", "0", "401-0", "f", "x")
    assert r.xlen("big") == 52


def test_xadd_same_and_repeated_fields(c):
    c.execute("XADD", "s", "1-1", "a", "1", "a", "2", "b", "")
    c.execute("XADD", "s", "1-2", "a", "x", "a", "y", "b", "z")
    c.execute("XADD", "s", "1-3", "c", "-5", "d", "007", "e", "9223372036854775807")
    assert c.execute("XRANGE", "s", "-", "+") == [
        [b"1-1", [b"a", b"1", b"a", b"2", b"b", b""]],
        [b"1-2", [b"a", b"x", b"a", b"y", b"b", b"z"]],
        [b"1-3", [b"c", b"-5", b"d", b"007", b"e", b"9223372036854775807"]],
    ]


def test_values_of_every_shape_round_trip(r):
    values = [b"", b"0", b"31", b"32", b"-1", b"-0", b"007", b"+1", b" 1", b"1.5", b"9223372036854775807",
              b"-9223372036854775808", b"9223372036854775808", b"x" * 63, b"y" * 64, b"z" * 5000,
              bytes(range(256)), b"google", b"google"]
    for i, v in enumerate(values):
        r.xadd("s", {b"f%d" % (i % 3): v, b"v": v}, id="%d-0" % (i + 1))
    got = r.xrange("s")
    assert [e[1] for e in got] == [{b"f%d" % (i % 3): v, b"v": v} for i, v in enumerate(values)]


# ----- XRANGE / XREVRANGE / XLEN / XDEL -----

@pytest.fixture
def three(r):
    r.xadd("s", {"a": 1}, id="1-1")
    r.xadd("s", {"b": 2}, id="2-1")
    r.xadd("s", {"c": 3}, id="3-1")
    return r


def test_xrange_bounds(three):
    r = three
    assert ids(r.xrange("s")) == [b"1-1", b"2-1", b"3-1"]
    assert ids(r.xrange("s", "(1-1", "+")) == [b"2-1", b"3-1"]
    assert ids(r.xrange("s", "2", "2")) == [b"2-1"]
    assert ids(r.xrange("s", "2", "(3")) == [b"2-1", b"3-1"]
    assert ids(r.xrange("s", "1", "1-1")) == [b"1-1"]
    assert r.xrange("s", "3", "1") == []
    assert ids(r.xrange("s", count=2)) == [b"1-1", b"2-1"]
    assert ids(r.xrevrange("s")) == [b"3-1", b"2-1", b"1-1"]
    assert ids(r.xrevrange("s", "(3-1", "-")) == [b"2-1", b"1-1"]
    assert ids(r.xrevrange("s", count=1)) == [b"3-1"]
    assert r.execute_command("XRANGE", "s", "-", "+", "COUNT", "0") is None
    assert r.execute_command("XRANGE", "s", "-", "+", "COUNT", "-1") is None
    assert r.execute_command("XRANGE", "nokey", "-", "+", "COUNT", "0") == []
    assert r.xrange("nokey") == []


def test_xrange_errors(three):
    r = three
    assert err(r, "XRANGE", "s", "(", "+") == "Invalid stream ID specified as stream command argument"
    assert err(r, "XRANGE", "s", "(-", "+") == "Invalid stream ID specified as stream command argument"
    assert err(r, "XRANGE", "s", "(18446744073709551615-18446744073709551615", "+") == "invalid start ID for the interval"
    assert err(r, "XRANGE", "s", "-", "(0-0") == "invalid end ID for the interval"
    assert err(r, "XRANGE", "s", "-", "+", "COUNT") == "syntax error"
    assert err(r, "XRANGE", "s", "-", "+", "foo") == "syntax error"
    assert err(r, "XRANGE", "s", "-", "+", "COUNT", "x") == "value is not an integer or out of range"
    assert err(r, "XRANGE", "s", "2-*", "+") == "Invalid stream ID specified as stream command argument"
    assert err(r, "XRANGE", "nokey", "x", "+") == "Invalid stream ID specified as stream command argument"
    r.set("str", "x")
    assert err(r, "XRANGE", "str", "-", "+").startswith("WRONGTYPE")
    assert err(r, "XLEN", "str").startswith("WRONGTYPE")


def test_xlen_xdel(three):
    r = three
    assert r.xlen("s") == 3 and r.xlen("nokey") == 0
    assert r.xdel("s", "2-1", "9-9") == 1
    assert r.xdel("s", "2-1") == 0
    assert r.xlen("s") == 2
    assert ids(r.xrange("s")) == [b"1-1", b"3-1"]
    assert err(r, "XDEL", "s", "x") == "Invalid stream ID specified as stream command argument"
    assert r.execute_command("XDEL", "nokey", "x") == 0
    assert r.xdel("s", "1-1", "3-1") == 2
    # A stream that lost every entry stays, with its last ID.
    assert r.exists("s") == 1 and r.type("s") == b"stream" and r.xlen("s") == 0
    info = r.xinfo_stream("s")
    assert info["last-generated-id"] == b"3-1" and info["max-deleted-entry-id"] == b"3-1"
    assert info["entries-added"] == 3 and info["recorded-first-entry-id"] == b"0-0"


# ----- XTRIM / XSETID -----

def test_xtrim(r):
    for i in range(1, 11):
        r.xadd("s", {"f": i}, id="%d-0" % i)
    assert r.execute_command("XTRIM", "s", "MAXLEN", "8") == 2
    assert r.execute_command("XTRIM", "s", "MINID", "=", "5") == 2
    assert ids(r.xrange("s"))[0] == b"5-0"
    assert r.execute_command("XTRIM", "s", "MAXLEN", "~", "0") == 6
    assert r.xlen("s") == 0 and r.exists("s") == 1
    assert r.execute_command("XTRIM", "nokey", "MAXLEN", "0") == 0
    assert err(r, "XTRIM", "s", "LIMIT", "5") == "syntax error, LIMIT cannot be used without specifying a trimming strategy"
    assert err(r, "XTRIM", "s", "MAXLEN", "1", "foo") == "syntax error"
    assert err(r, "XTRIM", "s", "MAXLEN", "0", "NOMKSTREAM") == "syntax error"
    assert err(r, "XTRIM", "s", "MAXLEN") == "wrong number of arguments for 'xtrim' command"
    assert err(r, "XTRIM", "s", "FOO", "1") == "syntax error"
    assert r.execute_command("XTRIM", "s", "MAXLEN", "~", "0", "LIMIT", "0") == 0


def test_xsetid(r):
    assert err(r, "XSETID", "nokey", "1-1") == "no such key"
    r.xadd("s", {"a": 1}, id="5-5")
    assert err(r, "XSETID", "s", "4-4") == "The ID specified in XSETID is smaller than the target stream top item"
    assert err(r, "XSETID", "s", "5-5", "ENTRIESADDED", "0") == "The entries_added specified in XSETID is smaller than the target stream length"
    assert err(r, "XSETID", "s", "5-5", "ENTRIESADDED", "-1") == "entries_added must be positive"
    assert err(r, "XSETID", "s", "5-5", "MAXDELETEDID", "6-6") == "The ID specified in XSETID is smaller than the provided max_deleted_entry_id"
    assert err(r, "XSETID", "s", "5-5", "FOO") == "syntax error"
    assert r.execute_command("XSETID", "s", "9-9", "ENTRIESADDED", "7", "MAXDELETEDID", "5-4") == b"OK"
    info = r.xinfo_stream("s")
    assert (info["last-generated-id"], info["entries-added"], info["max-deleted-entry-id"]) == (b"9-9", 7, b"5-4")
    assert err(r, "XADD", "s", "9-9", "a", "1") == "The ID specified in XADD is equal or smaller than the target stream top item"


# ----- generic commands -----

def test_type_encoding_copy_rename_del_expire(r):
    r.xadd("s", {"a": 1}, id="1-1")
    r.xgroup_create("s", "g", id="0")
    assert r.type("s") == b"stream"
    assert r.object("encoding", "s") == b"stream"
    assert r.copy("s", "c") is True
    r.xadd("s", {"b": 2}, id="2-1")
    assert ids(r.xrange("c")) == [b"1-1"], "COPY is a deep copy"
    assert r.xinfo_groups("c")[0]["name"] == b"g"
    r.rename("c", "d")
    assert r.exists("c") == 0 and ids(r.xrange("d")) == [b"1-1"]
    assert r.pexpire("d", 100)
    time.sleep(0.3)
    assert r.exists("d") == 0
    assert r.delete("s") == 1
    r.xadd("s1", {"a": 1})
    r.set("str", "x")
    cursor, keys = r.scan(0, _type="stream", count=1000)
    assert keys == [b"s1"]


def test_wrongtype_against_every_stream_command(r):
    r.set("str", "x")
    for args in (["XADD", "str", "*", "a", "1"], ["XRANGE", "str", "-", "+"], ["XREVRANGE", "str", "+", "-"],
                 ["XLEN", "str"], ["XDEL", "str", "1-1"], ["XTRIM", "str", "MAXLEN", "1"], ["XSETID", "str", "1-1"],
                 ["XREAD", "STREAMS", "str", "0"], ["XGROUP", "CREATE", "str", "g", "$"], ["XACK", "str", "g", "1-1"],
                 ["XPENDING", "str", "g"], ["XCLAIM", "str", "g", "c", "0", "1-1"], ["XAUTOCLAIM", "str", "g", "c", "0", "0"],
                 ["XINFO", "STREAM", "str"], ["XINFO", "GROUPS", "str"]):
        assert err(r, *args).startswith("WRONGTYPE"), args
    r.xadd("s", {"a": 1})
    for args in (["GET", "s"], ["LPUSH", "s", "x"], ["SADD", "s", "x"], ["HSET", "s", "f", "v"], ["ZADD", "s", "1", "m"]):
        assert err(r, *args).startswith("WRONGTYPE"), args


# ----- XREAD (non-blocking) -----

def test_xread(three, c):
    r = three
    r.xadd("t", {"x": 1}, id="5-0")
    assert r.xread({"s": "0", "t": "0"}, count=2) == [[b"s", [(b"1-1", {b"a": b"1"}), (b"2-1", {b"b": b"2"})]], [b"t", [(b"5-0", {b"x": b"1"})]]]
    assert r.xread({"s": "3-1"}) == []
    assert c.execute("XREAD", "STREAMS", "s", "$") is None
    assert r.execute_command("XREAD", "COUNT", "-5", "STREAMS", "s", "nokey", "2", "0") == [[b"s", [(b"2-1", {b"b": b"2"}), (b"3-1", {b"c": b"3"})]]]
    assert err(r, "XREAD", "STREAMS", "s", ">") == "The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option."
    assert err(r, "XREAD", "GROUP", "g", "c", "STREAMS", "s", "0") == "The GROUP option is only supported by XREADGROUP. You called XREAD instead."
    assert err(r, "XREAD", "NOACK", "STREAMS", "s", "0") == "The NOACK option is only supported by XREADGROUP. You called XREAD instead."
    assert err(r, "XREAD", "STREAMS", "s", "t", "0") == "Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."
    assert err(r, "XREAD", "FOO", "STREAMS", "s", "0") == "syntax error"
    assert err(r, "XREAD", "COUNT", "1", "x", "y") == "syntax error"
    assert err(r, "XREAD", "STREAMS", "s", "x") == "Invalid stream ID specified as stream command argument"
    assert err(r, "XREAD", "BLOCK", "1.5", "STREAMS", "s", "0") == "timeout is not an integer or out of range"
    assert err(r, "XREAD", "BLOCK", "-1", "STREAMS", "s", "0") == "timeout is negative"
    assert err(r, "XREAD", "COUNT", "x", "STREAMS", "s", "0") == "value is not an integer or out of range"


def test_xread_over_two_shards(r):
    a, b = key_on(0, "xr"), key_on(1, "xr")
    r.xadd(a, {"f": "a"}, id="1-0")
    r.xadd(b, {"f": "b"}, id="2-0")
    got = r.xread({a: "0", b: "0"})
    assert got == [[a.encode(), [(b"1-0", {b"f": b"a"})]], [b.encode(), [(b"2-0", {b"f": b"b"})]]]


def test_xread_resp3_is_a_map(server, r):
    r.xadd("s", {"a": 1}, id="1-1")
    c = server.raw()
    c.execute("HELLO", "3")
    assert c.execute("XREAD", "STREAMS", "s", "0") == {b"s": [[b"1-1", [b"a", b"1"]]]}
    assert c.execute("XREAD", "STREAMS", "s", "1-1") is None
    c.close()


# ----- consumer groups -----

@pytest.fixture
def grouped(three):
    three.xgroup_create("s", "g", id="0")
    return three


def test_xgroup_create_setid_destroy(r):
    assert err(r, "XGROUP", "CREATE", "s", "g", "$").startswith("The XGROUP subcommand requires the key to exist.")
    assert r.xgroup_create("s", "g", id="$", mkstream=True) is True
    assert err(r, "XGROUP", "CREATE", "s", "g", "$") == "BUSYGROUP Consumer Group name already exists"
    assert err(r, "XGROUP", "CREATE", "s", "g2", "-") == "Invalid stream ID specified as stream command argument"
    assert r.execute_command("XGROUP", "CREATE", "s", "g3", "1", "ENTRIESREAD", "3") == b"OK"
    assert err(r, "XGROUP", "CREATE", "s", "g4", "1", "MKSTREAM", "ENTRIESREAD", "3", "FOO") == "unknown subcommand or wrong number of arguments for 'CREATE'. Try XGROUP HELP."
    assert err(r, "XGROUP", "setid", "s", "g", "0", "MKSTREAM") == "unknown subcommand or wrong number of arguments for 'setid'. Try XGROUP HELP."
    assert err(r, "XGROUP", "SETID", "s", "g", "0", "ENTRIESREAD", "-2") == "value for ENTRIESREAD must be positive or -1"
    assert err(r, "XGROUP", "SETID", "s", "nog", "0") == "NOGROUP No such consumer group 'nog' for key name 's'"
    assert r.execute_command("XGROUP", "SETID", "s", "g", "-", "ENTRIESREAD", "5") == b"OK"
    groups = {g["name"]: g for g in r.xinfo_groups("s")}
    assert groups[b"g"]["last-delivered-id"] == b"0-0" and groups[b"g"]["entries-read"] == 5
    assert groups[b"g3"]["last-delivered-id"] == b"1-0" and groups[b"g3"]["entries-read"] == 3
    assert r.xgroup_destroy("s", "g3") == 1
    assert r.xgroup_destroy("s", "g3") == 0
    assert err(r, "XGROUP", "DESTROY", "nokey", "g").startswith("The XGROUP subcommand requires the key to exist.")
    assert err(r, "XGROUP", "FOO", "s", "g") == "unknown subcommand 'FOO'. Try XGROUP HELP."
    assert err(r, "XGROUP", "CREATE", "s") == "wrong number of arguments for 'xgroup|create' command"
    help_lines = r.execute_command("XGROUP", "HELP")
    assert help_lines[0] == b"XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:" and help_lines[-1] == b"    Prints this help."


def test_xgroup_consumers(grouped):
    r = grouped
    assert r.xgroup_createconsumer("s", "g", "c1") == 1
    assert r.xgroup_createconsumer("s", "g", "c1") == 0
    assert err(r, "XGROUP", "CREATECONSUMER", "s", "nog", "c") == "NOGROUP No such consumer group 'nog' for key name 's'"
    r.xreadgroup("g", "c1", {"s": ">"}, count=2)
    assert r.xgroup_delconsumer("s", "g", "c1") == 2
    assert r.xgroup_delconsumer("s", "g", "c1") == 0
    assert r.xpending("s", "g")["pending"] == 0


def test_xreadgroup_new_history_and_noack(grouped, c):
    r = grouped
    assert r.xreadgroup("g", "c1", {"s": ">"}, count=2) == [[b"s", [(b"1-1", {b"a": b"1"}), (b"2-1", {b"b": b"2"})]]]
    assert r.xreadgroup("g", "c2", {"s": ">"}) == [[b"s", [(b"3-1", {b"c": b"3"})]]]
    assert r.xreadgroup("g", "c2", {"s": ">"}) == []
    # History: the consumer's own pending entries; a deleted one shows with no fields.
    r.xdel("s", "2-1")
    hist = r.execute_command("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "0")
    assert hist[0][0] == b"s" and [e[0] for e in hist[0][1]] == [b"1-1", b"2-1"]
    assert c.execute("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", "1-1")[0][1][0] == [b"2-1", None]
    assert r.xreadgroup("g", "c3", {"s": "0"}) == [[b"s", []]]
    pend = {p["message_id"]: p for p in r.xpending_range("s", "g", "-", "+", 10)}
    assert pend[b"1-1"]["times_delivered"] == 2 and pend[b"1-1"]["consumer"] == b"c1"
    r.xadd("s", {"d": 4}, id="4-1")
    assert r.xreadgroup("g", "c1", {"s": ">"}, noack=True) == [[b"s", [(b"4-1", {b"d": b"4"})]]]
    assert b"4-1" not in pend and len(r.xpending_range("s", "g", "-", "+", 10)) == 3
    info = {c["name"]: c for c in r.xinfo_consumers("s", "g")}
    assert set(info) == {b"c1", b"c2", b"c3"}
    assert info[b"c1"]["pending"] == 2 and info[b"c3"]["pending"] == 0


def test_xreadgroup_errors(grouped):
    r = grouped
    assert err(r, "XREADGROUP", "GROUP", "nog", "c", "STREAMS", "s", ">") == "NOGROUP No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option"
    assert err(r, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "nokey", ">") == "NOGROUP No such key 'nokey' or consumer group 'g' in XREADGROUP with GROUP option"
    assert err(r, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "$").startswith("The $ ID is meaningless in the context of XREADGROUP")
    assert err(r, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">", ">") == "Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."
    assert err(r, "XREADGROUP", "COUNT", "1", "STREAMS", "s", "t", ">", ">") == "Missing GROUP option for XREADGROUP"
    assert err(r, "XREADGROUP", "GROUP", "g", "c", "COUNT", "x", "STREAMS", "s", ">") == "value is not an integer or out of range"
    assert err(r, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "x", "STREAMS", "s", ">") == "timeout is not an integer or out of range"


def test_xack_xpending(grouped, c):
    r = grouped
    summary = c.execute("XPENDING", "s", "g")
    assert summary == [0, None, None, None]
    r.xreadgroup("g", "c1", {"s": ">"}, count=2)
    r.xreadgroup("g", "c2", {"s": ">"})
    assert c.execute("XPENDING", "s", "g") == [3, b"1-1", b"3-1", [[b"c1", b"2"], [b"c2", b"1"]]]
    rows = c.execute("XPENDING", "s", "g", "-", "+", "10")
    assert [(x[0], x[1], x[3]) for x in rows] == [(b"1-1", b"c1", 1), (b"2-1", b"c1", 1), (b"3-1", b"c2", 1)]
    assert all(0 <= x[2] < 60000 for x in rows)
    assert [x[0] for x in c.execute("XPENDING", "s", "g", "(1-1", "+", "10", "c1")] == [b"2-1"]
    assert c.execute("XPENDING", "s", "g", "-", "+", "10", "nobody") == []
    assert c.execute("XPENDING", "s", "g", "IDLE", "1000000", "-", "+", "10") == []
    assert c.execute("XPENDING", "s", "g", "-", "+", "-1") == []
    assert err(r, "XPENDING", "s", "g", "-", "+") == "syntax error"
    assert err(r, "XPENDING", "s", "g", "IDLE", "10", "-", "+") == "syntax error"
    assert err(r, "XPENDING", "s", "g", "IDLE", "x", "-", "+", "10") == "value is not an integer or out of range"
    assert err(r, "XPENDING", "s", "g", "-", "+", "x") == "value is not an integer or out of range"
    assert err(r, "XPENDING", "s", "nog") == "NOGROUP No such key 's' or consumer group 'nog'"
    assert r.xack("s", "g", "1-1", "3-1", "9-9") == 2
    assert r.xack("s", "g", "1-1") == 0
    assert err(r, "XACK", "s", "g", "1-1", "x") == "Invalid stream ID specified as stream command argument"
    assert r.execute_command("XACK", "nokey", "g", "x") == 0
    assert r.execute_command("XACK", "s", "nog", "x") == 0
    assert c.execute("XPENDING", "s", "g") == [1, b"2-1", b"2-1", [[b"c1", b"1"]]]


def test_xclaim(grouped, c):
    r = grouped
    r.xreadgroup("g", "c1", {"s": ">"}, count=2)
    # Nothing claimed: no consumer is created (Redis 7.0).
    assert c.execute("XCLAIM", "s", "g", "c2", "0", "9-9") == []
    assert c.execute("XCLAIM", "s", "g", "c3", "1000000", "1-1") == []
    assert [c["name"] for c in r.xinfo_consumers("s", "g")] == [b"c1"]
    assert c.execute("XCLAIM", "s", "g", "c3", "0", "1-1") == [[b"1-1", [b"a", b"1"]]]
    assert c.execute("XCLAIM", "s", "g", "c3", "0", "1-1", "JUSTID") == [b"1-1"]
    rows = {x[0]: x for x in c.execute("XPENDING", "s", "g", "-", "+", "10")}
    assert rows[b"1-1"][1] == b"c3" and rows[b"1-1"][3] == 2
    # An entry deleted from the stream leaves the PEL when claimed.
    r.xdel("s", "2-1")
    assert c.execute("XCLAIM", "s", "g", "c3", "0", "2-1") == []
    assert c.execute("XPENDING", "s", "g")[0] == 1
    # FORCE creates the pending entry; RETRYCOUNT and TIME set its fields.
    assert c.execute("XCLAIM", "s", "g", "c4", "0", "3-1", "FORCE", "RETRYCOUNT", "7", "TIME", "5", "JUSTID") == [b"3-1"]
    row = c.execute("XPENDING", "s", "g", "3-1", "3-1", "1")[0]
    assert row[1] == b"c4" and row[3] == 7 and row[2] > 10**12
    r.execute_command("XCLAIM", "s", "g", "c4", "0", "3-1", "LASTID", "100-0")
    assert r.xinfo_groups("s")[0]["last-delivered-id"] == b"100-0"
    assert err(r, "XCLAIM", "s", "g", "c", "x", "1-1") == "Invalid min-idle-time argument for XCLAIM"
    assert err(r, "XCLAIM", "s", "g", "c", "0", "1-1", "IDLE", "x") == "Invalid IDLE option argument for XCLAIM"
    assert err(r, "XCLAIM", "s", "g", "c", "0", "1-1", "TIME", "x") == "Invalid TIME option argument for XCLAIM"
    assert err(r, "XCLAIM", "s", "g", "c", "0", "1-1", "RETRYCOUNT", "x") == "Invalid RETRYCOUNT option argument for XCLAIM"
    assert err(r, "XCLAIM", "s", "g", "c", "0", "1-1", "LASTID", "x") == "Invalid stream ID specified as stream command argument"
    assert err(r, "XCLAIM", "s", "g", "c", "0", "1-1", "foo") == "Unrecognized XCLAIM option 'foo'"
    assert err(r, "XCLAIM", "s", "nog", "c", "0", "1-1") == "NOGROUP No such key 's' or consumer group 'nog'"


def test_xautoclaim(grouped, c):
    r = grouped
    r.xreadgroup("g", "c1", {"s": ">"})
    assert c.execute("XAUTOCLAIM", "s", "g", "c2", "0", "0", "COUNT", "1") == [b"2-1", [[b"1-1", [b"a", b"1"]]], []]
    r.xdel("s", "2-1")
    assert c.execute("XAUTOCLAIM", "s", "g", "c2", "0", "0", "JUSTID") == [b"0-0", [b"1-1", b"3-1"], [b"2-1"]]
    assert c.execute("XAUTOCLAIM", "s", "g", "c3", "1000000", "0") == [b"0-0", [], []]
    assert c.execute("XAUTOCLAIM", "s", "g", "c3", "0", "(1-1") == [b"0-0", [[b"3-1", [b"c", b"3"]]], []]
    assert err(r, "XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "0") == "COUNT must be > 0"
    assert err(r, "XAUTOCLAIM", "s", "g", "c", "0", "0", "COUNT", "9223372036854775807") == "COUNT must be > 0"
    assert err(r, "XAUTOCLAIM", "s", "g", "c", "x", "0") == "Invalid min-idle-time argument for XAUTOCLAIM"
    assert err(r, "XAUTOCLAIM", "s", "g", "c", "0", "(18446744073709551615-18446744073709551615") == "invalid start ID for the interval"
    assert err(r, "XAUTOCLAIM", "s", "g", "c", "0", "0", "foo") == "syntax error"
    assert err(r, "XAUTOCLAIM", "nokey", "g", "c", "0", "0") == "NOGROUP No such key 'nokey' or consumer group 'g'"


def test_xinfo(grouped):
    r = grouped
    r.xreadgroup("g", "c1", {"s": ">"}, count=1)
    info = r.execute_command("XINFO", "STREAM", "s")
    d = dict(zip(info[::2], info[1::2]))
    assert d[b"length"] == 3 and d[b"radix-tree-keys"] == 1 and d[b"last-generated-id"] == b"3-1"
    assert d[b"entries-added"] == 3 and d[b"recorded-first-entry-id"] == b"1-1" and d[b"groups"] == 1
    assert d[b"first-entry"] == [b"1-1", [b"a", b"1"]] and d[b"last-entry"] == [b"3-1", [b"c", b"3"]]
    assert list(d) == [b"length", b"radix-tree-keys", b"radix-tree-nodes", b"last-generated-id", b"max-deleted-entry-id",
                       b"entries-added", b"recorded-first-entry-id", b"groups", b"first-entry", b"last-entry"]
    full = r.execute_command("XINFO", "STREAM", "s", "FULL", "COUNT", "1")
    f = dict(zip(full[::2], full[1::2]))
    assert f[b"entries"] == [[b"1-1", [b"a", b"1"]]]
    g = dict(zip(f[b"groups"][0][::2], f[b"groups"][0][1::2]))
    assert (g[b"name"], g[b"last-delivered-id"], g[b"entries-read"], g[b"lag"], g[b"pel-count"]) == (b"g", b"1-1", 1, 2, 1)
    c = dict(zip(g[b"consumers"][0][::2], g[b"consumers"][0][1::2]))
    assert list(c) == [b"name", b"seen-time", b"pel-count", b"pending"] and c[b"pel-count"] == 1
    assert r.xinfo_groups("s") == [{"name": b"g", "consumers": 1, "pending": 1, "last-delivered-id": b"1-1", "entries-read": 1, "lag": 2}]
    cons = r.xinfo_consumers("s", "g")
    assert [(x["name"], x["pending"]) for x in cons] == [(b"c1", 1)] and 0 <= cons[0]["idle"] < 60000
    assert err(r, "XINFO", "CONSUMERS", "s", "nog") == "NOGROUP No such consumer group 'nog' for key name 's'"
    assert err(r, "XINFO", "STREAM", "nokey") == "no such key"
    assert err(r, "XINFO", "STREAM", "s", "FULL", "COUNT") == "unknown subcommand or wrong number of arguments for 'STREAM'. Try XINFO HELP."
    assert err(r, "XINFO", "STREAM", "s", "FULL", "COUNT", "x") == "value is not an integer or out of range"
    assert err(r, "XINFO", "FOO", "s") == "unknown subcommand 'FOO'. Try XINFO HELP."
    assert err(r, "XINFO", "GROUPS", "s", "extra") == "wrong number of arguments for 'xinfo|groups' command"


def test_lag_and_entries_read_after_deletions(r):
    for i in range(1, 6):
        r.xadd("s", {"f": i}, id="%d-0" % i)
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "c", {"s": ">"}, count=2)
    assert r.xinfo_groups("s")[0]["lag"] == 3
    r.xdel("s", "4-0")
    g = r.xinfo_groups("s")[0]
    assert (g["entries-read"], g["lag"]) == (2, None)
    r.xreadgroup("g", "c", {"s": ">"})
    g = r.xinfo_groups("s")[0]
    assert (g["entries-read"], g["lag"]) == (5, 0)


def test_commands_in_multi(c):
    c.execute("XADD", "s", "1-1", "a", "1")
    assert c.execute("MULTI") == "OK"
    c.execute("XADD", "s", "2-1", "b", "2")
    c.execute("XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    c.execute("XLEN", "s")
    assert c.execute("EXEC") == [b"2-1", None, 2]
