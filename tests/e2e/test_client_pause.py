"""CLIENT PAUSE timeout [WRITE|ALL] and CLIENT UNPAUSE (Redis 7.0), against the shared server.

No assertion depends on how fast the server is: a held command is checked to get no reply
for a short while within a pause ten or more times longer, then its reply is awaited.
"""

import pytest

from helpers import Err, RespClient


@pytest.fixture
def conns(server, r):
    made = []

    def make():
        cl = RespClient(server.host, server.port, timeout=20.0)
        made.append(cl)
        return cl

    yield make
    # Whatever a test left, the next one starts unpaused.
    cleanup = RespClient(server.host, server.port, timeout=20.0)
    cleanup("CLIENT", "UNPAUSE")
    cleanup.close()
    for cl in made:
        cl.close()


def test_pause_errors(conns):
    c = conns()
    assert c("CLIENT", "PAUSE", "x") == Err("ERR timeout is not an integer or out of range")
    assert c("CLIENT", "PAUSE", "-1") == Err("ERR timeout is negative")
    assert c("CLIENT", "PAUSE", "100", "FOO") == Err("ERR CLIENT PAUSE mode must be WRITE or ALL")
    assert c("CLIENT", "UNPAUSE") == "OK"


def test_pause_write_holds_writes_until_unpause(conns):
    adm, reader, writer, publisher = conns(), conns(), conns(), conns()
    assert adm("CLIENT", "PAUSE", "30000", "WRITE") == "OK"
    # Reads run.
    assert reader("GET", "pause:k") is None
    # Writes and PUBLISH wait.
    writer.send(b"*3\r\n$3\r\nSET\r\n$7\r\npause:k\r\n$1\r\n1\r\n")
    publisher.send(b"*3\r\n$7\r\nPUBLISH\r\n$7\r\npause:c\r\n$1\r\nm\r\n")
    assert writer.no_reply_within(0.3)
    assert publisher.no_reply_within(0.1)
    # CLIENT UNPAUSE is not a write: it runs, and the held commands go on.
    assert adm("CLIENT", "UNPAUSE") == "OK"
    assert writer.read_reply() == "OK"
    assert publisher.read_reply() == 0
    assert reader("GET", "pause:k") == b"1"


def test_pause_write_holds_exec_of_writes(conns):
    adm, tx = conns(), conns()
    assert tx("MULTI") == "OK"
    assert tx("GET", "pause:k") == "QUEUED"
    assert adm("CLIENT", "PAUSE", "30000", "WRITE") == "OK"
    tx.send(b"*3\r\n$3\r\nSET\r\n$7\r\npause:k\r\n$1\r\n2\r\n")
    assert tx.no_reply_within(0.3)
    assert adm("CLIENT", "UNPAUSE") == "OK"
    assert tx.read_reply() == "QUEUED"
    assert tx("EXEC") == [None, "OK"]


def test_pause_all_holds_every_command_until_the_deadline(conns):
    adm, other = conns(), conns()
    assert adm("CLIENT", "PAUSE", "3000", "ALL") == "OK"
    other.send(b"*1\r\n$4\r\nPING\r\n")
    assert other.no_reply_within(0.3)
    # The pause ends by itself.
    assert other.read_reply() == "PONG"
    assert adm("PING") == "PONG"
