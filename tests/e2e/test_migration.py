"""Connection migration: a client whose commands all go to another worker thread's shard
moves to that thread (`migrate-connections-after`). Whatever thread serves it, a client must
see the same connection: id, name, database, protocol, pending input, WATCH and kill.

The servers here run with two threads, so a key's shard is its Redis Cluster slot mod 2
(binascii.crc_hqx is the CRC-16/XMODEM that Redis Cluster uses). A new connection lands on
either thread, so each test drives one key of each shard: whichever thread the connection
starts on, one of the two runs is remote and moves it.
"""

import binascii
import socket
import threading
import time

import pytest

from helpers import Err, RespClient, encode_command, info_dict, key_on, wait_until

pytestmark = pytest.mark.abacus_only("worker threads and connection migration")

AFTER = 8


def migrated(c):
    return int(info_dict(c.execute("INFO", "stats").decode())["migrated_connections"])


@pytest.fixture
def srv(server):
    return server.start(["--migrate-connections-after", str(AFTER)])


def test_key_shards_match_the_server(srv):
    # The test's idea of a key's shard is the server's: CLUSTER KEYSLOT is not there, but
    # Redis's reference values are (see shard.rs).
    assert binascii.crc_hqx(b"foo", 0) % 16384 == 12182
    assert binascii.crc_hqx(b"bar", 0) % 16384 == 5061


def test_a_client_of_one_shard_moves_and_keeps_its_state(srv):
    admin = srv.raw()
    before = migrated(admin)
    c = srv.raw()
    assert c.execute("HELLO", "3", "SETNAME", "mover")[b"proto"] == 3
    assert c.execute("SELECT", "3") == "OK"
    cid = c.execute("CLIENT", "ID")
    for shard in (0, 1):
        k = key_on(shard, "mig")
        for i in range(AFTER * 3):
            assert c.execute("INCR", k) == i + 1
    assert migrated(admin) >= before + 1
    # Same client, same name, same database, still RESP3 (a map, not a flat array).
    assert c.execute("CLIENT", "ID") == cid
    assert c.execute("CLIENT", "GETNAME") == b"mover"
    info = c.execute("CLIENT", "INFO").decode()
    assert " db=3 " in info and " resp=3" in info
    assert isinstance(c.execute("HELLO"), dict)
    for shard in (0, 1):
        assert c.execute("GET", key_on(shard, "mig")) == str(AFTER * 3).encode()
    assert admin.execute("SELECT", "3") == "OK"
    assert admin.execute("GET", key_on(0, "mig")) == str(AFTER * 3).encode()
    ids = [line.split()[0] for line in admin.execute("CLIENT", "LIST").decode().splitlines()]
    assert ids.count("id=%d" % cid) == 1
    c.close()
    # Closing a moved connection forgets the client (on the thread it moved to).
    assert wait_until(lambda: "id=%d " % cid not in admin.execute("CLIENT", "LIST").decode())
    admin.close()


def test_a_partial_command_moves_with_the_connection(srv):
    admin = srv.raw()
    before = migrated(admin)
    s = socket.create_connection((srv.host, srv.port), timeout=10)
    for shard in (0, 1):
        k = key_on(shard, "partial")
        # The run of this key starts in a batch of its own (a run must outlast the batch
        # it began in before it moves the connection).
        s.sendall(encode_command("INCR", k))
        assert s.recv(100) == b":1\r\n"
        whole = b"".join(encode_command("INCR", k) for _ in range(AFTER * 2))
        last = encode_command("INCR", k)
        # Every whole command runs (and may move the connection); the tail of the last one
        # arrives afterwards, wherever the connection is by then.
        s.sendall(whole + last[:7])
        time.sleep(0.3)
        s.sendall(last[7:])
        want = b"".join(b":%d\r\n" % (i + 2) for i in range(AFTER * 2 + 1))
        got = b""
        while len(got) < len(want):
            chunk = s.recv(65536)
            assert chunk, "connection closed after %r" % got
            got += chunk
        assert got == want
    s.close()
    assert migrated(admin) >= before + 1
    admin.close()


def test_client_kill_reaches_a_moved_connection(srv):
    admin = srv.raw()
    before = migrated(admin)
    c = srv.raw()
    cid = c.execute("CLIENT", "ID")
    for shard in (0, 1):
        for _ in range(AFTER * 2):
            c.execute("SET", key_on(shard, "kill"), "v")
    assert migrated(admin) >= before + 1
    assert admin.execute("CLIENT", "KILL", "ID", str(cid)) == 1
    assert c.is_closed()
    assert "id=%d " % cid not in admin.execute("CLIENT", "LIST").decode()
    admin.close()


