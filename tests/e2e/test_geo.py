"""The GEO family end to end: GEOADD, GEOPOS, GEODIST, GEOHASH, GEOSEARCH, GEOSEARCHSTORE,
GEORADIUS, GEORADIUSBYMEMBER and their _RO forms, every option and error, RESP2 and RESP3.

Expected values are Redis 7.0.15's (the file passes with `--target redis`): scores are
52-bit geohashes (a GEO set is a sorted set, so ZSCORE/ZRANGE see them), coordinates are
printed `%.17Lf` trimmed, distances with 4 decimals. `r` is redis-py with its GEO reply
parsing, `c` the exact wire client (helpers.RespClient), `r3` redis-py over RESP3.
"""

import socket

import pytest

from helpers import Err

PALERMO = (13.361389, 38.115556)
CATANIA = (15.087269, 37.502669)
PALERMO_SCORE = 3479099956230698
CATANIA_SCORE = 3479447370796909
PALERMO_POS = [b"13.36138933897018433", b"38.11555639549629859"]
CATANIA_POS = [b"15.08726745843887329", b"37.50266842333162032"]


def wire(host, port, payload, expected):
    """Sends `payload` and reads exactly as many bytes as `expected` has (or until the
    server stops sending): the reply's bytes, for checks of the exact encoding."""
    with socket.create_connection((host, port), timeout=10) as s:
        s.sendall(payload)
        got = b""
        while len(got) < len(expected):
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


def sicily(c):
    assert c.execute("GEOADD", "Sicily", *PALERMO, "Palermo", *CATANIA, "Catania") == 2


# ---------------------------------------------------------------------------
# GEOADD


def test_geoadd_stores_geohash_scores(c):
    sicily(c)
    assert c.execute("TYPE", "Sicily") == "zset"
    assert c.execute("ZSCORE", "Sicily", "Palermo") == b"%d" % PALERMO_SCORE
    assert c.execute("ZRANGE", "Sicily", 0, -1, "WITHSCORES") == [
        b"Palermo", b"%d" % PALERMO_SCORE, b"Catania", b"%d" % CATANIA_SCORE]
    assert c.execute("OBJECT", "ENCODING", "Sicily") == b"listpack"


def test_geoadd_options(c):
    sicily(c)
    # Re-adding: nothing new.
    assert c.execute("GEOADD", "Sicily", *PALERMO, "Palermo") == 0
    # CH counts changed positions too.
    assert c.execute("GEOADD", "Sicily", "CH", 13.0, 38.0, "Palermo", 1, 1, "new") == 2
    # NX: only new members.
    assert c.execute("GEOADD", "Sicily", "NX", 14.0, 38.0, "Palermo", 2, 2, "new2") == 1
    assert c.execute("GEOPOS", "Sicily", "Palermo")[0][0].startswith(b"12.9999")
    # XX: only existing members.
    assert c.execute("GEOADD", "Sicily", "XX", "CH", *PALERMO, "Palermo", 3, 3, "new3") == 1
    assert c.execute("ZSCORE", "Sicily", "new3") is None
    assert c.execute("ZSCORE", "Sicily", "Palermo") == b"%d" % PALERMO_SCORE
    # XX on a missing key creates nothing.
    assert c.execute("GEOADD", "nokey", "XX", 1, 1, "a") == 0
    assert c.execute("EXISTS", "nokey") == 0


