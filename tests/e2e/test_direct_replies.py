"""Direct replies: a batch that runs entirely on another worker thread's shard gets its
replies written to the socket by that thread (`direct-replies`, see direct.rs). Whichever
thread writes, a client must see every reply once, in request order, whole, in its protocol.

The servers run with two threads and without connection migration, so a connection stays on
the thread it landed on; each test drives keys of both shards, so one of the two is remote
whichever thread that is. INFO stats counts `direct_replies` (batches the shard's thread
answered) and `direct_replies_partial` (those the socket took only in part).
"""

import socket
import threading
import time

import pytest

from helpers import RespClient, encode_command, info_dict, key_on, wait_until

pytestmark = pytest.mark.abacus_only("worker threads and direct replies")


def stats(c):
    d = info_dict(c.execute("INFO", "stats").decode())
    return int(d["direct_replies"]), int(d["direct_replies_partial"])


def incr_both_shards(c, prefix, times, start=0):
    """INCRs a key of each shard `times` times, one command per batch, checking each reply."""
    for shard in (0, 1):
        for i in range(start, start + times):
            assert c.execute("INCR", key_on(shard, prefix)) == i + 1


@pytest.fixture
def srv(server):
    return server.start(["--migrate-connections-after", "0"])


def test_unpipelined_commands_on_both_shards(srv):
    admin = srv.raw()
    before, _ = stats(admin)
    c = srv.raw()
    for shard in (0, 1):
        k = key_on(shard, "unp")
        for i in range(200):
            assert c.execute("INCR", k) == i + 1
        assert c.execute("GET", k) == b"200"
    # One of the two keys is on the other thread's shard: its 201 batches went direct.
    after, _ = stats(admin)
    assert after - before >= 201
    c.close()
    admin.close()