def test_watch_keeps_its_meaning_however_many_commands_follow(srv):
    c = srv.raw()
    other = srv.raw()
    watched = key_on(0, "w")
    busy = key_on(1, "w")
    c.execute("SET", watched, "0")
    assert c.execute("WATCH", watched) == "OK"
    for _ in range(AFTER * 4):
        c.execute("GET", busy)
    other.execute("SET", watched, "changed")
    assert c.execute("MULTI") == "OK"
    assert c.execute("SET", watched, "mine") == "QUEUED"
    assert c.execute("EXEC") is None
    assert c.execute("GET", watched) == b"changed"
    # And an untouched WATCH still lets EXEC through.
    assert c.execute("WATCH", watched) == "OK"
    for _ in range(AFTER * 4):
        c.execute("GET", busy)
    assert c.execute("MULTI") == "OK"
    assert c.execute("SET", watched, "mine") == "QUEUED"
    assert c.execute("EXEC") == ["OK"]
    c.close()
    other.close()


def test_random_keys_do_not_move_a_connection(server):
    s = server.start([])  # the default threshold, 256
    c = s.raw()
    before = migrated(c)
    cmds = [("SET", "rnd:%d" % i, "v") for i in range(3000)]
    for i in range(0, len(cmds), 100):
        assert c.pipeline(cmds[i:i + 100]) == ["OK"] * 100
    assert migrated(c) == before
    c.close()


def test_migration_can_be_turned_off(srv):
    admin = srv.raw()
    assert admin.execute("CONFIG", "SET", "migrate-connections-after", "0") == "OK"
    assert admin.execute("CONFIG", "GET", "migrate-connections-after") == [b"migrate-connections-after", b"0"]
    before = migrated(admin)
    c = srv.raw()
    for shard in (0, 1):
        for _ in range(AFTER * 3):
            c.execute("INCR", key_on(shard, "off"))
    assert migrated(admin) == before
    assert admin.execute("CONFIG", "SET", "migrate-connections-after", "-1") == Err(
        "ERR CONFIG SET failed (possibly related to argument 'migrate-connections-after') - "
        "argument must be between 0 and 2147483647 inclusive")
    c.close()
    admin.close()


def test_concurrent_pipelined_clients_of_one_hot_key_lose_nothing(srv):
    hot = key_on(1, "hot")
    nclients, batches, per = 8, 30, 50
    errors = []

    def client():
        try:
            c = RespClient(srv.host, srv.port)
            for _ in range(batches):
                replies = c.pipeline([("INCR", hot)] * per)
                assert all(isinstance(r, int) for r in replies), replies
            c.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=client) for _ in range(nclients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    admin = srv.raw()
    assert admin.execute("GET", hot) == str(nclients * batches * per).encode()
    admin.close()


def test_input_arriving_while_the_connection_moves_is_not_lost(srv):
    # A writer that never waits for replies: commands reach the socket before, during and
    # after the move, and every one of them must run once, in order.
    admin = srv.raw()
    # The move needs the remote key's commands to arrive in more than one read; a worker
    # thread descheduled for the whole run (a loaded machine) reads them all at once and
    # the connection never moves. Every attempt must keep every command, in order; one of
    # three must see the move.
    for attempt in range(3):
        before = migrated(admin)
        stream_with_a_slow_writer(srv, "stream%d" % attempt)
        if migrated(admin) >= before + 1:
            break
    else:
        pytest.fail("the connection never moved in three attempts")
    admin.close()


def stream_with_a_slow_writer(srv, name):
    s = socket.create_connection((srv.host, srv.port), timeout=20)
    keys = [key_on(0, name), key_on(1, name)]
    per_key = AFTER * 40
    chunks = []
    for k in keys:
        for start in range(0, per_key, 5):
            chunks.append(b"".join(encode_command("INCR", k) for _ in range(5)))
    received = []
    total = 2 * per_key

    def reader():
        buf = b""
        while buf.count(b"\r\n") < total:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        received.append(buf)

    t = threading.Thread(target=reader)
    t.start()
    for c in chunks:
        s.sendall(c)
        time.sleep(0.0005)
    t.join(30)
    s.close()
    want = b"".join(b":%d\r\n" % (i + 1) for i in range(per_key)) * 2
    assert received and received[0] == want
