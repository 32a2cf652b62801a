"""Server-side scripts (issue 51): EVAL and FUNCTION as Redis 7.0 runs them.

Every test runs against Redis too (`--target redis`) unless marked abacus_only: replies,
error texts and conversions are Redis's. Atomicity is checked across shards with keys the
scripts did not declare; effects are checked to survive a restart from the log (kill -9
under a script load) with no script half applied. redis-py's own `Lock`, which releases
and extends through EVALSHA, is used as an application would.
"""

import hashlib
import os
import signal
import threading
import time

import pytest
import redis
from redis.exceptions import ResponseError


def error_of(f):
    with pytest.raises(ResponseError) as e:
        f()
    return str(e.value)


def test_lua_types_become_replies(r):
    assert r.eval("return 1", 0) == 1
    assert r.eval("return 3.99", 0) == 3
    assert r.eval("return -3.7", 0) == -3
    assert r.eval("return 1e20", 0) == -9223372036854775808
    assert r.eval("return 'ciao'", 0) == b"ciao"
    assert r.eval("return {1,2,3,'ciao',{1,2}, nil, 5}", 0) == [1, 2, 3, b"ciao", [1, 2]]
    assert r.eval("return {ok='fine'}", 0) == b"fine"
    assert r.eval("return redis.status_reply('DONE')", 0) == b"DONE"
    assert r.eval("return true", 0) == 1
    assert r.eval("return false", 0) is None
    assert r.eval("return nil", 0) is None
    assert error_of(lambda: r.eval("return {err='My Error'}", 0)) == "My Error"
    assert error_of(lambda: r.eval("return redis.error_reply('FOO bar')", 0)) == "FOO bar"


def test_replies_become_lua_types(r):
    r.set("s", "abc")
    r.rpush("l", "a", "b")
    assert r.eval("return redis.call('get', KEYS[1])", 1, "s") == b"abc"
    assert r.eval("return redis.call('get', 'nokey') == false", 0) == 1
    assert r.eval("return redis.call('lrange', 'l', 0, -1)", 0) == [b"a", b"b"]
    assert r.eval("return redis.call('set', 'x', 1)['ok']", 0) == b"OK"
    assert r.eval("return type(redis.call('incr', 'n'))", 0) == b"number"
    assert r.eval("return redis.call('hgetall', 'nokey')", 0) == []
    # Numbers are passed to commands as %.17g.
    r.eval("return redis.call('set', 'f', 1.5)", 0)
    assert r.get("f") == b"1.5"
    r.eval("return redis.call('set', 'g', 1e20)", 0)
    assert r.get("g") == b"1e+20"


def test_resp3_conversions(r):
    r.hset("h", "f", "v")
    # RESP2 by default: a map reads as a flat array.
    assert r.eval("return redis.call('hgetall', 'h')", 0) == [b"f", b"v"]
    # After setresp(3) a map is {map = {...}}, a null is nil, a double {double = n}.
    assert r.eval("redis.setresp(3); return redis.call('hgetall', 'h').map.f", 0) == b"v"
    assert r.eval("redis.setresp(3); return redis.call('get', 'nokey') == nil", 0) == 1
    assert r.eval("redis.setresp(3); return tostring(redis.call('zincrby', 'z', 1.5, 'm').double)", 0) == b"1.5"
    assert "RESP version must be 2 or 3" in error_of(lambda: r.eval("redis.setresp(4)", 0))


def test_resp3_caller_gets_typed_replies(r3):
    assert r3.eval("return {double = 3.5}", 0) == 3.5
    assert r3.eval("return {map = {a = 1}}", 0) == {b"a": 1}
    assert r3.eval("redis.setresp(3); return true", 0) is True


