"""Atomicity under concurrent clients. Every loop is bounded by an iteration
count and every thread join has a timeout; nothing here asserts timing."""

import threading

import pytest
import redis

JOIN_TIMEOUT = 60


def run_threads(targets):
    """Run each callable in its own thread; re-raise the first failure."""
    errors = []

    def wrap(fn):
        def inner():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - re-raised below
                errors.append(e)
        return inner

    threads = [threading.Thread(target=wrap(fn), daemon=True) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_TIMEOUT)
        assert not t.is_alive(), "worker thread did not finish in %ss" % JOIN_TIMEOUT
    if errors:
        raise errors[0]


@pytest.fixture
def clients(server, r):
    made = []

    def make():
        cl = server.client(decode_responses=False)
        made.append(cl)
        return cl

    yield make
    for cl in made:
        cl.close()


def test_mset_mget_never_mixed(r, clients):
    nkeys = 50
    keys = ["mk:%d" % i for i in range(nkeys)]
    r.mset({k: "init" for k in keys})
    writes = 400
    stop = threading.Event()

    def writer(tag):
        cl = clients()

        def fn():
            try:
                for i in range(writes):
                    cl.mset({k: "%s-%d" % (tag, i) for k in keys})
            finally:
                stop.set()
        return fn

    def reader():
        cl = clients()

        def fn():
            reads = 0
            while reads < 5000 and (not stop.is_set() or reads < 50):
                vals = cl.mget(keys)
                assert len(set(vals)) == 1, "MGET saw a mix of MSETs: %r" % sorted(set(vals))
                reads += 1
        return fn

    run_threads([writer("A"), writer("B"), reader(), reader()])
    final = r.mget(keys)
    assert len(set(final)) == 1


def test_multi_exec_incr_counters_consistent(r, clients):
    nthreads, per = 4, 250
    done = threading.Event()

    def worker():
        cl = clients()

        def fn():
            for _ in range(per):
                p = cl.pipeline(transaction=True)
                p.incr("ca")
                p.incrby("cb", 2)
                a, b = p.execute()
                assert b == 2 * a
        return fn

    def checker():
        cl = clients()

        def fn():
            for _ in range(3000):
                p = cl.pipeline(transaction=True)
                p.get("ca")
                p.get("cb")
                a, b = p.execute()
                a = int(a or 0)
                b = int(b or 0)
                assert b == 2 * a, "transaction observed half-applied: %d %d" % (a, b)
                if done.is_set():
                    break
        return fn

    workers = [worker() for _ in range(nthreads)]

    def all_workers():
        try:
            run_threads(workers)
        finally:
            done.set()

    run_threads([all_workers, checker()])
    assert int(r.get("ca")) == nthreads * per
    assert int(r.get("cb")) == 2 * nthreads * per


def test_concurrent_incr_no_lost_updates(r, clients):
    nthreads, per = 6, 500

    def worker():
        cl = clients()

        def fn():
            p = cl.pipeline(transaction=False)
            for _ in range(per):
                p.incr("hits")
            res = p.execute()
            assert all(isinstance(x, int) for x in res)
        return fn

    run_threads([worker() for _ in range(nthreads)])
    assert int(r.get("hits")) == nthreads * per


def test_rename_racing(r, clients):
    r.set("ra", "payload")
    iters = 1000
    stop = threading.Event()

    def mover(src, dst):
        cl = clients()

        def fn():
            for _ in range(iters):
                try:
                    cl.rename(src, dst)
                except redis.ResponseError as e:
                    assert str(e) == "no such key", str(e)
        return fn

    def observer():
        cl = clients()

        def fn():
            for _ in range(3000):
                # the value is always under exactly one of the two names
                assert cl.exists("ra", "rb") == 1
                if stop.is_set():
                    break
        return fn

    movers = [mover("ra", "rb"), mover("rb", "ra"), mover("ra", "rb"), mover("rb", "ra")]

    def all_movers():
        try:
            run_threads(movers)
        finally:
            stop.set()

    run_threads([all_movers, observer()])
    assert r.exists("ra", "rb") == 1
    assert (r.get("ra") or r.get("rb")) == b"payload"


