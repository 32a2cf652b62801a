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


def load():
    pipe = r.pipeline(transaction=False)
    n = 0
    madd = []
    copy = open("/tmp/w7.copy", "w")
    created = set()
    for i, f, s, d, v in generate():
        key = "I%d:F%d:%s" % (i, f, s)
        if key not in created:
            created.add(key)
            pipe.execute_command("TS.CREATE", key, "LABELS", "instrument", "I%d" % i, "field", "F%d" % f, "source", s)
        madd += [key, T0 + d * DAY_MS, v]
        copy.write("I%d\tF%d\t%s\t%d\t%r\n" % (i, f, s, d, v))
        n += 1
        if len(madd) >= 3000:
            pipe.execute_command("TS.MADD", *madd)
            madd = []
            if len(pipe) >= 50:
                pipe.execute()
    if madd:
        pipe.execute_command("TS.MADD", *madd)
    pipe.execute()
    copy.close()
    psql("DROP TABLE IF EXISTS px; CREATE TABLE px (instrument text, field text, source text, day int, value float8)")
    with open("/tmp/w7.copy") as fh:
        subprocess.run(["psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(pg_port), "-U", pg_user, "-d", "postgres",
                        "-c", "COPY px FROM STDIN"], stdin=fh, check=True)
    psql("CREATE INDEX px_idx ON px (instrument, field, day, source)")
    psql("VACUUM ANALYZE px")
    os.unlink("/tmp/w7.copy")
    return n, len(created)


def ab_request(insts, days):
    d0, d1 = days
    args = ["TS.WATERFALL", T0 + d0 * DAY_MS, T0 + d1 * DAY_MS, "SOURCES", *SOURCES,
            "FILTER", "instrument=(%s)" % ",".join("I%d" % i for i in insts), "field=(%s)" % ",".join("F%d" % f for f in range(FIELDS))]
    t = time.perf_counter()
    reply = r.execute_command(*args)
    return time.perf_counter() - t, reply


def pg_request(insts, days):
    d0, d1 = days
    ranks = " ".join("WHEN '%s' THEN %d" % (s, k) for k, s in enumerate(SOURCES))
    sql = ("SELECT DISTINCT ON (instrument, field, day) instrument, field, day, value FROM px "
           "WHERE instrument IN (%s) AND day BETWEEN %d AND %d "
           "ORDER BY instrument, field, day, CASE source %s END" % (",".join("'I%d'" % i for i in insts), d0, d1, ranks))
    t = time.perf_counter()
    out = psql(sql, "-F", "\t")
    return time.perf_counter() - t, out


def points_of(reply):
    return sum(len(g[2]) for g in reply)


def run(name, insts, days):
    ab, pg = [], []
    for _ in range(ROUNDS):
        ta, reply = ab_request(insts, days)
        tp, out = pg_request(insts, days)
        ab.append(ta)
        pg.append(tp)
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
    print("| %s | %d | %.1f | %.1f | %.1fx |" % (name, points_of(reply), a, p, p / a))


def main():
    t = time.perf_counter()
    n, nseries = load()
    print("loaded %d samples in %d series into both in %.0f s" % (n, nseries, time.perf_counter() - t))
    price = ts_info()
    print("price series: %d samples, %.3f bytes per sample encoded, %.3f with all series overhead"
          % (price["ts_samples"], price["ts_bytes_per_sample"], price["ts_memory_bytes_per_sample"]))
    days_one = DAYS // 2
    print("| request | points | Abacus ms (median of %d) | PostgreSQL ms | PostgreSQL/Abacus |" % ROUNDS)
    print("|---|---|---|---|---|")
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
