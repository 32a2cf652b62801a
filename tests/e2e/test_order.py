"""A connection's commands take effect in the order it sent them, as other clients see them.

A writer pipelines `SET a:i r` then `SET b:i r` for a range of i, round after round (r is
the round), with every a:i on one shard and every b:i on the other (of the server's two);
readers pipeline `GET b:i` then `GET a:i`. On a single Redis a reader can never find b:i
at a later round than a:i: the writer wrote a:i first, and the reader read b:i first. The
same must hold on Abacus, whose shards run each batch's parts on different threads.

The run is bounded by counts, not by time: the writer writes a fixed number of rounds and
each reader reads a fixed number of times, so the result does not depend on the machine's
speed (a slow machine only overlaps the two less). Also run with `--target redis`.
"""

import threading

import pytest

from helpers import RespClient, key_on, shard_of

PAIRS = 40          # keys a:i, b:i per round
ROUNDS = 1000        # writer rounds
READS = 500          # pipelines per reader
READERS = 2


def _keys(writer=0):
    a = [key_on(0, "ord%d-a%d" % (writer, i)) for i in range(PAIRS)]
    b = [key_on(1, "ord%d-b%d" % (writer, i)) for i in range(PAIRS)]
    assert all(shard_of(k) == 0 for k in a) and all(shard_of(k) == 1 for k in b)
    return a, b


def _round(v):
    return -1 if v is None else int(v)


def _run_all(threads):
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_pipelined_writes_are_seen_in_order(server, r):
    # Two writers with keys of their own and two readers: connections are dealt to the
    # server's threads in turn, so each shard is the own shard of some writer and reader.
    key_sets = [_keys(w) for w in range(2)]
    errors = []
    violations = []
    reads = [0]

    def writer(a, b):
        try:
            c = RespClient(server.host, server.port)
            for rnd in range(ROUNDS):
                cmds = []
                for i in range(PAIRS):
                    cmds.append(("SET", a[i], rnd))
                    cmds.append(("SET", b[i], rnd))
                assert set(c.pipeline(cmds)) == {"OK"}
            c.close()
        except Exception as e:  # reported by the main thread
            errors.append(e)

    def reader():
        try:
            c = RespClient(server.host, server.port)
            for _ in range(READS):
                cmds = []
                for a, b in key_sets:
                    for i in range(PAIRS):
                        cmds.append(("GET", b[i]))
                        cmds.append(("GET", a[i]))
                replies = iter(c.pipeline(cmds))
                for a, b in key_sets:
                    for i in range(PAIRS):
                        rb, ra = _round(next(replies)), _round(next(replies))
                        if rb > ra:
                            violations.append((b[i], rb, a[i], ra))
                reads[0] += len(cmds) // 2
            c.close()
        except Exception as e:
            errors.append(e)

    _run_all([threading.Thread(target=writer, args=ks) for ks in key_sets]
             + [threading.Thread(target=reader) for _ in range(READERS)])
    assert not errors, errors
    assert violations == [], "%d of %d reads saw b:i newer than a:i, e.g. %r" % (len(violations), reads[0], violations[:5])
    # Each writer's last round is complete.
    for a, b in key_sets:
        assert r.mget(a + b) == [str(ROUNDS - 1).encode()] * (2 * PAIRS)


def test_reads_in_reverse_order_never_go_back(server, r):
    """The writer sets a0, b0, a1, b1, ... (alternating shards) to the round number in one
    pipeline per round; a reader reads them all in reverse order in one pipeline. Each key it
    reads was written before the previous one it read, so its round is never lower."""
    a, b = _keys()
    order = [k for pair in zip(a, b) for k in pair]
    errors = []
    regressions = []

    def writer():
        try:
            c = RespClient(server.host, server.port)
            for rnd in range(ROUNDS):
                assert set(c.pipeline([("SET", k, rnd) for k in order])) == {"OK"}
            c.close()
        except Exception as e:
            errors.append(e)

    def reader():
        try:
            c = RespClient(server.host, server.port)
            backwards = order[::-1]
            for _ in range(READS):
                replies = c.pipeline([("GET", k) for k in backwards])
                rounds = [_round(v) for v in replies]
                for j in range(1, len(rounds)):
                    if rounds[j] < rounds[j - 1]:
                        regressions.append((backwards[j - 1], rounds[j - 1], backwards[j], rounds[j]))
            c.close()
        except Exception as e:
            errors.append(e)

    _run_all([threading.Thread(target=writer)] + [threading.Thread(target=reader) for _ in range(READERS)])
    assert not errors, errors
    assert regressions == [], "%d regressions, e.g. %r" % (len(regressions), regressions[:5])


@pytest.mark.abacus_only("relaxed-batch-order is an Abacus parameter")
def test_relaxed_batch_order_still_answers_in_order(server, r, c):
    """`relaxed-batch-order yes` only gives up the order other clients see: the connection
    still gets every reply, in request order, and sees its own writes."""
    a, b = _keys()
    assert c("CONFIG", "GET", "relaxed-batch-order") == [b"relaxed-batch-order", b"no"]
    assert c("CONFIG", "SET", "relaxed-batch-order", "yes") == "OK"
    try:
        cmds = []
        for i in range(PAIRS):
            cmds += [("SET", a[i], i), ("GET", b[i]), ("SET", b[i], i), ("GET", a[i])]
        replies = c.pipeline(cmds)
        assert replies == [x for i in range(PAIRS) for x in ("OK", None, "OK", str(i).encode())]
    finally:
        assert c("CONFIG", "SET", "relaxed-batch-order", "no") == "OK"
