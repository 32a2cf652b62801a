"""W7 waterfall driver (run by bench/w7.sh): generates instruments x fields x sources of daily
random-walk values, each source covering a different 50-95% of the days, loads them into
Abacus (TS.MADD) and PostgreSQL (COPY into (instrument, field, source, day, value) with the
index a DBA would add), then times the same waterfall request on both: Abacus in one
TS.WATERFALL call, PostgreSQL with its fastest query for the answer (DISTINCT ON over the
index), and checks the two answers are equal. Also prints Abacus's bytes per sample for the
price series and for a regular 1-second counter series.
"""

import os
import random
import socket
import statistics
import subprocess
import sys
import time

import redis

INSTRUMENTS = int(os.environ.get("INSTRUMENTS", 1000))
FIELDS = int(os.environ.get("FIELDS", 40))
DAYS = int(os.environ.get("DAYS", 100))
ROUNDS = int(os.environ.get("ROUNDS", 5))
SOURCES = ["exchange", "vendorA", "vendorB", "internal", "manual"]
DAY_MS = 86_400_000
T0 = 1_700_006_400_000  # a midnight (UTC)

ab_port, pg_port, pg_user = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
r = redis.Redis(port=ab_port)
rnd = random.Random(7)


def psql(sql, *extra):
    return subprocess.run(["psql", "-X", "-q", "-At", "-h", "127.0.0.1", "-p", str(pg_port), "-U", pg_user, "-d", "postgres", *extra, "-c", sql],
                          check=True, capture_output=True, text=True).stdout


def generate():
    """Yields (instrument, field, source, day, value)."""
    for i in range(INSTRUMENTS):
        for f in range(FIELDS):
            price = 100.0
            walk = []
            for d in range(DAYS):
                price = max(1.0, price * (1 + rnd.gauss(0, 0.01)))
                walk.append(round(price, 4))
            for s in SOURCES:
                cover = rnd.uniform(0.5, 0.95)
                for d in range(DAYS):
                    if rnd.random() < cover:
                        # Sources disagree a little, so the waterfall's choice is visible.
                        yield i, f, s, d, round(walk[d] * (1 + 0.001 * SOURCES.index(s)), 4)


def resp(*args):
    """One command as RESP (what `redis-cli --pipe` sends as is)."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def load():
    """Writes the commands as RESP and the rows as COPY text, then loads both at once:
    Abacus through `redis-cli --pipe` (no client round trips), PostgreSQL through COPY."""
    n = 0
    madd = []
    created = set()
    cmds = open("/tmp/w7.resp", "wb")
    copy = open("/tmp/w7.copy", "w")
    for i, f, s, d, v in generate():
        key = "I%d:F%d:%s" % (i, f, s)
        if key not in created:
            created.add(key)
            cmds.write(resp("TS.CREATE", key, "LABELS", "instrument", "I%d" % i, "field", "F%d" % f, "source", s))
        madd += [key, T0 + d * DAY_MS, repr(v)]
        copy.write("I%d\tF%d\t%s\t%d\t%r\n" % (i, f, s, d, v))
        n += 1
        if len(madd) >= 3000:
            cmds.write(resp("TS.MADD", *madd))
            madd = []
    if madd:
        cmds.write(resp("TS.MADD", *madd))
    cmds.close()
    copy.close()
    psql("DROP TABLE IF EXISTS px; CREATE TABLE px (instrument text, field text, source text, day int, value float8)")
    with open("/tmp/w7.copy") as fh:
        pg = subprocess.Popen(["psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(pg_port), "-U", pg_user, "-d", "postgres",
                               "-c", "COPY px FROM STDIN"], stdin=fh)
        with open("/tmp/w7.resp", "rb") as rh:
            out = subprocess.run(["redis-cli", "-p", str(ab_port), "--pipe"], stdin=rh, check=True, capture_output=True, text=True).stdout
        if pg.wait() != 0:
            raise SystemExit("COPY failed")
    if "errors: 0," not in out:
        raise SystemExit("loading Abacus failed: " + out)
    psql("CREATE INDEX px_idx ON px (instrument, field, day, source)")
    psql("VACUUM ANALYZE px")
    os.unlink("/tmp/w7.copy")
    os.unlink("/tmp/w7.resp")
    return n, len(created)


def ab_args(insts, days):
    d0, d1 = days
    return ["TS.WATERFALL", T0 + d0 * DAY_MS, T0 + d1 * DAY_MS, "SOURCES", *SOURCES,
            "FILTER", "instrument=(%s)" % ",".join("I%d" % i for i in insts), "field=(%s)" % ",".join("F%d" % f for f in range(FIELDS))]


def server_cpu_s():
    """The Abacus server's CPU seconds so far (user + system, every thread), from /proc: on a
    shared machine the wall time also counts the time its threads waited for a core."""
    pid = os.environ.get("AB_PID")
    if not pid:
        return 0.0
    with open("/proc/%s/stat" % pid) as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def ab_request(insts, days):
    """Time to the reply's last byte: the command and a PING written at once on a raw socket,
    read until the PONG (no client-side parsing in the figure: redis-py without hiredis
    takes longer to parse a 200,000-point reply than the server takes to compute it)."""
    sock = socket.create_connection(("127.0.0.1", ab_port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    req = resp(*ab_args(insts, days)) + resp("PING")
    t = time.perf_counter()
    sock.sendall(req)
    buf = bytearray()
    while not buf.endswith(b"+PONG\r\n"):
        chunk = sock.recv(1 << 22)
        if not chunk:
            raise SystemExit("connection closed")
        buf += chunk
    elapsed = time.perf_counter() - t
    sock.close()
    return elapsed, len(buf)


def pg_request(insts, days):
    """PostgreSQL's own client timing (psql's \\timing: the query's round trip, rows
    included, without psql's start-up)."""
    d0, d1 = days
    ranks = " ".join("WHEN '%s' THEN %d" % (s, k) for k, s in enumerate(SOURCES))
    sql = ("SELECT DISTINCT ON (instrument, field, day) instrument, field, day, value FROM px "
           "WHERE instrument IN (%s) AND day BETWEEN %d AND %d "
           "ORDER BY instrument, field, day, CASE source %s END" % (",".join("'I%d'" % i for i in insts), d0, d1, ranks))
    t = time.perf_counter()
    out = psql_timed(sql)
    wall = time.perf_counter() - t
    lines = out.splitlines()
    timing = [l for l in lines if l.startswith("Time: ")]
    rows = [l for l in lines if not l.startswith("Time: ")]
    ms = float(timing[-1].split()[1]) if timing else wall * 1000
    return ms / 1000, "\n".join(rows)


