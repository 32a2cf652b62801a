#!/usr/bin/env python3
"""W6 client: loads two ID sets into Redis and Abacus and times the set commands.

Called by bench/w6.sh, which starts the servers. Everything goes over raw RESP sockets:
redis-benchmark's __rand_int__ pads with zeros (not canonical integers), and redis-py would
make the client the bottleneck. Each load is a stream of SADDs of 1,000 members written by
one thread while another counts the replies, so the pipeline never stalls on round trips.

Workload (the issue's W6): sets "a" and "b", each 10M draws (fixed seeds) of integers below
100M, about 9.5M distinct. Timed: SCARD, SINTERCARD 2 a b, SUNIONSTORE u a b, SDIFFSTORE d
a b (median of several runs for Abacus; Redis takes seconds, so fewer), and pipelined
SISMEMBER throughput (1M probes, half of them members). RSS per member is (RSS after the
load - RSS before) / (SCARD a + SCARD b). With --big, Abacus alone also loads two sets of
100M draws below 1e9 (~95M distinct each; Redis would need ~14 GB) and times SINTERCARD.
"""

import argparse
import random
import socket
import statistics
import sys
import threading
import time

BATCH = 1000            # members per SADD, as the issue specifies
CHUNK_COMMANDS = 50     # SADDs per socket write


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS for pid %d" % pid)


from resp import command  # noqa: E402  (bench/resp.py, beside this file)


def sadd_commands(key, values):
    """RESP for SADD key v1 ... v1000, one bytes object per command."""
    kb = key.encode()
    out = []
    for i in range(0, len(values), BATCH):
        part = values[i:i + BATCH]
        head = b"*%d\r\n$4\r\nSADD\r\n$%d\r\n%s\r\n" % (len(part) + 2, len(kb), kb)
        body = "".join(["$%d\r\n%s\r\n" % (len(s), s) for s in map(str, part)])
        out.append(head + body.encode())
    return out


def draws(seed, count, below):
    return random.Random(seed).choices(range(below), k=count)


class Conn:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise RuntimeError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def call_int(self, *args):
        """Sends one command whose reply is an integer; returns it."""
        self.sock.sendall(command(*args))
        line = self.line()
        if not line.startswith(b":"):
            raise RuntimeError("%r -> %r" % (args, line))
        return int(line[1:])

    def timed_int(self, *args):
        start = time.perf_counter()
        value = self.call_int(*args)
        return time.perf_counter() - start, value

    def stream(self, chunks, replies):
        """Writes `chunks` (bytes) from a thread while reading `replies` integer replies.
        Returns (seconds, replies as a list of ints)."""
        values = []
        start = time.perf_counter()
        writer = threading.Thread(target=lambda: [self.sock.sendall(c) for c in chunks])
        writer.start()
        tail = self.buf
        while len(values) < replies:
            data = self.sock.recv(1 << 20)
            if not data:
                raise RuntimeError("connection closed")
            lines = (tail + data).split(b"\r\n")
            tail = lines.pop()
            for line in lines:
                if not line.startswith(b":"):
                    raise RuntimeError("unexpected reply %r" % line[:200])
                values.append(int(line[1:]))
        elapsed = time.perf_counter() - start
        writer.join()
        self.buf = tail
        return elapsed, values


def grouped(commands, per_chunk=CHUNK_COMMANDS):
    return [b"".join(commands[i:i + per_chunk]) for i in range(0, len(commands), per_chunk)]


def load(conn, key, commands):
    seconds, added = conn.stream(grouped(commands), len(commands))
    return seconds, sum(added)


def median_time(conn, runs, *args):
    results = [conn.timed_int(*args) for _ in range(runs)]
    return statistics.median(t for t, _ in results), results[0][1]