def test_errors_read_as_redis(r):
    r.set("s", "abc")
    assert error_of(lambda: r.eval("return redis.call('incr', KEYS[1])", 1, "s")).startswith("value is not an integer or out of range script:")
    assert error_of(lambda: r.eval("return x", 0)).startswith("user_script:1: Script attempted to access nonexistent global variable 'x' script:")
    assert error_of(lambda: r.eval("x = 1", 0)).startswith("user_script:1: Attempt to modify a readonly table script:")
    assert error_of(lambda: r.eval("return redis.call('nosuch')", 0)).startswith("Unknown Redis command called from script script:")
    assert error_of(lambda: r.eval("return redis.call('get')", 0)).startswith("Wrong number of args calling Redis command from script script:")
    assert error_of(lambda: r.eval("return redis.call()", 0)).startswith("Please specify at least one argument for this redis lib call script:")
    assert error_of(lambda: r.eval("return redis.call('get', {})", 0)).startswith("Lua redis lib command arguments must be strings or integers script:")
    assert error_of(lambda: r.eval("error('boom')", 0)).startswith("user_script:1: boom script:")
    assert error_of(lambda: r.eval("return (", 0)).startswith("Error compiling script (new function): user_script:1:")
    assert error_of(lambda: r.eval("return redis.call('shutdown')", 0)).startswith("This Redis command is not allowed from script script:")
    # The line of the failing call.
    assert error_of(lambda: r.eval("local a = 1\nreturn redis.call('incr', 's')", 0)).endswith("on @user_script:2.")


def test_pcall_and_redis_pcall(r):
    r.set("s", "abc")
    assert r.eval("local t = redis.pcall('incr', 's'); return t['err']", 0) == b"ERR value is not an integer or out of range"
    assert r.eval("local ok, e = pcall(redis.call, 'incr', 's'); return {tostring(ok), e}", 0) == [b"false", b"ERR value is not an integer or out of range"]
    assert r.eval("local ok, e = pcall(error, {err='X y'}); return type(e)", 0) == b"string"


def test_sandbox(r):
    for name in ["os", "io", "loadfile", "dofile", "print", "require", "debug"]:
        assert "nonexistent global variable '%s'" % name in error_of(lambda: r.eval("return %s" % name, 0))
    assert r.eval("return loadstring('return 1')()", 0) == 1
    assert "readonly table" in error_of(lambda: r.eval("string.foo = 1", 0))
    assert "readonly table" in error_of(lambda: r.eval("redis.call = nil", 0))
    assert r.eval("return redis.REDIS_VERSION_NUM >= 0x070000", 0) == 1
    assert r.eval("return redis.sha1hex('')", 0) == b"da39a3ee5e6b4b0d3255bfef95601890afd80709"


def test_keys_and_args(r):
    assert r.eval("return {KEYS[1], KEYS[2], ARGV[1]}", 2, "a", "b", "c") == [b"a", b"b", b"c"]
    assert error_of(lambda: r.execute_command("EVAL", "return 1", "-1")) == "Number of keys can't be negative"
    assert error_of(lambda: r.execute_command("EVAL", "return 1", "2", "a")) == "Number of keys can't be greater than number of args"
    assert error_of(lambda: r.execute_command("EVAL", "return 1", "x")) == "value is not an integer or out of range"


def test_script_cache(r):
    sha = r.script_load("return 'hi'")
    assert sha == hashlib.sha1(b"return 'hi'").hexdigest()
    assert r.evalsha(sha, 0) == b"hi"
    assert r.script_exists(sha, "f" * 40) == [True, False]
    # EVAL caches its script too.
    r.eval("return 7", 0)
    assert r.script_exists(hashlib.sha1(b"return 7").hexdigest()) == [True]
    assert error_of(lambda: r.evalsha("f" * 40, 0)) == "No matching script. Please use EVAL."
    assert r.script_flush() is True
    assert r.script_exists(sha) == [False]
    assert "Error compiling script" in error_of(lambda: r.script_load("return ("))


def test_read_only_scripts(r):
    assert "Write commands are not allowed from read-only scripts" in error_of(lambda: r.eval_ro("return redis.call('set', 'k', 1)", 1, "k"))
    assert "Write commands are not allowed from read-only scripts" in error_of(lambda: r.eval("#!lua flags=no-writes\nreturn redis.call('set', 'k', 1)", 1, "k"))
    r.set("k", "v")
    assert r.eval_ro("return redis.call('get', KEYS[1])", 1, "k") == b"v"
    assert "Unexpected flag in script shebang" in error_of(lambda: r.eval("#!lua flags=nosuch\nreturn 1", 0))