def psql_timed(sql):
    return subprocess.run(["psql", "-X", "-q", "-At", "-F", "\t", "-h", "127.0.0.1", "-p", str(pg_port), "-U", pg_user, "-d", "postgres",
                           "-c", "\\timing on", "-c", sql], check=True, capture_output=True, text=True).stdout


def points_of(reply):
    return sum(len(g[2]) for g in reply)


def run(name, insts, days):
    ab, pg = [], []
    cpu = []
    for _ in range(ROUNDS):
        c = server_cpu_s()
        ta, size = ab_request(insts, days)
        cpu.append(server_cpu_s() - c)
        tp, out = pg_request(insts, days)
        ab.append(ta)
        pg.append(tp)
    t = time.perf_counter()
    reply = r.execute_command(*ab_args(insts, days))
    parse = time.perf_counter() - t
    rows = [line.split("\t") for line in out.splitlines()]
    # Same answer: every PostgreSQL row is an Abacus point with the same value.
    got = {}
    for name_, _, pts in reply:
        lab = dict(x.split("=") for x in name_.decode().split(","))
        for t, v in pts:
            got[(lab["instrument"], lab["field"], (int(t) - T0) // DAY_MS)] = float(v)
    want = {(a, b, int(c)): float(v) for a, b, c, v in rows}
    assert got == want, "Abacus and PostgreSQL disagree"
    a, p = statistics.median(ab) * 1000, statistics.median(pg) * 1000
    print("| %s | %d | %d | %.1f | %.0f | %.1f | %.1fx | %.0f |" % (name, points_of(reply), size, a, statistics.median(cpu) * 1000, p, p / a, parse * 1000))


def main():
    t = time.perf_counter()
    n, nseries = load()
    print("loaded %d samples in %d series into both in %.0f s" % (n, nseries, time.perf_counter() - t))
    price = ts_info()
    print("price series: %d samples, %.3f bytes per sample encoded, %.3f with all series overhead"
          % (price["ts_samples"], price["ts_bytes_per_sample"], price["ts_memory_bytes_per_sample"]))
    days_one = DAYS // 2
    print("| request | points | reply bytes | Abacus ms (median of %d) | Abacus server CPU ms | PostgreSQL ms | PostgreSQL/Abacus | redis-py call, ms |" % ROUNDS)
    print("|---|---|---|---|---|---|---|---|")
    per_day = max(1, 200_000 // FIELDS)
    run("%d instruments x %d fields x 1 day" % (min(INSTRUMENTS, per_day), FIELDS), range(min(INSTRUMENTS, per_day)), (days_one, days_one))
    n10 = min(INSTRUMENTS, per_day // 10)
    run("%d instruments x %d fields x 10 days" % (n10, FIELDS), range(n10), (days_one, days_one + 9))
    # Bytes per sample: a regular 1-second counter.
    r.execute_command("TS.CREATE", "counter")
    pipe = r.pipeline(transaction=False)
    for k in range(0, 100_000, 1000):
        args = []
        for j in range(k, k + 1000):
            args += ["counter", T0 + j * 1000, j]
        pipe.execute_command("TS.MADD", *args)
    pipe.execute()
    both = ts_info()
    n = both["ts_samples"] - price["ts_samples"]
    print("1-second counter: %d samples, %.3f bytes per sample encoded, %.3f with series overhead"
          % (n, (both["ts_sample_bytes"] - price["ts_sample_bytes"]) / n, (both["ts_memory_bytes"] - price["ts_memory_bytes"]) / n))


def ts_info():
    return {k: float(v) for k, v in r.info("timeseries").items()}


main()
