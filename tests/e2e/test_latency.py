"""SLOWLOG, LATENCY (LATEST, HISTORY, RESET, DOCTOR, GRAPH, HISTOGRAM, HELP) and INFO
latencystats, through the wire as a client sees them. Every test here also passes against
Redis (--target redis) unless marked. Each test starts its own server with the thresholds
it needs, so nothing leaks into the shared one.

Slow commands are made with DEBUG SLEEP; the only assertion on time is that a DEBUG SLEEP
0.05 exceeds a 10 ms threshold.
"""

import re
import time

import pytest

from helpers import Err, wait_until


def start(server, *args):
    p = server.start(list(args))
    return p, p.raw()


def entries(c, *count):
    return c.execute("SLOWLOG", "GET", *count)


# --- SLOWLOG -----------------------------------------------------------------------------

def test_a_slow_command_is_logged_with_its_client(server):
    p, c = start(server, "--slowlog-log-slower-than", "10000")
    assert c.execute("SLOWLOG", "RESET") == "OK"
    assert c.execute("CLIENT", "SETNAME", "slowpoke") == "OK"
    before = int(time.time())
    assert c.execute("DEBUG", "SLEEP", "0.05") == "OK"
    log = entries(c)
    assert len(log) == 1
    entry_id, ts, duration_us, argv, addr, name = log[0]
    assert isinstance(entry_id, int) and entry_id >= 0
    assert before - 1 <= ts <= int(time.time()) + 1
    assert duration_us >= 10000
    assert argv == [b"DEBUG", b"SLEEP", b"0.05"]
    assert re.fullmatch(rb"127\.0\.0\.1:\d+", addr), addr
    assert name == b"slowpoke"
    assert c.execute("SLOWLOG", "LEN") == 1
    assert c.execute("SLOWLOG", "RESET") == "OK"
    assert c.execute("SLOWLOG", "LEN") == 0
    assert entries(c) == []
    c.close()


def client_addr(c):
    line = c.execute("CLIENT", "INFO").decode()
    return dict(f.split("=", 1) for f in line.split())["addr"].encode()


def test_keyed_commands_are_logged_with_their_client(server):
    # Keyed commands run on their keys' shards (every shard, with keys enough), alone,
    # pipelined, in a transaction and across shards: each entry names the client that sent
    # it, as Redis's do.
    p, a = start(server, "--slowlog-log-slower-than", "0", "--slowlog-max-len", "1024")
    b = p.raw()
    assert a.execute("CLIENT", "SETNAME", "alice") == "OK"
    assert b.execute("CLIENT", "SETNAME", "bob") == "OK"
    who = {b"alice": client_addr(a), b"bob": client_addr(b)}
    assert who[b"alice"] != who[b"bob"]
    keys = ["sk:%d" % i for i in range(16)]
    assert a.execute("SLOWLOG", "RESET") == "OK"
    for k in keys:
        assert a.execute("SET", k, "a") == "OK"
        assert b.execute("GET", k) == b"a"
    assert b.pipeline([("INCR", k + ":n") for k in keys]) == [1] * len(keys)
    assert a.execute("MGET", *keys) == [b"a"] * len(keys)
    assert b.execute("MULTI") == "OK"
    assert b.execute("GET", keys[0]) == "QUEUED"
    assert b.execute("EXEC") == [b"a"]
    log = entries(a, "-1")
    by_cmd = {}
    for e in log:
        by_cmd.setdefault(e[3][0], []).append(e)
    assert len(by_cmd[b"SET"]) == len(keys) and len(by_cmd[b"GET"]) == len(keys) + 1
    assert len(by_cmd[b"INCR"]) == len(keys) and len(by_cmd[b"MGET"]) == 1
    for cmd, name in [(b"SET", b"alice"), (b"MGET", b"alice"), (b"GET", b"bob"), (b"INCR", b"bob")]:
        for e in by_cmd[cmd]:
            assert (e[4], e[5]) == (who[name], name), e
    a.close()
    b.close()