def sismember_commands(a_values, count, seed):
    rng = random.Random(seed)
    members = rng.sample(a_values, count // 2)
    others = [rng.randrange(100_000_000) for _ in range(count - count // 2)]
    probes = members + others
    rng.shuffle(probes)
    return [command("SISMEMBER", "a", p) for p in probes]


def run_server(name, port, pid, loads, probes, algebra_runs):
    conn = Conn(port)
    conn.call_int("DBSIZE")
    before = rss_bytes(pid)
    r = {"name": name}
    r["load_s"] = 0.0
    for key, commands in loads:
        seconds, _ = load(conn, key, commands)
        r["load_s"] += seconds
    time.sleep(0.5)
    r["card_a"] = conn.call_int("SCARD", "a")
    r["card_b"] = conn.call_int("SCARD", "b")
    r["rss_per_member"] = (rss_bytes(pid) - before) / (r["card_a"] + r["card_b"])
    r["scard"], _ = median_time(conn, 101, "SCARD", "a")
    r["sintercard"], r["inter"] = median_time(conn, algebra_runs, "SINTERCARD", 2, "a", "b")
    r["sunionstore"], r["union"] = median_time(conn, algebra_runs, "SUNIONSTORE", "u", "a", "b")
    r["sdiffstore"], r["diff"] = median_time(conn, algebra_runs, "SDIFFSTORE", "d", "a", "b")
    seconds, hits = conn.stream(grouped(probes, 1000), len(probes))
    r["sismember_ops"] = len(probes) / seconds
    r["sismember_hits"] = sum(hits)
    print("  %s: loaded in %.1f s, |a|=%d |b|=%d, inter=%d union=%d diff=%d" % (
        name, r["load_s"], r["card_a"], r["card_b"], r["inter"], r["union"], r["diff"]),
        file=sys.stderr, flush=True)
    return r


def fmt_time(seconds):
    if seconds >= 1:
        return "%.2f s" % seconds
    if seconds >= 1e-3:
        return "%.2f ms" % (seconds * 1e3)
    return "%.0f us" % (seconds * 1e6)


def report(redis, abacus):
    rows = [
        ("SCARD a", "scard", fmt_time, True),
        ("SINTERCARD 2 a b", "sintercard", fmt_time, True),
        ("SUNIONSTORE u a b", "sunionstore", fmt_time, True),
        ("SDIFFSTORE d a b", "sdiffstore", fmt_time, True),
        ("SISMEMBER pipelined", "sismember_ops", lambda v: "%.0f ops/s" % v, False),
        ("RSS per member", "rss_per_member", lambda v: "%.2f B" % v, True),
        ("load a and b", "load_s", fmt_time, True),
    ]
    print("%-22s %14s %14s %22s" % ("", "redis", "abacus", "abacus/redis"))
    for label, field, show, lower_is_better in rows:
        rv, av = redis[field], abacus[field]
        ratio = av / rv if rv else float("nan")
        note = ("%.0fx faster" % (1 / ratio)) if lower_is_better and ratio < 1 and field != "rss_per_member" else ""
        if field == "sismember_ops":
            note = "%.2fx the rate" % ratio
        print("%-22s %14s %14s %10.4f %11s" % (label, show(rv), show(av), ratio, note))


def big(port, pid, draws_per_set, below):
    """Abacus only: two sets of `draws_per_set` draws below `below`, streamed (never held in
    memory whole), then SCARD and SINTERCARD."""
    conn = Conn(port)
    before = rss_bytes(pid)
    for key, seed in (("big_a", 3), ("big_b", 4)):
        rng = random.Random(seed)
        start = time.perf_counter()
        remaining, chunks_done = draws_per_set, 0
        while remaining:
            n = min(remaining, 200 * BATCH)
            commands = sadd_commands(key, rng.choices(range(below), k=n))
            conn.stream(grouped(commands), len(commands))
            remaining -= n
            chunks_done += 1
        print("  loaded %s in %.0f s" % (key, time.perf_counter() - start), file=sys.stderr, flush=True)
    card_a, card_b = conn.call_int("SCARD", "big_a"), conn.call_int("SCARD", "big_b")
    per_member = (rss_bytes(pid) - before) / (card_a + card_b)
    seconds, inter = median_time(conn, 5, "SINTERCARD", 2, "big_a", "big_b")
    union_s, union = median_time(conn, 3, "SUNIONSTORE", "big_u", "big_a", "big_b")
    print("\nW6 big (abacus only): two sets of %dM draws below %.0e" % (draws_per_set // 10**6, below))
    print("  |big_a| = %d, |big_b| = %d, RSS per member %.2f B" % (card_a, card_b, per_member))
    print("  SINTERCARD 2 big_a big_b = %d in %s (median of 5; target < 1 s)" % (inter, fmt_time(seconds)))
    print("  SUNIONSTORE big_u big_a big_b = %d in %s (median of 3)" % (union, fmt_time(union_s)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--redis-port", type=int, required=True)
    p.add_argument("--redis-pid", type=int, required=True)
    p.add_argument("--abacus-port", type=int, required=True)
    p.add_argument("--abacus-pid", type=int, required=True)
    p.add_argument("--draws", type=int, default=10_000_000)
    p.add_argument("--below", type=int, default=100_000_000)
    p.add_argument("--probes", type=int, default=1_000_000)
    p.add_argument("--big", action="store_true")
    p.add_argument("--big-draws", type=int, default=100_000_000)
    p.add_argument("--big-below", type=int, default=1_000_000_000)
    args = p.parse_args()

    start = time.perf_counter()
    a_values = draws(1, args.draws, args.below)
    b_values = draws(2, args.draws, args.below)
    loads = [("a", sadd_commands("a", a_values)), ("b", sadd_commands("b", b_values))]
    del b_values
    probes = sismember_commands(a_values, args.probes, 5)
    del a_values
    print("  generated the workload in %.0f s" % (time.perf_counter() - start), file=sys.stderr, flush=True)

    redis = run_server("redis", args.redis_port, args.redis_pid, loads, probes, algebra_runs=1)
    abacus = run_server("abacus", args.abacus_port, args.abacus_pid, loads, probes, algebra_runs=7)
    for field in ("card_a", "card_b", "inter", "union", "diff", "sismember_hits"):
        if redis[field] != abacus[field]:
            sys.exit("MISMATCH %s: redis %d abacus %d" % (field, redis[field], abacus[field]))
    print("\nW6: two sets of %dM draws below %dM (|a| = %d, |b| = %d), SADD batches of %d" % (
        args.draws // 10**6, args.below // 10**6, redis["card_a"], redis["card_b"], BATCH))
    report(redis, abacus)
    if args.big:
        del loads, probes
        big(args.abacus_port, args.abacus_pid, args.big_draws, args.big_below)


if __name__ == "__main__":
    main()
