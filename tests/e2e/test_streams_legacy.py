"""RESTORE of a stream written by Redis 5/6 (RDB type 15, `STREAM_LISTPACKS`): what Redis 7.0
derives for such a stream, compared with the real redis-server 7.0.

A Redis 5/6 payload has no first ID, largest deleted ID, entries-added count, nor each group's
entries-read. Redis 7.0 takes entries-added as the length and estimates each group's
entries-read from where its last delivered ID sits (`streamEstimateDistanceFromFirstEverEntry`):
exact at or before the first entry and at the last ID, unknown (lag nil) elsewhere.

No Redis 5/6 is at hand, so the payloads are made from Redis 7.0's own DUMP (type 19) by
dropping the fields Redis 5/6 did not write, with the RDB version of Redis 6.2 (9) and the
payload's CRC-64 recomputed: the same bytes a Redis 6.2 DUMP of that stream gives. Both
servers RESTORE the same payload and must report the same XINFO STREAM FULL.
"""

import pytest

from test_differential import redis_and_abacus, _client, _run

pytestmark = pytest.mark.abacus_only("compares with its own redis-server peer")

STREAM_V1, STREAM_V2 = 15, 19
RDB_VERSION_6_2 = 9


def crc64(data):
    """Redis's CRC-64 (Jones polynomial, reflected, initial value 0), as DUMP's footer."""
    poly = 0x95AC9329AC4BC9B5  # 0xad93d23594c935a9 reflected
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
    return crc


class Reader:
    """Walks an RDB object body, keeping the raw bytes of what it reads."""

    def __init__(self, b):
        self.b, self.i = b, 0

    def take(self, n):
        out = self.b[self.i:self.i + n]
        assert len(out) == n, "payload ends early"
        self.i += n
        return out

    def length(self):
        """(value, raw bytes) of an RDB length; value None for a string's special encoding
        (then the second item is the encoding's number)."""
        start = self.i
        first = self.take(1)[0]
        kind = first >> 6
        if kind == 0:
            return first & 0x3F, self.b[start:self.i]
        if kind == 1:
            return ((first & 0x3F) << 8) | self.take(1)[0], self.b[start:self.i]
        if first == 0x80:
            return int.from_bytes(self.take(4), "big"), self.b[start:self.i]
        if first == 0x81:
            return int.from_bytes(self.take(8), "big"), self.b[start:self.i]
        return None, first & 0x3F

    def string(self):
        """Raw bytes of an RDB string (plain, integer-encoded or LZF), not decoded."""
        start = self.i
        n, enc = self.length()
        if n is not None:
            self.take(n)
        elif enc in (0, 1, 2):
            self.take(1 << enc)
        elif enc == 3:
            clen, _ = self.length()
            self.length()
            self.take(clen)
        else:
            raise AssertionError("unknown string encoding %d" % enc)
        return self.b[start:self.i]

    def raw_length(self):
        return self.length()[1]


def to_redis6_payload(dump):
    """A Redis 7.0 stream DUMP (type 19) as Redis 6.2 would have written it (type 15)."""
    assert dump[0] == STREAM_V2, "not a Redis 7.0 stream payload: type %d" % dump[0]
    r = Reader(dump[:-10])
    r.take(1)
    out = bytearray([STREAM_V1])
    nodes, raw = r.length()
    out += raw
    for _ in range(nodes):
        out += r.string() + r.string()
    out += r.raw_length()                        # length
    out += r.raw_length() + r.raw_length()       # last ID
    for _ in range(5):                           # first ID, max deleted ID, entries added
        r.length()
    groups, raw = r.length()
    out += raw
    for _ in range(groups):
        out += r.string()                        # name
        out += r.raw_length() + r.raw_length()   # last delivered ID
        r.length()                               # entries read: not in Redis 6
        pel, raw = r.length()
        out += raw
        for _ in range(pel):
            out += r.take(16) + r.take(8) + r.raw_length()
        consumers, raw = r.length()
        out += raw
        for _ in range(consumers):
            out += r.string() + r.take(8)        # name, seen time
            n, raw = r.length()
            out += raw + r.take(16 * n)
    assert r.i == len(r.b), "unread bytes in the payload"
    out += RDB_VERSION_6_2.to_bytes(2, "little")
    out += crc64(bytes(out)).to_bytes(8, "little")
    return bytes(out)