def big_set(c, key, members=200_000, chunk=10_000):
    for start in range(0, members, chunk):
        c.execute("SADD", key, *("member:%d" % i for i in range(start, start + chunk)))


PIPELINE = [("GET", "{p}x")] * 8 + [("SUNIONSTORE", "{p}dst", "{p}big")] + [("GET", "{p}x")] * 8
HEAVY = PIPELINE.index(("SUNIONSTORE", "{p}dst", "{p}big"))


def pipeline_entries(c):
    """This test's entries of the slow log, oldest first, without the SLOWLOG commands."""
    return [e for e in reversed(entries(c, "-1")) if e[3][0] in (b"GET", b"SUNIONSTORE")]


def test_each_pipelined_command_gets_its_own_duration(server):
    # A pipeline on one shard runs as one group, whose time the server measures once; the
    # slow log still gets each command once, in order, with its own duration: the heavy
    # SUNIONSTORE (200,000 members copied) takes far longer than the median GET, and the
    # durations add up to no more than the client waited for the whole pipeline.
    p, c = start(server, "--slowlog-log-slower-than", "0", "--slowlog-max-len", "1024")
    big_set(c, "{p}big")
    assert c.execute("SET", "{p}x", "v") == "OK"
    assert c.execute("SLOWLOG", "RESET") == "OK"
    started = time.monotonic()
    replies = c.pipeline(PIPELINE)
    waited_us = (time.monotonic() - started) * 1e6
    assert replies == [b"v"] * HEAVY + [200_000] + [b"v"] * 8
    log = pipeline_entries(c)
    assert [tuple(a.decode() for a in e[3]) for e in log] == PIPELINE
    durations = [e[2] for e in log]
    gets = sorted(durations[:HEAVY] + durations[HEAVY + 1:])
    assert durations[HEAVY] > gets[len(gets) // 2], durations
    assert sum(durations) <= waited_us, (durations, waited_us)
    c.close()


def test_a_pipelines_slow_command_is_logged_and_its_fast_neighbours_are_not(server):
    # With a threshold only the heavy command reaches, the group as a whole reaches it too:
    # its commands' durations are worked out, and only the heavy one is logged (a GET could
    # only be logged if the machine stalled during it). The threshold is a quarter of what
    # the heavy command took alone, measured first.
    p, c = start(server, "--slowlog-log-slower-than", "0", "--slowlog-max-len", "1024")
    big_set(c, "{p}big")
    assert c.execute("SET", "{p}x", "v") == "OK"
    assert c.execute("SUNIONSTORE", "{p}dst", "{p}big") == 200_000
    alone_us = [e for e in entries(c, "-1") if e[3][0] == b"SUNIONSTORE"][0][2]
    threshold = max(1, alone_us // 4)
    assert c.execute("CONFIG", "SET", "slowlog-log-slower-than", str(threshold)) == "OK"
    assert c.execute("SLOWLOG", "RESET") == "OK"
    c.pipeline(PIPELINE)
    log = pipeline_entries(c)
    assert [e[3] for e in log].count([b"SUNIONSTORE", b"{p}dst", b"{p}big"]) == 1, log
    assert all(e[2] >= threshold for e in log), (threshold, log)
    assert len(log) < 1 + (len(PIPELINE) - 1) // 2, (threshold, log)
    c.close()


def test_a_negative_threshold_turns_the_log_off(server):
    p, c = start(server, "--slowlog-log-slower-than", "-1")
    c.execute("DEBUG", "SLEEP", "0.05")
    assert c.execute("SLOWLOG", "LEN") == 0
    assert c.execute("CONFIG", "SET", "slowlog-log-slower-than", "10000") == "OK"
    c.execute("DEBUG", "SLEEP", "0.05")
    assert c.execute("SLOWLOG", "LEN") == 1
    c.close()


def test_zero_logs_every_command_newest_first_with_growing_ids(server):
    p, c = start(server, "--slowlog-log-slower-than", "0", "--slowlog-max-len", "128")
    c.execute("SLOWLOG", "RESET")
    for i in range(5):
        assert c.execute("SET", "k%d" % i, "v") == "OK"
    assert c.execute("GET", "k4") == b"v"
    log = entries(c, "-1")
    # SLOWLOG RESET itself was logged after it ran: 1 + 5 SETs + GET.
    assert len(log) == 7
    assert [e[3] for e in log[:6]] == [[b"GET", b"k4"]] + [[b"SET", b"k%d" % i, b"v"] for i in (4, 3, 2, 1, 0)]
    assert log[6][3] == [b"SLOWLOG", b"RESET"]
    ids = [e[0] for e in log]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == len(ids)
    # SLOWLOG GET is logged too, after its reply.
    newest_two = entries(c, "2")
    assert newest_two[0][3] == [b"SLOWLOG", b"GET", b"-1"] and newest_two[1] == log[0]
    assert newest_two[0][0] > log[0][0]
    assert len(entries(c)) == 9
    assert all(e[2] >= 0 for e in log)
    c.close()


def test_max_len_keeps_the_newest(server):
    p, c = start(server, "--slowlog-log-slower-than", "0", "--slowlog-max-len", "3")
    for i in range(10):
        c.execute("SET", "k%d" % i, "v")
    assert c.execute("SLOWLOG", "LEN") == 3
    # SLOWLOG LEN was logged after its reply.
    assert [e[3] for e in entries(c)] == [[b"SLOWLOG", b"LEN"], [b"SET", b"k9", b"v"], [b"SET", b"k8", b"v"]]
    assert c.execute("CONFIG", "SET", "slowlog-max-len", "1") == "OK"
    assert c.execute("SLOWLOG", "LEN") == 1
    assert c.execute("CONFIG", "GET", "slowlog-max-len") == [b"slowlog-max-len", b"1"]
    c.close()


def test_long_commands_are_truncated_as_redis_truncates_them(server):
    p, c = start(server, "--slowlog-log-slower-than", "0")
    keys = ["key%d" % i for i in range(40)]
    assert c.execute("DEL", *keys) == 0
    argv = entries(c, "1")[0][3]
    assert len(argv) == 32
    assert argv[:31] == [b"DEL"] + [k.encode() for k in keys[:30]]
    assert argv[31] == b"... (10 more arguments)"
    assert c.execute("SET", "big", "x" * 200) == "OK"
    argv = entries(c, "1")[0][3]
    assert argv == [b"SET", b"big", b"x" * 128 + b"... (72 more bytes)"]
    c.close()


def test_slowlog_errors_and_help(server):
    p, c = start(server)
    for bad in ("-2", "x", "1.5"):
        assert c.execute("SLOWLOG", "GET", bad) == Err("ERR count should be greater than or equal to -1")
    assert c.execute("SLOWLOG", "NOPE") == Err("ERR unknown subcommand 'NOPE'. Try SLOWLOG HELP.")
    assert c.execute("SLOWLOG", "LEN", "x") == Err("ERR wrong number of arguments for 'slowlog|len' command")
    assert c.execute("SLOWLOG") == Err("ERR wrong number of arguments for 'slowlog' command")
    help_lines = c.execute("SLOWLOG", "HELP")
    assert help_lines[0].startswith("SLOWLOG <subcommand>")
    assert any(line.startswith("GET [<count>]") for line in help_lines)
    assert c.execute("CONFIG", "GET", "slowlog-log-slower-than") == [b"slowlog-log-slower-than", b"10000"]
    c.close()


# --- LATENCY monitor ---------------------------------------------------------------------

def test_latency_monitor_records_a_slow_command(server):
    p, c = start(server, "--latency-monitor-threshold", "10")
    assert c.execute("LATENCY", "LATEST") == []
    c.execute("DEBUG", "SLEEP", "0.05")
    # Only the command event is checked: a slow disk may add a log fsync event.
    latest = [e for e in c.execute("LATENCY", "LATEST") if e[0] == b"command"]
    assert len(latest) == 1
    event, ts, last_ms, max_ms = latest[0]
    assert abs(ts - time.time()) < 60
    assert last_ms >= 10 and max_ms >= last_ms
    history = c.execute("LATENCY", "HISTORY", "command")
    assert len(history) == 1 and history[0][0] == ts and history[0][1] == last_ms
    assert c.execute("LATENCY", "HISTORY", "no-such-event") == []
    graph = c.execute("LATENCY", "GRAPH", "command")
    assert graph.startswith(b"command - high %d ms, low %d ms (all time high %d ms)\n" % (last_ms, last_ms, max_ms))
    assert c.execute("LATENCY", "GRAPH", "nosuch") == Err("ERR No samples available for event 'nosuch'")
    doctor = c.execute("LATENCY", "DOCTOR")
    assert b"command" in doctor and b"latency spike" in doctor
    assert c.execute("LATENCY", "RESET", "nosuch") == 0
    assert c.execute("LATENCY", "RESET", "command") == 1
    assert c.execute("LATENCY", "HISTORY", "command") == []
    assert c.execute("LATENCY", "RESET") >= 0
    assert [e for e in c.execute("LATENCY", "LATEST") if e[0] == b"command"] == []
    c.close()


def test_latency_monitor_off_records_nothing(server):
    p, c = start(server)
    assert c.execute("CONFIG", "GET", "latency-monitor-threshold") == [b"latency-monitor-threshold", b"0"]
    c.execute("LATENCY", "RESET")
    c.execute("DEBUG", "SLEEP", "0.05")
    assert c.execute("LATENCY", "LATEST") == []
    assert b"disabled" in c.execute("LATENCY", "DOCTOR")
    assert c.execute("LATENCY", "HELP")[0].startswith("LATENCY <subcommand>")
    assert c.execute("LATENCY", "NOPE") == Err("ERR unknown subcommand 'NOPE'. Try LATENCY HELP.")
    c.close()


# --- latency tracking: LATENCY HISTOGRAM and INFO latencystats ---------------------------

def histogram(c, *names):
    """LATENCY HISTOGRAM as {name: (calls, [(usec, cumulative), ...])} (RESP2's flat arrays)."""
    flat = c.execute("LATENCY", "HISTOGRAM", *names)
    out = {}
    for name, body in zip(flat[::2], flat[1::2]):
        fields = dict(zip(body[::2], body[1::2]))
        h = fields[b"histogram_usec"]
        out[name] = (fields[b"calls"], list(zip(h[::2], h[1::2])))
    return out


def test_latency_histogram_counts_every_call(server):
    p, c = start(server)
    for i in range(30):
        c.execute("SET", "k%d" % i, "v")
    c.pipeline([("GET", "k%d" % i) for i in range(20)])
    h = histogram(c, "set", "GET", "nosuchcommand")
    assert set(h) == {b"set", b"get"}
    for name, calls in ((b"set", 30), (b"get", 20)):
        got_calls, cdf = h[name]
        assert got_calls == calls
        bounds = [b for b, _ in cdf]
        counts = [n for _, n in cdf]
        assert bounds == sorted(bounds) and len(set(bounds)) == len(bounds)
        assert counts == sorted(counts) and counts[-1] == calls
    # Without names: every command that ran (LATENCY HISTOGRAM's own call not yet counted).
    everything = histogram(c)
    assert b"set" in everything and b"get" in everything
    assert histogram(c, "nosuchcommand") == {}
    c.close()


def test_info_latencystats(server):
    p, c = start(server)
    for i in range(10):
        c.execute("SET", "k%d" % i, "v")
    info = c.execute("INFO", "latencystats").decode()
    assert info.startswith("# Latencystats\r\n")
    line = re.search(r"^latency_percentiles_usec_set:(.*)$", info, re.M).group(1).strip()
    assert re.fullmatch(r"p50=\d+\.\d{3},p99=\d+\.\d{3},p99\.9=\d+\.\d{3}", line), line
    values = [float(x.split("=")[1]) for x in line.split(",")]
    assert values == sorted(values)
    assert "# Latencystats" in c.execute("INFO", "all").decode()
    assert "# Latencystats" not in c.execute("INFO").decode()
    assert c.execute("CONFIG", "SET", "latency-tracking-info-percentiles", "50 99.99") == "OK"
    assert c.execute("CONFIG", "GET", "latency-tracking-info-percentiles") == [b"latency-tracking-info-percentiles", b"50 99.99"]
    info = c.execute("INFO", "latencystats").decode()
    assert re.search(r"^latency_percentiles_usec_set:p50=\d+\.\d{3},p99\.99=\d+\.\d{3}\r$", info, re.M), info
    assert isinstance(c.execute("CONFIG", "SET", "latency-tracking-info-percentiles", "101"), Err)
    assert isinstance(c.execute("CONFIG", "SET", "latency-tracking-info-percentiles", "abc"), Err)
    c.close()


def test_latency_tracking_off_keeps_no_histograms(server):
    p, c = start(server, "--latency-tracking", "no")
    for i in range(5):
        c.execute("SET", "k%d" % i, "v")
    assert histogram(c, "set") == {}
    assert "latency_percentiles_usec_set" not in c.execute("INFO", "latencystats").decode()
    assert c.execute("CONFIG", "SET", "latency-tracking", "yes") == "OK"
    c.execute("SET", "k", "v")
    assert histogram(c, "set")[b"set"][0] == 1
    assert c.execute("CONFIG", "RESETSTAT") == "OK"
    assert histogram(c, "set") == {}
    c.close()


# --- CLIENT LIST / CLIENT INFO buffer figures --------------------------------------------

def client_fields(line):
    return dict(f.split("=", 1) for f in line.strip().split(" "))


def test_client_list_reports_buffers_and_queued_commands(server):
    p = server.start([])
    a, b = p.raw(), p.raw()
    assert a.execute("CLIENT", "SETNAME", "queuer") == "OK"
    me = client_fields(b.execute("CLIENT", "INFO").decode())
    assert int(me["qbuf-free"]) > 0
    assert int(me["tot-mem"]) > 0
    assert a.execute("MULTI") == "OK"
    assert a.execute("SET", "k", "x" * 1000) == "QUEUED"
    assert a.execute("SET", "k2", "y" * 1000) == "QUEUED"
    listed = [client_fields(l) for l in b.execute("CLIENT", "LIST").decode().splitlines()]
    queuer = next(f for f in listed if f["name"] == "queuer")
    assert queuer["multi"] == "2"
    assert int(queuer["multi-mem"]) >= 2000
    assert int(queuer["tot-mem"]) >= int(queuer["multi-mem"])
    assert a.execute("EXEC") == ["OK", "OK"]
    listed = [client_fields(l) for l in b.execute("CLIENT", "LIST").decode().splitlines()]
    queuer = next(f for f in listed if f["name"] == "queuer")
    assert queuer["multi"] == "-1" and queuer["multi-mem"] == "0"
    a.close()
    b.close()


def test_client_list_reports_a_subscribers_backlog(server):
    p = server.start([])
    sub, pub = p.raw(), p.raw()
    sub.execute("CLIENT", "SETNAME", "sleepy")
    sub.execute("SUBSCRIBE", "ch")
    payload = "m" * (1 << 20)
    # The subscriber reads nothing: past what the sockets hold, messages wait in the server.
    for _ in range(16):
        pub.execute("PUBLISH", "ch", payload)

    def omem():
        listed = [client_fields(l) for l in pub.execute("CLIENT", "LIST").decode().splitlines()]
        return int(next(f for f in listed if f["name"] == "sleepy")["omem"])

    assert wait_until(lambda: omem() > 0, timeout=10)
    sub.close()
    pub.close()