def test_geoadd_errors(c):
    assert c.execute("GEOADD", "x", 181, 0, "a") == Err("ERR invalid longitude,latitude pair 181.000000,0.000000")
    assert c.execute("GEOADD", "x", 0, 86, "a") == Err("ERR invalid longitude,latitude pair 0.000000,86.000000")
    assert c.execute("GEOADD", "x", 0, -85.06, "a") == Err("ERR invalid longitude,latitude pair 0.000000,-85.060000")
    assert c.execute("GEOADD", "x", "inf", 1, "a") == Err("ERR invalid longitude,latitude pair inf,1.000000")
    assert c.execute("GEOADD", "x", 0, "abc", "a") == Err("ERR value is not a valid float")
    assert c.execute("GEOADD", "x", "nan", 0, "a") == Err("ERR value is not a valid float")
    assert c.execute("GEOADD", "x", "CH", 0, 0) == Err("ERR syntax error")
    assert c.execute("GEOADD", "x", 1, 2, 3, 4) == Err("ERR syntax error")
    assert c.execute("GEOADD", "x", "NX", "XX", 0, 0, "a") == Err("ERR syntax error")
    assert c.execute("GEOADD", "x", 0, 0) == Err("ERR wrong number of arguments for 'geoadd' command")
    # A bad triple after good ones adds nothing.
    assert c.execute("GEOADD", "x", 1, 1, "a", 200, 0, "b") == Err(
        "ERR invalid longitude,latitude pair 200.000000,0.000000")
    assert c.execute("EXISTS", "x") == 0
    c.execute("SET", "s", "v")
    assert c.execute("GEOADD", "s", 1, 1, "a") == Err("WRONGTYPE Operation against a key holding the wrong kind of value")


def test_geoadd_limits_are_accepted(c):
    assert c.execute("GEOADD", "x", -180, -85.05112878, "sw", 180, 85.05112878, "ne") == 2
    assert c.execute("GEOPOS", "x", "sw") == [[b"-179.99999731779098511", b"-85.05112751263942528"]]
    assert c.execute("GEOHASH", "x", "sw") == [b"00bh0hbj200"]


# ---------------------------------------------------------------------------
# GEOPOS, GEODIST, GEOHASH


def test_geopos(c):
    sicily(c)
    assert c.execute("GEOPOS", "Sicily", "Palermo", "nosuch", "Catania") == [PALERMO_POS, None, CATANIA_POS]
    assert c.execute("GEOPOS", "nokey", "a", "b") == [None, None]
    assert c.execute("GEOPOS", "Sicily") == []
    # The reply's null is a null array in RESP2, as Redis.
    expected = b"*2\r\n*-1\r\n*2\r\n$20\r\n13.36138933897018433\r\n$20\r\n38.11555639549629859\r\n"
    assert wire(c.host, c.port, b"GEOPOS Sicily nosuch Palermo\r\n", expected) == expected


def test_geopos_resp3_doubles(server, r):
    r.geoadd("Sicily", [*PALERMO, "Palermo"])
    expected = b"*2\r\n*2\r\n,13.36138933897018433\r\n,38.11555639549629859\r\n_\r\n"
    # HELLO 3 first; a PING after marks the end of the GEOPOS reply.
    hello = b"*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n"
    with socket.create_connection((server.host, server.port), timeout=10) as s:
        s.sendall(hello + b"GEOPOS Sicily Palermo nosuch\r\nPING\r\n")
        data = b""
        while not data.endswith(b"+PONG\r\n"):
            chunk = s.recv(65536)
            assert chunk, data
            data += chunk
    assert data.endswith(expected + b"+PONG\r\n")


def test_geopos_of_zadd_scores(c):
    # A sorted set written by ZADD answers GEO commands (any score decodes, as Redis).
    c.execute("ZADD", "z", PALERMO_SCORE, "p", 1, "a", 5000000000000000, "b")
    assert c.execute("GEOPOS", "z", "p") == [PALERMO_POS]
    assert c.execute("GEOPOS", "z", "a", "b") == [
        [b"-179.99999731779098511", b"-85.05112497791824921"],
        [b"-127.13859289884567261", b"85.0511287799999991"]]
    assert c.execute("GEOHASH", "z", "a", "b") == [b"00bh0hbj210", b"cpjefghd8p0"]


