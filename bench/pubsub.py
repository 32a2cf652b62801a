#!/usr/bin/env python3
"""Pub/sub fan-out: one publisher, SUBSCRIBERS subscribers (one connection each) on one
channel; messages delivered per second, Redis and Abacus side by side.

Called by bench/pubsub.sh, which starts the servers. Subscribers are spread over READERS
processes, each reading its sockets with epoll and counting bytes (every message has the
same length, so bytes tell messages; parsing 10M messages a second in Python would make the
readers the bottleneck). The publisher pipelines PUBLISH in batches of PIPELINE and checks
that each reached every subscriber. The clock runs from the first PUBLISH until every
subscriber has received every message. Also printed: each server's CPU time (user + system,
from /proc) per 1,000 deliveries, which on a busy machine says more than the rate. Rounds
alternate between the servers; the medians are printed.
"""

import argparse
import multiprocessing
import os
import select
import socket
import statistics
import time

from resp import Conn, command  # noqa: E402  (bench/resp.py, beside this file)

CHANNEL = b"bench:fanout"
PAYLOAD = b"p" * 16


def message_len():
    return len(b"*3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(CHANNEL), CHANNEL, len(PAYLOAD), PAYLOAD))


def reader(port, n, messages, ready, go, out):
    socks = []
    confirm = len(b"*3\r\n$9\r\nsubscribe\r\n$%d\r\n%s\r\n:1\r\n" % (len(CHANNEL), CHANNEL))
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(command("SUBSCRIBE", CHANNEL))
        socks.append(s)
    for s in socks:
        got = b""
        while len(got) < confirm:
            got += s.recv(confirm - len(got))
        s.setblocking(False)
    ep = select.epoll()
    by_fd = {s.fileno(): s for s in socks}
    for fd in by_fd:
        ep.register(fd, select.EPOLLIN)
    ready.put(1)
    go.wait()
    remaining = n * messages * message_len()
    while remaining > 0:
        for fd, _ in ep.poll(5):
            try:
                data = by_fd[fd].recv(1 << 20)
            except BlockingIOError:
                continue
            if not data:
                raise ConnectionError("a subscriber was disconnected")
            remaining -= len(data)
    out.put(time.monotonic())
    for s in socks:
        s.close()


def cpu_seconds(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_pid(port):
    info = Conn(port).call(("INFO", "server"))[0].decode()
    return int(info.split("process_id:")[1].split()[0])


def run(port, subscribers, readers, messages, pipeline):
    ready, out = multiprocessing.Queue(), multiprocessing.Queue()
    go = multiprocessing.Event()
    per = [subscribers // readers + (1 if i < subscribers % readers else 0) for i in range(readers)]
    procs = [multiprocessing.Process(target=reader, args=(port, n, messages, ready, go, out)) for n in per]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=120)
    pub = Conn(port)
    while int(pub.call(("PUBSUB", "NUMSUB", CHANNEL))[0][1]) != subscribers:
        time.sleep(0.01)
    batch = command("PUBLISH", CHANNEL, PAYLOAD) * pipeline
    pid = server_pid(port)
    go.set()
    cpu0 = cpu_seconds(pid)
    start = time.monotonic()
    sent = 0
    while sent < messages:
        k = min(pipeline, messages - sent)
        pub.send(batch if k == pipeline else command("PUBLISH", CHANNEL, PAYLOAD) * k)
        for _ in range(k):
            receivers = int(pub.reply())
            assert receivers == subscribers, "PUBLISH reached %d of %d subscribers" % (receivers, subscribers)
        sent += k
    published = time.monotonic()
    end = max(out.get(timeout=300) for _ in procs)
    cpu = cpu_seconds(pid) - cpu0
    for p in procs:
        p.join()
    deliveries = messages * subscribers
    return deliveries / (end - start), messages / (published - start), cpu * 1e6 / deliveries * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis-port", type=int, required=True)
    ap.add_argument("--abacus-port", type=int, required=True)
    ap.add_argument("--subscribers", type=int, default=1000)
    ap.add_argument("--readers", type=int, default=2, help="reader processes")
    ap.add_argument("--messages", type=int, default=1500, help="messages published per round")
    ap.add_argument("--pipeline", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    print("%d subscribers (one connection each, %d reader processes), %d messages of %d bytes per "
          "round, PUBLISH pipelined by %d, %d rounds" % (a.subscribers, a.readers, a.messages,
                                                         message_len(), a.pipeline, a.rounds))
    results = {"redis": [], "abacus": []}
    for _ in range(a.rounds):
        for name, port in (("redis", a.redis_port), ("abacus", a.abacus_port)):
            results[name].append(run(port, a.subscribers, a.readers, a.messages, a.pipeline))
    med = {}
    for name, rs in results.items():
        delivered = statistics.median(r[0] for r in rs)
        published = statistics.median(r[1] for r in rs)
        cpu = statistics.median(r[2] for r in rs)
        med[name] = (delivered, cpu)
        print("%-7s %12.0f messages delivered/s  (%.0f PUBLISH/s; server CPU %.0f us per 1,000 "
              "deliveries; rounds: %s)" % (name, delivered, published, cpu, ", ".join("%.0f" % r[0] for r in rs)))
    print("abacus/redis: %.2fx messages delivered/s, %.2fx server CPU per delivery"
          % (med["abacus"][0] / med["redis"][0], med["abacus"][1] / med["redis"][1]))


if __name__ == "__main__":
    main()
