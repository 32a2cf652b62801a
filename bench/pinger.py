#!/usr/bin/env python3
"""Sends a PING every millisecond to a Redis-protocol server and records each round trip.

    pinger.py PORT OUTFILE          runs until SIGTERM/SIGINT, then writes one RTT (us) per line

One PING is outstanding at a time: if a reply takes longer than the period, the next PING is
sent as soon as it arrives (no backlog, so one stall is one long sample, not a queue of them).
The client's own scheduling delay is reported separately (`late_us_max`): on a busy 2-core
machine the pinger itself can be descheduled, which inflates every server's figures alike.
"""
import signal
import socket
import sys
import time

PERIOD_NS = 1_000_000


def main():
    port, out = int(sys.argv[1]), sys.argv[2]
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    rtts, late_max = [], 0
    next_at = time.perf_counter_ns()
    while not stop:
        now = time.perf_counter_ns()
        if now < next_at:
            time.sleep((next_at - now) / 1e9)
            now = time.perf_counter_ns()
        late_max = max(late_max, now - next_at)
        t0 = time.perf_counter_ns()
        s.sendall(b"*1\r\n$4\r\nPING\r\n")
        buf = b""
        while not buf.endswith(b"\r\n"):
            chunk = s.recv(64)
            if not chunk:
                stop.append(1)
                break
            buf += chunk
        rtts.append((time.perf_counter_ns() - t0) // 1000)
        next_at = max(next_at + PERIOD_NS, time.perf_counter_ns())
    with open(out, "w") as f:
        f.write("# late_us_max %d\n" % (late_max // 1000))
        f.write("\n".join(map(str, rtts)) + "\n")


if __name__ == "__main__":
    main()