def test_geodist(c):
    sicily(c)
    assert c.execute("GEODIST", "Sicily", "Palermo", "Catania") == b"166274.1516"
    assert c.execute("GEODIST", "Sicily", "Palermo", "Catania", "m") == b"166274.1516"
    assert c.execute("GEODIST", "Sicily", "Palermo", "Catania", "km") == b"166.2742"
    assert c.execute("GEODIST", "Sicily", "Palermo", "Catania", "KM") == b"166.2742"
    assert c.execute("GEODIST", "Sicily", "Palermo", "Catania", "mi") == b"103.3182"
    assert c.execute("GEODIST", "Sicily", "Palermo", "Catania", "ft") == b"545518.8700"
    assert c.execute("GEODIST", "Sicily", "Palermo", "Palermo") == b"0.0000"
    assert c.execute("GEODIST", "Sicily", "Palermo", "nosuch") is None
    assert c.execute("GEODIST", "nokey", "a", "b") is None
    assert c.execute("GEODIST", "Sicily", "Palermo", "Catania", "yd") == Err(
        "ERR unsupported unit provided. please use M, KM, FT, MI")
    assert c.execute("GEODIST", "Sicily", "Palermo", "Catania", "km", "x") == Err("ERR syntax error")
    # The unit is checked before the key.
    assert c.execute("GEODIST", "nokey", "a", "b", "yd") == Err("ERR unsupported unit provided. please use M, KM, FT, MI")


def test_geodist_redis_py(r):
    r.geoadd("Sicily", [*PALERMO, "Palermo", *CATANIA, "Catania"])
    assert r.geodist("Sicily", "Palermo", "Catania", unit="km") == 166.2742


def test_geohash(c):
    sicily(c)
    assert c.execute("GEOHASH", "Sicily", "Palermo", "Catania", "nosuch") == [b"sqc8b49rny0", b"sqdtr74hyu0", None]
    assert c.execute("GEOHASH", "nokey", "a") == [None]
    c.execute("SET", "s", "v")
    for cmd in (("GEOHASH", "s", "a"), ("GEOPOS", "s", "a"), ("GEODIST", "s", "a", "b")):
        assert c.execute(*cmd) == Err("WRONGTYPE Operation against a key holding the wrong kind of value")


# ---------------------------------------------------------------------------
# GEORADIUS / GEORADIUSBYMEMBER


def test_georadius_options(c):
    sicily(c)
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 200, "km") == [b"Palermo", b"Catania"]
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 100, "km") == [b"Catania"]
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 200, "km", "WITHDIST") == [
        [b"Palermo", b"190.4424"], [b"Catania", b"56.4413"]]
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 200, "km", "WITHCOORD", "WITHHASH", "WITHDIST", "ASC") == [
        [b"Catania", b"56.4413", CATANIA_SCORE, CATANIA_POS],
        [b"Palermo", b"190.4424", PALERMO_SCORE, PALERMO_POS]]
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 200, "km", "DESC") == [b"Palermo", b"Catania"]
    # COUNT implies ASC; COUNT ANY stops at the first found (scan order).
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 200, "km", "COUNT", 1) == [b"Catania"]
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 200, "km", "COUNT", 1, "ANY") == [b"Palermo"]
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 200, "km", "COUNT", 1, "ANY", "ASC") == [b"Palermo"]
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 200, "km", "COUNT", 5) == [b"Catania", b"Palermo"]
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 200000, "m", "WITHDIST", "ASC") == [
        [b"Catania", b"56441.2579"], [b"Palermo", b"190442.4298"]]
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 1, "km") == []
    assert c.execute("GEORADIUS", "nokey", 15, 37, 1, "km") == []
    assert c.execute("GEORADIUS_RO", "Sicily", 15, 37, 200, "km", "ASC") == [b"Catania", b"Palermo"]


def test_georadius_errors(c):
    sicily(c)
    def e(*args):
        return c.execute("GEORADIUS", "Sicily", *args)
    assert e(15, 37, -1, "km") == Err("ERR radius cannot be negative")
    assert e(15, 37, "abc", "km") == Err("ERR need numeric radius")
    assert e(15, 37, 1, "yd") == Err("ERR unsupported unit provided. please use M, KM, FT, MI")
    assert e(200, 37, 1, "km") == Err("ERR invalid longitude,latitude pair 200.000000,37.000000")
    assert e(15, 37, 1, "km", "ANY") == Err("ERR the ANY argument requires COUNT argument")
    assert e(15, 37, 1, "km", "COUNT", 0) == Err("ERR COUNT must be > 0")
    assert e(15, 37, 1, "km", "COUNT", -3) == Err("ERR COUNT must be > 0")
    assert e(15, 37, 1, "km", "COUNT", "x") == Err("ERR value is not an integer or out of range")
    assert e(15, 37, 1, "km", "COUNT") == Err("ERR syntax error")
    assert e(15, 37, 1, "km", "STORE") == Err("ERR syntax error")
    assert e(15, 37, 1, "km", "BOGUS") == Err("ERR syntax error")
    assert e(15, 37, 1, "km", "STORE", "d", "WITHDIST") == Err(
        "ERR STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options")
    assert c.execute("GEORADIUS_RO", "Sicily", 15, 37, 200, "km", "STORE", "d") == Err("ERR syntax error")
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 200) == Err("ERR wrong number of arguments for 'georadius' command")
    c.execute("SET", "s", "v")
    # The type is checked first.
    assert c.execute("GEORADIUS", "s", 1000, 1000, "a", "b") == Err(
        "WRONGTYPE Operation against a key holding the wrong kind of value")