def test_requests_arriving_while_replies_are_in_flight_keep_their_order(srv):
    # One command per write, no reading in between: the next request often arrives before
    # the other thread has replied to the previous one, and replies of the two threads
    # alternate.
    keys = [key_on(0, "order"), key_on(1, "order")]
    s = socket.create_connection((srv.host, srv.port), timeout=20)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    n = 3000
    want = []
    counts = [0, 0]
    sender_error = []

    def send():
        try:
            for i in range(n):
                j = (i * 7 // 3) % 2
                s.sendall(encode_command("INCR", keys[j]))
        except OSError as e:  # reported below
            sender_error.append(e)

    for i in range(n):
        j = (i * 7 // 3) % 2
        counts[j] += 1
        want.append(b":%d\r\n" % counts[j])
    t = threading.Thread(target=send)
    t.start()
    want = b"".join(want)
    got = b""
    while len(got) < len(want):
        chunk = s.recv(1 << 16)
        assert chunk, "connection closed after %d bytes" % len(got)
        got += chunk
    t.join(30)
    assert not sender_error
    assert got == want
    s.close()


def test_a_reply_larger_than_the_socket_buffer(srv):
    admin = srv.raw()
    _, partial_before = stats(admin)
    c = srv.raw(timeout=30)
    size = 24 << 20
    for shard in (0, 1):
        k = key_on(shard, "big")
        value = bytes([65 + shard]) * size
        assert c.execute("SET", k, value) == "OK"
    for shard in (0, 1):
        k = key_on(shard, "big")
        # Not read for a while: the reply (larger than both socket buffers together) cannot
        # all go out while nobody reads, whatever the timing.
        c.send(encode_command("GET", k))
        time.sleep(0.5)
        got = c.read_reply()
        assert len(got) == size and got == bytes([65 + shard]) * size
        # The connection is still in step afterwards.
        assert c.execute("PING") == "PONG"
        assert c.execute("STRLEN", k) == size
    # The remote key's reply cannot fit in one send: its thread sent part of it and the
    # connection's thread the rest.
    _, partial_after = stats(admin)
    assert partial_after > partial_before
    c.close()
    admin.close()


def test_clients_that_stop_reading_or_leave_with_replies_in_flight(srv):
    admin = srv.raw()
    size = 16 << 20
    keys = [key_on(0, "gone"), key_on(1, "gone")]
    for k in keys:
        assert admin.execute("SET", k, "x" * size) == "OK"
    # Leaves at once.
    for _ in range(4):
        c = srv.raw()
        c.send(b"".join(encode_command("GET", k) for k in keys))
        c.close()
    # Stops reading, then is killed: the kill ends the connection although its replies are
    # stuck in a full socket (the client list forgets it before the client reads anything).
    c = srv.raw()
    cid = c.execute("CLIENT", "ID")
    for k in keys:
        c.send(encode_command("GET", k))
    time.sleep(0.3)
    assert admin.execute("CLIENT", "KILL", "ID", str(cid)) == 1
    assert wait_until(lambda: "id=%d " % cid not in admin.execute("CLIENT", "LIST").decode())
    assert c.is_closed()
    # The server is fine and forgets them all.
    assert admin.execute("PING") == "PONG"
    assert wait_until(lambda: len(admin.execute("CLIENT", "LIST").decode().splitlines()) == 1)
    for k in keys:
        assert admin.execute("STRLEN", k) == size
    admin.close()


def test_resp3_and_client_reply_on_both_shards(srv):
    c = srv.raw()
    assert c.execute("HELLO", "3")[b"proto"] == 3
    for shard in (0, 1):
        k = key_on(shard, "r3")
        assert c.execute("HSET", k, "f", "1", "g", "2") == 2
        # A map, not a flat array: the other thread encodes in the connection's protocol.
        assert c.execute("HGETALL", k) == {b"f": b"1", b"g": b"2"}
        assert c.execute("INCRBYFLOAT", k + ":f", "1.5") == b"1.5"
    c.send(encode_command("CLIENT", "REPLY", "OFF"))
    for shard in (0, 1):
        c.send(encode_command("INCR", key_on(shard, "quiet")))
    assert c.no_reply_within(0.3)
    assert c.execute("CLIENT", "REPLY", "ON") == "OK"
    c.send(encode_command("CLIENT", "REPLY", "SKIP"))
    c.send(encode_command("INCR", key_on(0, "quiet")))
    c.send(encode_command("INCR", key_on(1, "quiet")))
    # The first INCR's reply is skipped, the second's is sent: 2 either way.
    assert c.read_reply() == 2
    for shard in (0, 1):
        assert c.execute("GET", key_on(shard, "quiet")) == b"2"
    c.close()


def assert_direct_only_after(s, prefix, n, switch):
    """INCRs on both shards get no direct reply until CONFIG SET `switch`, then some do."""
    admin = s.raw()
    before, _ = stats(admin)
    c = s.raw()
    incr_both_shards(c, prefix, n)
    assert stats(admin)[0] == before
    assert admin.execute("CONFIG", "SET", *switch) == "OK"
    incr_both_shards(c, prefix, 1, start=n)
    assert stats(admin)[0] > before
    c.close()
    admin.close()


def test_direct_replies_can_be_turned_off(srv):
    admin = srv.raw()
    assert admin.execute("CONFIG", "SET", "direct-replies", "no") == "OK"
    assert admin.execute("CONFIG", "GET", "direct-replies") == [b"direct-replies", b"no"]
    admin.close()
    assert_direct_only_after(srv, "off", 50, ("direct-replies", "yes"))


def test_appendfsync_always_replies_come_back_through_the_connection(server):
    s = server.start(["--migrate-connections-after", "0", "--appendonly", "yes", "--appendfsync", "always"])
    # Replies wait for the fsync covering their writes: no shard sends them on its own.
    assert_direct_only_after(s, "always", 30, ("appendfsync", "everysec"))


def test_pipelines_mixing_both_shards_keep_their_order(srv):
    # Batches with keys on both shards: the connection's own shard runs its part first, the
    # other thread writes every reply of the batch, in order.
    admin = srv.raw()
    before, _ = stats(admin)
    c = srv.raw()
    keys = [key_on(i % 2, "mix%d" % i) for i in range(10)]
    model = {k: 0 for k in keys}
    seed = 12345
    for _ in range(200):
        cmds = []
        want = []
        for _ in range(16):
            seed = (seed * 1103515245 + 12345) % (1 << 31)
            k = keys[seed % len(keys)]
            if seed & 0x100:
                model[k] += 1
                cmds.append(("INCR", k))
                want.append(model[k])
            else:
                cmds.append(("GET", k))
                want.append(str(model[k]).encode() if model[k] else None)
        assert c.pipeline(cmds) == want
    # Every batch touched the other thread's shard: almost all went direct (a batch that
    # happened to stay on the connection's own shard does not).
    assert stats(admin)[0] - before >= 150
    c.close()
    admin.close()


def test_a_client_that_shuts_its_side_still_gets_every_reply(srv):
    # `printf 'GET big\r\n' | nc -N`: the request, then EOF on the client's side while the
    # reply, too big for one send, is still going out.
    admin = srv.raw()
    size = 16 << 20
    keys = [key_on(0, "half"), key_on(1, "half")]
    for shard, k in enumerate(keys):
        assert admin.execute("SET", k, bytes([97 + shard]) * size) == "OK"
    for k in keys * 2:
        s = socket.create_connection((srv.host, srv.port), timeout=30)
        s.sendall(encode_command("GET", k))
        s.shutdown(socket.SHUT_WR)
        got = b""
        while True:
            chunk = s.recv(1 << 20)
            if not chunk:
                break
            got += chunk
        s.close()
        header = b"$%d\r\n" % size
        assert got[:len(header)] == header and len(got) == len(header) + size + 2, len(got)
    admin.close()