def test_renamenx_single_winner(r, clients):
    for round_ in range(20):
        r.delete("dest")
        srcs = ["src:%d:%d" % (round_, i) for i in range(6)]
        r.mset({s: s for s in srcs})
        results = {}

        def worker(s):
            cl = clients()

            def fn():
                results[s] = cl.renamenx(s, "dest")
            return fn

        run_threads([worker(s) for s in srcs])
        winners = [s for s, ok in results.items() if ok]
        assert len(winners) == 1, results
        assert r.get("dest") == winners[0].encode()
        assert r.exists(*srcs) == len(srcs) - 1


def test_setnx_and_getdel_single_winner(r, clients):
    for round_ in range(20):
        key = "lock:%d" % round_
        got = []

        def locker(i):
            cl = clients()

            def fn():
                if cl.setnx(key, i):
                    got.append(i)
            return fn

        run_threads([locker(i) for i in range(6)])
        assert len(got) == 1
        assert r.get(key) == str(got[0]).encode()

        taken = []

        def taker():
            cl = clients()

            def fn():
                v = cl.getdel(key)
                if v is not None:
                    taken.append(v)
            return fn

        run_threads([taker() for _ in range(6)])
        assert taken == [str(got[0]).encode()]


def test_msetnx_all_or_nothing(r, clients):
    for round_ in range(20):
        shared = "shared:%d" % round_
        results = {}

        def worker(i):
            cl = clients()

            def fn():
                mapping = {shared: str(i), "own:%d:%d:a" % (round_, i): str(i),
                           "own:%d:%d:b" % (round_, i): str(i)}
                results[i] = cl.msetnx(mapping)
            return fn

        run_threads([worker(i) for i in range(5)])
        winners = [i for i, ok in results.items() if ok]
        assert len(winners) == 1
        w = winners[0]
        assert r.get(shared) == str(w).encode()
        for i in range(5):
            n = r.exists("own:%d:%d:a" % (round_, i), "own:%d:%d:b" % (round_, i))
            assert n == (2 if i == w else 0)


def test_watch_optimistic_increment(r, clients):
    nthreads, per = 4, 50
    r.set("opt", 0)

    def worker():
        cl = clients()

        def fn():
            for _ in range(per):
                for _attempt in range(1000):
                    with cl.pipeline() as p:
                        try:
                            p.watch("opt")
                            v = int(p.get("opt"))
                            p.multi()
                            p.set("opt", v + 1)
                            p.execute()
                            break
                        except redis.WatchError:
                            continue
                else:
                    raise AssertionError("WATCH retry limit reached")
        return fn

    run_threads([worker() for _ in range(nthreads)])
    assert int(r.get("opt")) == nthreads * per


def test_append_concurrent(r, clients):
    nthreads, per = 4, 250

    def worker(ch):
        cl = clients()

        def fn():
            p = cl.pipeline(transaction=False)
            for _ in range(per):
                p.append("log", ch)
            p.execute()
        return fn

    run_threads([worker(ch) for ch in "abcd"])
    v = r.get("log")
    assert len(v) == nthreads * per
    for ch in b"abcd":
        assert v.count(ch) == per


def test_concurrent_pipelines_replies_in_order(r, clients):
    """Many connections pipeline commands on keys of every shard at once, so the server
    coalesces their cross-shard groups into shared messages (hop.rs): each connection must
    still get exactly its own replies, in its request order."""
    conns = 16
    rounds = 30

    def worker(n):
        c = clients()
        for i in range(rounds):
            p = c.pipeline(transaction=False)
            for k in range(20):
                key = "hop:%d:%d" % (n, k)
                p.set(key, "%d:%d" % (i, k))
                p.incr("hop:ctr:%d:%d" % (n, k))
                p.get(key)
                p.strlen("hop:missing:%d:%d" % (n, k))
            out = p.execute()
            for k in range(20):
                assert out[4 * k] is True
                assert out[4 * k + 1] == i + 1
                assert out[4 * k + 2] == ("%d:%d" % (i, k)).encode()
                assert out[4 * k + 3] == 0

    run_threads([lambda n=n: worker(n) for n in range(conns)])
    assert r.get("hop:ctr:3:7") == b"%d" % rounds