def test_georadius_store(c):
    sicily(c)
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 200, "km", "STORE", "dst") == 2
    assert c.execute("ZRANGE", "dst", 0, -1, "WITHSCORES") == [
        b"Palermo", b"%d" % PALERMO_SCORE, b"Catania", b"%d" % CATANIA_SCORE]
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 200, "km", "STOREDIST", "dst", "COUNT", 1) == 1
    assert c.execute("ZRANGE", "dst", 0, -1, "WITHSCORES") == [b"Catania", b"56.441257870158204"]
    # The last STORE/STOREDIST wins.
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 200, "km", "STORE", "d1", "STOREDIST", "d2") == 2
    assert c.execute("EXISTS", "d1", "d2") == 1
    # Nothing found: the destination is deleted.
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 1, "km", "STORE", "dst") == 0
    assert c.execute("EXISTS", "dst") == 0
    # A missing source deletes it too (and does not parse the radius for BYMEMBER).
    c.execute("SET", "dst", "x")
    assert c.execute("GEORADIUSBYMEMBER", "nokey", "m", "abc", "km", "STORE", "dst") == 0
    assert c.execute("EXISTS", "dst") == 0
    # The destination may be the source.
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 100, "km", "STORE", "Sicily") == 1
    assert c.execute("ZRANGE", "Sicily", 0, -1) == [b"Catania"]


def test_georadius_store_across_shards(c):
    # Destinations on either shard of a --threads 2 server: the STORE key is a key of the
    # command, so the executor checks it out with the source.
    sicily(c)
    for i in range(16):
        dst = "dst%d" % i
        assert c.execute("GEORADIUS", "Sicily", 15, 37, 200, "km", "STORE", dst) == 2
        assert c.execute("ZCARD", dst) == 2
        assert c.execute("GEORADIUSBYMEMBER", "Sicily", "Palermo", 10, "km", "STOREDIST", dst) == 1
        assert c.execute("ZRANGE", dst, 0, -1, "WITHSCORES") == [b"Palermo", b"0"]
        assert c.execute("GEOSEARCHSTORE", dst, "Sicily", "FROMMEMBER", "Catania", "BYRADIUS", 1, "m") == 1


def test_georadius_store_in_transaction(c):
    sicily(c)
    assert c.execute("MULTI") == "OK"
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 200, "km", "STORE", "t1") == "QUEUED"
    assert c.execute("GEORADIUS", "Sicily", 15, 37, 200, "km", "STOREDIST", "t2") == "QUEUED"
    assert c.execute("EXEC") == [2, 2]
    assert c.execute("ZCARD", "t1") == 2


def test_georadiusbymember(c):
    sicily(c)
    assert c.execute("GEORADIUSBYMEMBER", "Sicily", "Palermo", 200, "km", "WITHDIST") == [
        [b"Palermo", b"0.0000"], [b"Catania", b"166.2742"]]
    assert c.execute("GEORADIUSBYMEMBER_RO", "Sicily", "Palermo", 100, "km") == [b"Palermo"]
    assert c.execute("GEORADIUSBYMEMBER", "Sicily", "nosuch", 200, "km") == Err("ERR could not decode requested zset member")
    assert c.execute("GEORADIUSBYMEMBER", "nokey", "nosuch", "abc", "km", "WITHDIST") == []
    assert c.execute("GEORADIUSBYMEMBER_RO", "Sicily", "Palermo", 200, "km", "STORE", "x") == Err("ERR syntax error")