def test_crc64_matches_redis():
    # Redis's crc64.c test vector.
    assert crc64(b"123456789") == 0xE9C6D914C4B8D9CA


# Each scenario builds a stream on Redis 7.0 (the payload's source).
SCENARIOS = {
    "groups_everywhere": [
        ["XADD", "src", "1-1", "f", "v1"], ["XADD", "src", "2-1", "f", "v2"],
        ["XADD", "src", "3-1", "f", "v3"], ["XADD", "src", "4-1", "f", "v4"],
        ["XADD", "src", "5-1", "f", "v5"],
        ["XGROUP", "CREATE", "src", "before", "0"],
        ["XGROUP", "CREATE", "src", "first", "1-1"],
        ["XGROUP", "CREATE", "src", "middle", "3-1"],
        ["XGROUP", "CREATE", "src", "last", "$"],
        ["XGROUP", "CREATE", "src", "between", "2-5"],
    ],
    "deleted_and_trimmed": [
        ["XADD", "src", "1-1", "f", "v1"], ["XADD", "src", "2-1", "f", "v2"],
        ["XADD", "src", "3-1", "f", "v3"], ["XADD", "src", "4-1", "f", "v4"],
        ["XADD", "src", "5-1", "f", "v5"], ["XADD", "src", "6-1", "f", "v6"],
        ["XDEL", "src", "1-1"], ["XDEL", "src", "4-1"], ["XTRIM", "src", "MINID", "3-0"],
        ["XGROUP", "CREATE", "src", "before", "0"],
        ["XGROUP", "CREATE", "src", "first", "3-1"],
        ["XGROUP", "CREATE", "src", "gap", "4-1"],
        ["XGROUP", "CREATE", "src", "last", "6-1"],
    ],
    "pending_and_consumers": [
        ["XADD", "src", "1-1", "a", "1", "b", "2"], ["XADD", "src", "2-1", "a", "3", "b", "4"],
        ["XADD", "src", "3-1", "other", "x"],
        ["XGROUP", "CREATE", "src", "g", "0"],
        ["XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "src", ">"],
        ["XREADGROUP", "GROUP", "g", "bob", "COUNT", "1", "STREAMS", "src", ">"],
        ["XACK", "src", "g", "1-1"],
        ["XGROUP", "CREATE", "src", "idle", "0"],
    ],
    "emptied": [
        ["XADD", "src", "1-1", "f", "v1"], ["XADD", "src", "2-1", "f", "v2"],
        ["XDEL", "src", "1-1", "2-1"],
        ["XGROUP", "CREATE", "src", "at_last", "$"],
        ["XGROUP", "CREATE", "src", "before", "0"],
    ],
    "many_entries": [["XADD", "src", "%d-0" % i, "field", "value-%d" % i] for i in range(1, 301)]
    + [["XGROUP", "CREATE", "src", "g", "150-0"], ["XGROUP", "CREATE", "src", "h", "0"]],
}


def without_rax_nodes(info):
    """XINFO STREAM FULL without `radix-tree-nodes`: the inner nodes of Redis's radix tree,
    which Abacus (no radix tree) estimates; a 300-entry stream restored shows 8 in Redis and
    the estimate 4 whatever the payload's version, so it is not what this test is about."""
    if not isinstance(info, list):
        return info
    out = list(info)
    for i in range(0, len(out) - 1, 2):
        if out[i] == b"radix-tree-nodes":
            out[i + 1] = None
    return out


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_restore_of_a_redis6_stream_matches_redis7(name):
    with redis_and_abacus() as (rs, ab):
        cr, ca = _client(rs), _client(ab)
        for cmd in SCENARIOS[name]:
            cr.execute_command(*cmd)
        payload = to_redis6_payload(cr.execute_command("DUMP", "src"))
        assert payload[0] == STREAM_V1
        replies = []
        for c in (cr, ca):
            assert _run(c, ["RESTORE", "old", "0", payload]) == b"OK"
            replies.append((without_rax_nodes(_run(c, ["XINFO", "STREAM", "old", "FULL"])), _run(c, ["XINFO", "GROUPS", "old"]),
                            _run(c, ["XRANGE", "old", "-", "+"])))
        assert replies[1] == replies[0], "%s: Abacus %r\n  Redis %r" % (name, replies[1], replies[0])
