"""Replica lag in milliseconds, for bench/repl.sh: every 10 ms a probe SET on the primary,
then GETs on the replica until the value is there; the time from the SET's reply (the write
is acknowledged) to the first GET that sees it is one sample, in ms, written one a line.
Runs until killed (SIGTERM); Redis and Abacus alike (raw RESP, bench/resp.py).

    python3 bench/repl_lag.py PRIMARY_PORT REPLICA_PORT OUT_FILE
"""

import signal
import sys
import time

from resp import Conn, command

primary, replica, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
p, r = Conn(primary), Conn(replica)
stop = False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
key = "repl-lag-probe"
with open(out, "a") as f:
    i = 0
    while not stop:
        i += 1
        value = str(i).encode()
        p.call(("SET", key, value))
        t0 = time.monotonic()
        # Abandon a probe after 10 s (a replica that fell that far behind is reported as 10 s).
        while not stop and r.call(("GET", key))[0] != value and time.monotonic() - t0 < 10:
            time.sleep(0.0002)  # a poll every 0.2 ms: the probe must not take a core itself
        if stop:
            break
        f.write("%.3f\n" % ((time.monotonic() - t0) * 1000))
        f.flush()
        time.sleep(0.01)