def test_undeclared_keys_on_any_shard(r):
    # Keys the script did not declare, on every shard.
    r.eval("for i = 1, 50 do redis.call('set', 'undeclared:' .. i, i) end", 0)
    assert [int(r.get("undeclared:%d" % i)) for i in range(1, 51)] == list(range(1, 51))
    # A multi-key command over keys of several shards inside a script.
    r.eval("redis.call('mset', 'a', 1, 'b', 2, 'c', 3, 'd', 4)", 0)
    assert r.eval("return redis.call('mget', 'a', 'b', 'c', 'd')", 0) == [b"1", b"2", b"3", b"4"]
    assert r.eval("return redis.call('del', 'a', 'b', 'c', 'd')", 0) == 4


def test_libraries(r):
    r.function_flush()
    code = "#!lua name=mylib\nredis.register_function('f1', function(keys, args) return redis.call('get', keys[1]) end)\n" \
           "redis.register_function{function_name='f2', callback=function(keys, args) return args[1] end, flags={'no-writes'}, description='echo'}"
    assert r.function_load(code) == b"mylib"
    r.set("k", "v")
    assert r.fcall("f1", 1, "k") == b"v"
    assert r.fcall_ro("f2", 0, "x") == b"x"
    assert "Can not execute a script with write flag using *_ro command." in error_of(lambda: r.fcall_ro("f1", 1, "k"))
    assert error_of(lambda: r.fcall("nosuch", 0)) == "Function not found"
    assert error_of(lambda: r.function_load(code)) == "Library 'mylib' already exists"
    assert r.function_load(code, replace=True) == b"mylib"
    assert error_of(lambda: r.function_load("redis.register_function('f3', function() end)")) == "Missing library metadata"
    assert error_of(lambda: r.function_load("#!lua name=other\nredis.register_function('f1', function() end)")) == "Function f1 already exists"
    assert error_of(lambda: r.function_load("#!lua name=empty\nlocal x = 1")) == "No functions registered"
    listed = r.function_list()
    assert len(listed) == 1
    lib = listed[0]
    assert lib[1] == b"mylib" and lib[3] == b"LUA"
    names = sorted(f[1] for f in lib[5])
    assert names == [b"f1", b"f2"]
    payload = r.function_dump()
    assert r.function_flush() in (b"OK", True)
    assert error_of(lambda: r.fcall("f1", 1, "k")) == "Function not found"
    assert r.function_restore(payload) in (b"OK", True)
    assert r.fcall("f1", 1, "k") == b"v"
    assert error_of(lambda: r.function_restore(payload)) == "Library mylib already exists"
    assert r.function_restore(payload, "REPLACE") in (b"OK", True)
    assert r.function_delete("mylib") in (b"OK", True)
    assert error_of(lambda: r.function_delete("mylib")) == "Library not found"
    assert error_of(lambda: r.execute_command("FUNCTION", "RESTORE", b"garbage")) == "DUMP payload version or checksum are wrong"


def test_function_code_cannot_call_commands(r):
    r.function_flush()
    err = error_of(lambda: r.function_load("#!lua name=bad\nredis.call('set', 'x', 1)\nredis.register_function('g', function() end)"))
    assert err.startswith("Error registering functions")
    assert r.exists("x") == 0


def test_lua_libraries(r):
    assert r.eval("return cjson.encode({1,2,{a=1}})", 0) == b'[1,2,{"a":1}]'
    assert r.eval("return cjson.decode('[1,2,{\"a\":5}]')[3].a", 0) == 5
    assert r.eval("return cmsgpack.unpack(cmsgpack.pack({1,2,3}))[3]", 0) == 3
    assert r.eval("return bit.band(0xff, 0x0f)", 0) == 15
    assert r.eval("return bit.tohex(65535)", 0) == b"0000ffff"
    assert r.eval("return struct.unpack('>I2', struct.pack('>I2', 513))", 0) == 513