# ---------------------------------------------------------------------------
# GEOSEARCH / GEOSEARCHSTORE


def test_geosearch(c):
    sicily(c)
    assert c.execute("GEOSEARCH", "Sicily", "FROMMEMBER", "Palermo", "BYRADIUS", 200, "km", "WITHDIST") == [
        [b"Palermo", b"0.0000"], [b"Catania", b"166.2742"]]
    assert c.execute("GEOSEARCH", "Sicily", "FROMLONLAT", 15, 37, "BYBOX", 400, 400, "km", "ASC", "WITHCOORD") == [
        [b"Catania", CATANIA_POS], [b"Palermo", PALERMO_POS]]
    # A box narrower than the distance: Palermo is 190 km away but 160 km east-west.
    assert c.execute("GEOSEARCH", "Sicily", "FROMLONLAT", 15, 37, "BYBOX", 200, 400, "km") == [b"Catania"]
    assert c.execute("GEOSEARCH", "Sicily", "FROMLONLAT", 15, 37, "BYBOX", 400, 150, "km") == [b"Catania"]
    assert c.execute("GEOSEARCH", "Sicily", "FROMLONLAT", 15, 37, "BYRADIUS", 200, "km", "COUNT", 1, "DESC",
                     "WITHHASH") == [[b"Palermo", PALERMO_SCORE]]
    assert c.execute("GEOSEARCH", "nokey", "FROMMEMBER", "x", "BYRADIUS", 1, "km") == []


def test_geosearch_errors(c):
    sicily(c)
    def e(*args):
        return c.execute("GEOSEARCH", "Sicily", *args)
    assert e("FROMLONLAT", 15, 37, "BYBOX", 4, 4, "km", "BYRADIUS", 3, "km") == Err("ERR syntax error")
    assert e("FROMLONLAT", 15, 37, "FROMMEMBER", "Palermo", "BYRADIUS", 3, "km") == Err("ERR syntax error")
    assert e("BYRADIUS", 3, "km", "ASC", "WITHDIST") == Err("ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for GEOSEARCH")
    assert c.execute("geosearch", "Sicily", "FROMLONLAT", 15, 37, "ASC", "WITHDIST") == Err(
        "ERR exactly one of BYRADIUS and BYBOX can be specified for geosearch")
    assert e("FROMMEMBER", "nosuch", "BYRADIUS", 3, "km") == Err("ERR could not decode requested zset member")
    assert e("BYRADIUS", -3, "km", "FROMMEMBER", "nosuch") == Err("ERR radius cannot be negative")
    assert e("FROMLONLAT", 15, 37, "BYBOX", -1, 2, "km") == Err("ERR height or width cannot be negative")
    assert e("FROMLONLAT", 15, 37, "BYBOX", "a", 2, "km") == Err("ERR need numeric width")
    assert e("FROMLONLAT", 15, 37, "BYBOX", 1, "b", "km") == Err("ERR need numeric height")
    assert e("FROMLONLAT", 15, 37, "BYBOX", 1, 2, "yd") == Err("ERR unsupported unit provided. please use M, KM, FT, MI")
    assert e("FROMLONLAT", 15, 99, "BYRADIUS", 3, "km") == Err("ERR invalid longitude,latitude pair 15.000000,99.000000")
    assert e("FROMLONLAT", 15, 37, "BYRADIUS", 3, "km", "STORE", "x") == Err("ERR syntax error")
    assert e("FROMLONLAT", 15, 37, "BYRADIUS", 3, "km", "STOREDIST") == Err("ERR syntax error")
    assert e("FROMLONLAT", 15, 37, "BYRADIUS", 3, "km", "ANY") == Err("ERR the ANY argument requires COUNT argument")
    assert c.execute("GEOSEARCH", "Sicily", "BYRADIUS", 3, "km") == Err(
        "ERR wrong number of arguments for 'geosearch' command")
    # On a missing key FROMMEMBER is not looked up, but other arguments are checked.
    assert c.execute("GEOSEARCH", "nokey", "FROMMEMBER", "x", "BYRADIUS", -3, "km") == Err("ERR radius cannot be negative")