def test_redis_py_lock(r):
    lock = r.lock("resource", timeout=10)
    assert lock.acquire(blocking=False)
    assert lock.locked() and lock.owned()
    other = r.lock("resource", timeout=10)
    assert not other.acquire(blocking=False)
    assert lock.extend(5)
    assert r.pttl("resource") > 10000
    assert lock.reacquire()
    lock.release()
    assert not lock.locked()
    assert other.acquire(blocking=False)
    # A lock whose key expired and was taken by another owner cannot be released by the old one.
    r.set("resource", "someone-else")
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        other.release()


def test_scripts_are_atomic_across_shards(server, r):
    """Writers move one unit from one key to another (keys of different shards, one of them
    undeclared); readers check the total, in a script and with MGET, and never see a script
    half done."""
    keys = ["acct:%d" % i for i in range(8)]
    for k in keys:
        r.set(k, 1000)
    move = "local a, b = KEYS[1], ARGV[1]; redis.call('decrby', a, 1); redis.call('incrby', b, 1)"
    total = "local t = 0; for _, k in ipairs(KEYS) do t = t + tonumber(redis.call('get', k)) end; return t"
    stop = threading.Event()
    bad = []

    def writer(seed):
        c = server.client()
        i = seed
        while not stop.is_set():
            c.eval(move, 1, keys[i % 8], keys[(i * 7 + 3) % 8])
            i += 1

    def reader():
        c = server.client()
        while not stop.is_set():
            t = c.eval(total, len(keys), *keys)
            if t != 8000:
                bad.append(("script", t))
            m = sum(int(v) for v in c.mget(keys))
            if m != 8000:
                bad.append(("mget", m))

    threads = [threading.Thread(target=writer, args=(s,)) for s in range(3)] + [threading.Thread(target=reader) for _ in range(2)]
    for t in threads:
        t.start()
    deadline = time.time() + 3
    while time.time() < deadline:
        time.sleep(0.1)
    stop.set()
    for t in threads:
        t.join()
    assert bad == []
    assert sum(int(v) for v in r.mget(keys)) == 8000


def test_busy_and_script_kill(server):
    s = server.start()
    c = s.client()
    c.config_set("busy-reply-threshold", 200)
    result = {}

    def run():
        try:
            s.client().eval("while true do end", 0)
        except ResponseError as e:
            result["error"] = str(e)

    t = threading.Thread(target=run)
    t.start()
    other = s.client(socket_timeout=20)
    deadline = time.time() + 20
    busy = None
    while time.time() < deadline:
        try:
            other.ping()
        except ResponseError as e:
            busy = str(e)
            break
        time.sleep(0.05)
    assert busy is not None and busy.startswith("BUSY Redis is busy running a script.")
    assert s.client(socket_timeout=20).script_kill() in (True, b"OK")
    t.join(20)
    assert not t.is_alive()
    assert "Script killed by user with SCRIPT KILL" in result["error"]
    assert other.ping() is True
    assert error_of(lambda: other.script_kill()) == "NOTBUSY No scripts in execution right now."


def test_a_script_that_wrote_cannot_be_killed(server):
    s = server.start()
    c = s.client()
    c.config_set("busy-reply-threshold", 100)
    body = "redis.call('set', 'w', 1); local t0 = tonumber(redis.call('time')[1]); " \
           "while tonumber(redis.call('time')[1]) - t0 < 2 do end; return 1"
    done = {}
    t = threading.Thread(target=lambda: done.setdefault("r", s.client(socket_timeout=30).eval(body, 0)))
    t.start()
    other = s.client(socket_timeout=30)
    deadline = time.time() + 20
    answer = None
    while time.time() < deadline and t.is_alive():
        try:
            other.script_kill()
        except ResponseError as e:
            if str(e).startswith("UNKILLABLE"):
                answer = str(e)
                break
        time.sleep(0.05)
    t.join(30)
    assert answer is not None
    assert done["r"] == 1


@pytest.mark.abacus_only("restart from Abacus's own log")
def test_effects_survive_kill_9_atomically(server, tmp_path):
    """kill -9 under a load of scripts that each move a unit between two keys of different
    shards (and use random numbers and TIME): after recovery the total is intact."""
    data = tmp_path / "data"
    data.mkdir()
    args = ["--dir", str(data), "--appendonly", "yes", "--appendfsync", "always"]
    s = server.start(args)
    c = s.client()
    keys = ["k%d" % i for i in range(6)]
    for k in keys:
        c.set(k, 100)
    move = "local n = math.random(1, 5); redis.call('decrby', KEYS[1], n); redis.call('incrby', ARGV[1], n); " \
           "redis.call('set', 'last', redis.call('time')[1])"
    stop = threading.Event()

    def load(seed):
        cl = s.client()
        i = seed
        try:
            while not stop.is_set():
                cl.eval(move, 1, keys[i % 6], keys[(i + 1 + seed) % 6])
                i += 1
        except (redis.exceptions.ConnectionError, OSError):
            pass

    threads = [threading.Thread(target=load, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    time.sleep(1.0)
    os.killpg(s.proc.pid, signal.SIGKILL)
    stop.set()
    for t in threads:
        t.join()
    s.proc.wait()
    s2 = server.start(args)
    c2 = s2.client()
    assert sum(int(v) for v in c2.mget(keys)) == 600


def test_script_commands_in_multi(r):
    p = r.pipeline(transaction=True)
    p.set("a", 1)
    p.eval("return redis.call('incr', 'a') + redis.call('incr', 'undeclared')", 0)
    assert p.execute() == [True, 3]


def test_a_script_reaching_other_shards_after_writing_applies_once(r):
    """A script first writes its declared key, then keys it did not declare (some on other
    shards): each write happens exactly once, whatever mode the server runs it in."""
    body = "redis.call('incr', KEYS[1]); redis.call('rpush', KEYS[1] .. ':l', 'x'); " \
           "for i = 1, 20 do redis.call('incr', 'spread:' .. i) end; return redis.call('get', KEYS[1])"
    assert r.eval(body, 1, "k") == b"1"
    assert r.llen("k:l") == 1
    assert [int(r.get("spread:%d" % i)) for i in range(1, 21)] == [1] * 20
    # A large value written first (over what is copied before a write), then other shards.
    r.set("big", "x" * 200000)
    body = "redis.call('append', KEYS[1], 'y'); for i = 1, 20 do redis.call('incr', 'spread:' .. i) end; return redis.call('strlen', KEYS[1])"
    assert r.eval(body, 1, "big") == 200001
    assert [int(r.get("spread:%d" % i)) for i in range(1, 21)] == [2] * 20
    # pcall cannot keep a script running once the server moves it.
    body = "redis.call('incr', KEYS[1]); for i = 1, 20 do pcall(redis.call, 'incr', 'spread:' .. i) end; return redis.call('get', KEYS[1])"
    assert r.eval(body, 1, "k") == b"2"
    assert [int(r.get("spread:%d" % i)) for i in range(1, 21)] == [3] * 20


def test_publish_and_notifications_from_scripts_happen_once(server, r):
    p = r.pubsub()
    p.subscribe("chan")
    p.get_message(timeout=5)
    r.config_set("notify-keyspace-events", "KA")
    try:
        p.psubscribe("__keyspace@0__:nk")
        p.get_message(timeout=5)
        r.eval("redis.call('set', KEYS[1], 1); redis.call('publish', 'chan', 'hello'); for i = 1, 20 do redis.call('incr', 'n:' .. i) end", 1, "nk")
        got = []
        deadline = time.time() + 5
        while time.time() < deadline and len(got) < 2:
            m = p.get_message(timeout=0.5)
            if m and m["type"] in ("message", "pmessage"):
                got.append((m["channel"], m["data"]))
        time.sleep(0.3)
        while True:
            m = p.get_message(timeout=0.2)
            if not m:
                break
            if m["type"] in ("message", "pmessage"):
                got.append((m["channel"], m["data"]))
        assert sorted(got) == sorted([(b"chan", b"hello"), (b"__keyspace@0__:nk", b"set")])
    finally:
        r.config_set("notify-keyspace-events", "")
        p.close()