def test_geosearchstore(c):
    sicily(c)
    assert c.execute("GEOSEARCHSTORE", "dst", "Sicily", "FROMLONLAT", 15, 37, "BYRADIUS", 300, "km", "STOREDIST") == 2
    assert c.execute("ZRANGE", "dst", 0, -1, "WITHSCORES") == [
        b"Catania", b"56.441257870158204", b"Palermo", b"190.44242984775784"]
    assert c.execute("GEOSEARCHSTORE", "dst", "Sicily", "FROMLONLAT", 15, 37, "BYBOX", 400, 400, "km",
                     "COUNT", 1) == 1
    assert c.execute("ZRANGE", "dst", 0, -1, "WITHSCORES") == [b"Catania", b"%d" % CATANIA_SCORE]
    assert c.execute("GEOSEARCHSTORE", "dst", "Sicily", "FROMLONLAT", 15, 37, "BYRADIUS", 300, "km", "WITHDIST") == Err(
        "ERR GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options")
    assert c.execute("GEOSEARCHSTORE", "dst", "nokey", "FROMLONLAT", 15, 37, "BYRADIUS", 300, "km") == 0
    assert c.execute("EXISTS", "dst") == 0
    c.execute("SET", "s", "v")
    assert c.execute("GEOSEARCHSTORE", "dst", "s", "FROMLONLAT", 15, 37, "BYRADIUS", 300, "km") == Err(
        "WRONGTYPE Operation against a key holding the wrong kind of value")
    # The destination may hold another type: it is replaced.
    assert c.execute("GEOSEARCHSTORE", "s", "Sicily", "FROMLONLAT", 15, 37, "BYRADIUS", 300, "km") == 2
    assert c.execute("TYPE", "s") == "zset"


def test_geosearch_redis_py(r):
    r.geoadd("Sicily", [*PALERMO, "Palermo", *CATANIA, "Catania"])
    assert r.geosearch("Sicily", longitude=15, latitude=37, radius=200, unit="km", sort="ASC",
                       withdist=True) == [[b"Catania", 56.4413], [b"Palermo", 190.4424]]
    assert r.geosearchstore("dst", "Sicily", member="Palermo", radius=10, unit="km") == 1
    assert r.georadius("Sicily", 15, 37, 200, unit="km", sort="DESC") == [b"Palermo", b"Catania"]
    pos = r.geopos("Sicily", "Palermo", "nosuch")
    assert pos[0] == pytest.approx((13.361389, 38.115556), abs=1e-5) and pos[1] is None


def test_resp3_replies(r3):
    r3.geoadd("Sicily", [*PALERMO, "Palermo", *CATANIA, "Catania"])
    assert r3.geodist("Sicily", "Palermo", "Catania") == 166274.1516
    reply = r3.execute_command("GEOSEARCH", "Sicily", "FROMLONLAT", 15, 37, "BYRADIUS", 200, "km", "ASC",
                               "WITHCOORD", "WITHDIST", "WITHHASH")
    assert reply[0][:3] == [b"Catania", b"56.4413", CATANIA_SCORE]
    assert reply[0][3] == [15.087267458438873, 37.50266842333162]


def test_radius_edge_cases(c):
    sicily(c)
    # Radius 0 finds points at the centre's exact position only.
    assert c.execute("GEORADIUSBYMEMBER", "Sicily", "Palermo", 0, "m") == [b"Palermo"]
    # Huge radius: the whole globe, each member once.
    c.execute("GEOADD", "Sicily", -170, -80, "far", 170, 80, "far2")
    assert sorted(c.execute("GEORADIUS", "Sicily", 0, 0, 30000, "km")) == [b"Catania", b"Palermo", b"far", b"far2"]
    assert sorted(c.execute("GEOSEARCH", "Sicily", "FROMLONLAT", 0, 0, "BYRADIUS", "inf", "km")) == [
        b"Catania", b"Palermo", b"far", b"far2"]


def test_command_info_keys(c):
    info = c.execute("COMMAND", "INFO", "georadius", "geosearchstore")
    assert info[0][1] == -6 and info[0][3:6] == [1, 1, 1]
    assert "movablekeys" in info[0][2]
    assert info[1][3:6] == [1, 2, 1]
