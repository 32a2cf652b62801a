"""WATCH against the real Redis: which writes abort a transaction, command by command.

Redis raises a watched key's flag only where a command actually modified it (its
`signalModifiedKey` call sites): SADD of an existing member, SREM of a missing one, PFADD
that changes no register, SET NX of an existing key, EXPIRE NX of a key with a TTL... leave
WATCH alone; STORE commands (SINTERSTORE, PFMERGE, COPY...) signal their destination, never
their sources. Each case below runs on a Redis and an Abacus server: set-up commands, then
on the main connection `WATCH key`, on a second connection the write, and on the main one
`MULTI; PING; EXEC`. The write's reply and EXEC's outcome (run or aborted) must be equal.
A case is run once per key it names, watching that key alone, and, when it names several
keys, twice: with keys on different shards (the multi-shard path, which checks keys out)
and with keys under one hash tag (one shard).

`test_every_write_command_is_covered` asks the server for its write commands (COMMAND
INFO) and fails if one has no case here, so a new write command needs one.
"""

import pytest

from conftest import ServerProcess
from helpers import key_on
from test_differential import _client, _run, redis_and_abacus

pytestmark = pytest.mark.abacus_only("starts its own redis-server and abacus and compares them")

# Placeholders A, B, C stand for keys; SPREAD puts them on alternating shards (of two),
# TAGGED on one.
SPREAD = {"A": key_on(0, "wa"), "B": key_on(1, "wb"), "C": key_on(0, "wc")}
TAGGED = {"A": "{w}a", "B": "{w}b", "C": "{w}c"}

FUTURE_S = 4102444800  # 2100-01-01: far away, the same on both servers

# DUMP of the string "v" as Redis 7.0 writes it (RDB version 10 and its CRC64).
DUMP_V = b"\x00\x01v\n\x00\x91\x08\xce\xb2\x198\x8a\xce"

# (set-up commands, the write). Every write command of the table has at least one case
# where it changes its key and, where it can, one where it does not.
CASES = [
    # strings
    ([], ["SET", "A", "v"]),
    ([["SET", "A", "v"]], ["SET", "A", "v"]),
    ([["SET", "A", "v"]], ["SET", "A", "w", "NX"]),
    ([], ["SET", "A", "w", "NX"]),
    ([], ["SET", "A", "w", "XX"]),
    ([["SET", "A", "v"]], ["SET", "A", "w", "XX", "GET"]),
    ([["SET", "A", "v"]], ["SET", "A", "w", "NX", "GET"]),
    ([["SET", "A", "v", "EX", "1000"]], ["SET", "A", "w", "KEEPTTL"]),
    ([["SET", "A", "v"]], ["SETNX", "A", "w"]),
    ([], ["SETNX", "A", "w"]),
    ([], ["SETEX", "A", "1000", "v"]),
    ([], ["PSETEX", "A", "1000000", "v"]),
    ([["SET", "A", "v"]], ["GETSET", "A", "v"]),
    ([["SET", "A", "v"]], ["GETDEL", "A"]),
    ([], ["GETDEL", "A"]),
    ([["SET", "A", "v"]], ["GETEX", "A"]),
    ([["SET", "A", "v"]], ["GETEX", "A", "EX", "1000"]),
    ([["SET", "A", "v"]], ["GETEX", "A", "EXAT", str(FUTURE_S)]),
    ([["SET", "A", "v"]], ["GETEX", "A", "PERSIST"]),
    ([["SET", "A", "v", "EX", "1000"]], ["GETEX", "A", "PERSIST"]),
    ([], ["GETEX", "A", "EX", "1000"]),
    ([], ["MSET", "A", "1", "B", "2"]),
    ([["SET", "B", "v"]], ["MSETNX", "A", "1", "B", "2"]),
    ([], ["MSETNX", "A", "1", "B", "2"]),
    ([["SET", "A", "v"]], ["APPEND", "A", ""]),
    ([], ["APPEND", "A", "x"]),
    ([["SET", "A", "v"]], ["SETRANGE", "A", "0", ""]),
    ([], ["SETRANGE", "A", "0", ""]),
    ([["SET", "A", "v"]], ["SETRANGE", "A", "0", "v"]),
    ([["SET", "A", "1"]], ["INCR", "A"]),
    ([["SET", "A", "x"]], ["INCR", "A"]),
    ([], ["DECR", "A"]),
    ([["SET", "A", "1"]], ["INCRBY", "A", "0"]),
    ([], ["DECRBY", "A", "3"]),
    ([["SET", "A", "1"]], ["INCRBYFLOAT", "A", "0"]),
    ([], ["SETBIT", "A", "0", "0"]),
    ([["SET", "A", "\x00"]], ["SETBIT", "A", "0", "0"]),
    ([["SET", "A", "\x00"]], ["SETBIT", "A", "1", "1"]),
    # BITOP signals its destination only (deleted when every source is empty: only if it
    # existed); BITFIELD when a SET or INCRBY took effect (not for GETs, not for FAIL)
    ([["SET", "B", "x"]], ["BITOP", "AND", "A", "B"]),
    ([], ["BITOP", "OR", "A", "B"]),
    ([["SET", "A", "v"]], ["BITOP", "OR", "A", "B"]),
    ([["SET", "B", "x"], ["SET", "C", "y"]], ["BITOP", "XOR", "A", "B", "C"]),
    ([["SET", "B", "x"]], ["BITOP", "NOT", "A", "B"]),
    ([["SET", "A", "v"]], ["BITFIELD", "A", "GET", "u8", "0"]),
    ([], ["BITFIELD", "A", "SET", "u8", "0", "1"]),
    ([["SET", "A", "v"]], ["BITFIELD", "A", "INCRBY", "u8", "0", "1"]),
    ([["SET", "A", "\xff"]], ["BITFIELD", "A", "OVERFLOW", "FAIL", "INCRBY", "u8", "0", "1"]),
    # expiry
    ([["SET", "A", "v"]], ["EXPIRE", "A", "1000"]),
    ([], ["EXPIRE", "A", "1000"]),
    ([["SET", "A", "v", "EX", "1000"]], ["EXPIRE", "A", "2000", "NX"]),
    ([["SET", "A", "v"]], ["EXPIRE", "A", "2000", "XX"]),
    ([["SET", "A", "v", "EX", "1000"]], ["EXPIRE", "A", "10", "GT"]),
    ([["SET", "A", "v", "EX", "1000"]], ["EXPIRE", "A", "2000", "LT"]),
    ([["SET", "A", "v"]], ["EXPIRE", "A", "0"]),
    ([["SET", "A", "v"]], ["PEXPIRE", "A", "1000000"]),
    ([["SET", "A", "v"]], ["EXPIREAT", "A", str(FUTURE_S)]),
    ([["SET", "A", "v"]], ["PEXPIREAT", "A", str(FUTURE_S * 1000)]),
    ([["SET", "A", "v"]], ["PERSIST", "A"]),
    ([["SET", "A", "v", "EX", "1000"]], ["PERSIST", "A"]),
    # hashes
    ([["HSET", "A", "f", "v"]], ["HSET", "A", "f", "v"]),
    ([], ["HSET", "A", "f", "v"]),
    ([["HSET", "A", "f", "v"]], ["HMSET", "A", "f", "v"]),
    ([["HSET", "A", "f", "v"]], ["HSETNX", "A", "f", "w"]),
    ([["HSET", "A", "f", "v"]], ["HSETNX", "A", "g", "w"]),
    ([["HSET", "A", "f", "v"]], ["HDEL", "A", "g"]),
    ([["HSET", "A", "f", "v", "g", "w"]], ["HDEL", "A", "g"]),
    ([], ["HDEL", "A", "g"]),
    ([["HSET", "A", "f", "1"]], ["HINCRBY", "A", "f", "0"]),
    ([["HSET", "A", "f", "x"]], ["HINCRBY", "A", "f", "1"]),
    ([["HSET", "A", "f", "1"]], ["HINCRBYFLOAT", "A", "f", "0"]),
    # keys
    ([["SET", "A", "v"]], ["DEL", "A"]),
    ([], ["DEL", "A"]),
    ([["SET", "B", "v"]], ["DEL", "A", "B"]),
    ([["SET", "A", "v"]], ["UNLINK", "A", "B"]),
    ([], ["UNLINK", "A"]),
    ([["SET", "A", "v"]], ["RENAME", "A", "B"]),
    ([["SET", "A", "v"]], ["RENAME", "A", "A"]),
    ([], ["RENAME", "A", "B"]),
    ([["SET", "A", "v"], ["SET", "B", "w"]], ["RENAMENX", "A", "B"]),
    ([["SET", "A", "v"]], ["RENAMENX", "A", "B"]),
    ([["SET", "A", "v"]], ["MOVE", "A", "1"]),
    ([], ["MOVE", "A", "1"]),
    ([["SET", "A", "v"], ["SELECT", "1"], ["SET", "A", "w"], ["SELECT", "0"]], ["MOVE", "A", "1"]),
    ([["SET", "A", "v"]], ["COPY", "A", "B"]),
    ([["SET", "A", "v"], ["SET", "B", "w"]], ["COPY", "A", "B"]),
    ([["SET", "A", "v"], ["SET", "B", "w"]], ["COPY", "A", "B", "REPLACE"]),
    ([["SET", "A", "v"]], ["COPY", "A", "B", "DB", "1"]),
    ([], ["COPY", "A", "B"]),
    # sets
    ([["SADD", "A", "m"]], ["SADD", "A", "m"]),
    ([["SADD", "A", "m"]], ["SADD", "A", "n", "m"]),
    ([["SADD", "A", "1"]], ["SADD", "A", "1"]),
    ([["SADD", "A", "m"]], ["SREM", "A", "x"]),
    ([["SADD", "A", "m", "n"]], ["SREM", "A", "m"]),
    ([], ["SREM", "A", "m"]),
    ([["SADD", "A", "m"]], ["SPOP", "A"]),
    ([], ["SPOP", "A"]),
    ([["SADD", "A", "m"]], ["SPOP", "A", "0"]),
    ([["SADD", "A", "m"]], ["SPOP", "A", "1"]),
    ([["SADD", "A", "m", "n"]], ["SPOP", "A", "5"]),
    ([["SADD", "A", "m", "n"]], ["SMOVE", "A", "B", "m"]),
    ([["SADD", "A", "m", "n"], ["SADD", "B", "m"]], ["SMOVE", "A", "B", "m"]),
    ([["SADD", "A", "n"]], ["SMOVE", "A", "B", "m"]),
    ([["SADD", "A", "m"]], ["SMOVE", "A", "A", "m"]),
    ([], ["SMOVE", "A", "B", "m"]),
    ([["SADD", "A", "m", "n"], ["SADD", "B", "m"]], ["SINTERSTORE", "C", "A", "B"]),
    ([["SADD", "A", "m"], ["SADD", "B", "n"]], ["SINTERSTORE", "C", "A", "B"]),
    ([["SADD", "A", "m"], ["SADD", "B", "n"], ["SET", "C", "v"]], ["SINTERSTORE", "C", "A", "B"]),
    ([["SADD", "A", "m"], ["SADD", "B", "n"]], ["SUNIONSTORE", "C", "A", "B"]),
    ([], ["SUNIONSTORE", "C", "A", "B"]),
    ([["SADD", "A", "m", "n"], ["SADD", "B", "n"]], ["SDIFFSTORE", "C", "A", "B"]),
    ([["SADD", "A", "m"], ["SADD", "B", "m"], ["SADD", "C", "x"]], ["SDIFFSTORE", "C", "A", "B"]),
    # HyperLogLog (PF*)
    ([], ["PFADD", "A", "x"]),
    ([["PFADD", "A", "x"]], ["PFADD", "A", "x"]),
    ([["PFADD", "A", "x"]], ["PFADD", "A"]),
    ([["PFADD", "A", "x"]], ["PFADD", "A", "y", "z", "w"]),
    ([["PFADD", "A", "x"], ["PFADD", "B", "y"]], ["PFMERGE", "C", "A", "B"]),
    ([["PFADD", "A", "x"], ["PFMERGE", "C", "A"]], ["PFMERGE", "C", "A"]),
    ([["PFADD", "A", "x"]], ["PFDEBUG", "GETREG", "A"]),
    ([["PFADD", "A", "x"]], ["PFDEBUG", "TODENSE", "A"]),
    ([["PFADD", "A", "x"]], ["PFDEBUG", "ENCODING", "A"]),
    # whole databases: as Redis 7.0, only watched keys that existed are signalled
    ([["SET", "A", "v"]], ["FLUSHDB"]),
    ([], ["FLUSHDB"]),
    ([["SET", "A", "v"]], ["FLUSHALL"]),
    ([], ["FLUSHALL"]),
    ([["SET", "A", "v"]], ["SWAPDB", "0", "1"]),
    ([["SELECT", "1"], ["SET", "A", "v"], ["SELECT", "0"]], ["SWAPDB", "0", "1"]),
    ([["SET", "A", "v"]], ["SWAPDB", "2", "3"]),
    ([["SET", "A", "v"]], ["FUNCTION", "FLUSH"]),
    # lists (the blocking forms only where they serve at once: a blocked write would hang)
    ([], ["LPUSH", "A", "x"]),
    ([], ["RPUSH", "A", "x", "y"]),
    ([], ["LPUSHX", "A", "x"]),
    ([["RPUSH", "A", "a"]], ["LPUSHX", "A", "x"]),
    ([["RPUSH", "A", "a"]], ["RPUSHX", "A", "x"]),
    ([], ["RPUSHX", "A", "x"]),
    ([["RPUSH", "A", "a", "b"]], ["LPOP", "A"]),
    ([], ["LPOP", "A"]),
    ([["RPUSH", "A", "a", "b"]], ["RPOP", "A", "2"]),
    ([["RPUSH", "A", "a"]], ["LPOP", "A", "0"]),
    ([["RPUSH", "A", "a", "b"]], ["LSET", "A", "0", "z"]),
    ([["RPUSH", "A", "a", "b"]], ["LINSERT", "A", "BEFORE", "b", "z"]),
    ([["RPUSH", "A", "a", "b"]], ["LINSERT", "A", "BEFORE", "q", "z"]),
    ([["RPUSH", "A", "a", "b", "a"]], ["LREM", "A", "0", "a"]),
    ([["RPUSH", "A", "a", "b"]], ["LREM", "A", "0", "q"]),
    ([["RPUSH", "A", "a", "b", "c"]], ["LTRIM", "A", "0", "1"]),
    ([["RPUSH", "A", "a", "b"]], ["LTRIM", "A", "0", "-1"]),
    ([["RPUSH", "A", "a", "b"]], ["LMOVE", "A", "B", "LEFT", "RIGHT"]),
    ([], ["LMOVE", "A", "B", "LEFT", "RIGHT"]),
    ([["RPUSH", "A", "a", "b"]], ["RPOPLPUSH", "A", "B"]),
    ([["RPUSH", "A", "a"]], ["LMPOP", "2", "A", "B", "LEFT"]),
    ([], ["LMPOP", "2", "A", "B", "LEFT"]),
    ([["RPUSH", "A", "a"]], ["BLPOP", "A", "0"]),
    ([["RPUSH", "B", "a"]], ["BRPOP", "A", "B", "0"]),
    ([["RPUSH", "A", "a"]], ["BLMOVE", "A", "B", "LEFT", "LEFT", "0"]),
    ([["RPUSH", "A", "a"]], ["BRPOPLPUSH", "A", "B", "0"]),
    ([["RPUSH", "A", "a", "b"]], ["BLMPOP", "0", "1", "A", "LEFT", "COUNT", "5"]),
    # sorted sets
    ([], ["ZADD", "A", "1", "m"]),
    ([["ZADD", "A", "1", "m"]], ["ZADD", "A", "1", "m"]),
    ([["ZADD", "A", "1", "m"]], ["ZADD", "A", "NX", "2", "m"]),
    ([["ZADD", "A", "1", "m"]], ["ZADD", "A", "XX", "CH", "2", "m"]),
    ([["ZADD", "A", "1", "m"]], ["ZADD", "A", "INCR", "1", "m"]),
    ([], ["ZINCRBY", "A", "1", "m"]),
    ([["ZADD", "A", "1", "m"]], ["ZREM", "A", "m"]),
    ([["ZADD", "A", "1", "m"]], ["ZREM", "A", "q"]),
    ([["ZADD", "A", "1", "m", "2", "n"]], ["ZREMRANGEBYRANK", "A", "0", "0"]),
    ([["ZADD", "A", "1", "m"]], ["ZREMRANGEBYRANK", "A", "5", "6"]),
    ([["ZADD", "A", "1", "m", "2", "n"]], ["ZREMRANGEBYSCORE", "A", "1", "1"]),
    ([["ZADD", "A", "0", "a", "0", "b"]], ["ZREMRANGEBYLEX", "A", "[a", "[a"]),
    ([["ZADD", "A", "1", "m", "2", "n"]], ["ZPOPMIN", "A"]),
    ([["ZADD", "A", "1", "m", "2", "n"]], ["ZPOPMAX", "A", "2"]),
    ([], ["ZPOPMIN", "A"]),
    ([["ZADD", "A", "1", "m"]], ["ZMPOP", "2", "A", "B", "MIN"]),
    ([["ZADD", "A", "1", "m"]], ["BZPOPMIN", "A", "0"]),
    ([["ZADD", "A", "1", "m"]], ["BZPOPMAX", "A", "0"]),
    ([["ZADD", "A", "1", "m", "2", "n"]], ["BZMPOP", "0", "1", "A", "MAX", "COUNT", "2"]),
    ([["ZADD", "B", "1", "m"]], ["ZUNIONSTORE", "A", "1", "B"]),
    ([], ["ZUNIONSTORE", "A", "1", "B"]),
    ([["ZADD", "B", "1", "m"], ["ZADD", "C", "1", "m"]], ["ZINTERSTORE", "A", "2", "B", "C"]),
    ([["ZADD", "B", "1", "m"]], ["ZDIFFSTORE", "A", "1", "B"]),
    ([["ZADD", "B", "1", "m", "2", "n"]], ["ZRANGESTORE", "A", "B", "0", "-1"]),
    # GEO (sorted sets of geohash scores)
    ([], ["GEOADD", "A", "13.361389", "38.115556", "Palermo"]),
    ([["GEOADD", "A", "13.361389", "38.115556", "Palermo"]], ["GEOADD", "A", "13.361389", "38.115556", "Palermo"]),
    ([["GEOADD", "A", "13.361389", "38.115556", "Palermo"]], ["GEOADD", "A", "XX", "CH", "15.087269", "37.502669", "Palermo"]),
    ([["GEOADD", "B", "13.361389", "38.115556", "Palermo"]], ["GEOSEARCHSTORE", "A", "B", "FROMLONLAT", "13.36", "38.11", "BYRADIUS", "10", "km"]),
    ([["GEOADD", "B", "13.361389", "38.115556", "Palermo"]], ["GEOSEARCHSTORE", "A", "B", "FROMLONLAT", "0", "0", "BYRADIUS", "1", "km"]),
    ([["GEOADD", "B", "13.361389", "38.115556", "Palermo"]], ["GEORADIUS", "B", "13.36", "38.11", "10", "km", "STORE", "A"]),
    ([["GEOADD", "B", "13.361389", "38.115556", "Palermo"]], ["GEORADIUSBYMEMBER", "B", "Palermo", "10", "km", "STOREDIST", "A"]),
    # streams: XADD, XDEL and XTRIM that removed entries, XGROUP CREATE MKSTREAM that made the
    # key signal WATCH; XSETID, the other XGROUP subcommands, XREADGROUP, XACK and the claims
    # (group state only) do not.
    ([], ["XADD", "A", "1-1", "f", "v"]),
    ([], ["XADD", "A", "NOMKSTREAM", "1-1", "f", "v"]),
    ([["XADD", "A", "5-1", "f", "v"]], ["XADD", "A", "1-1", "f", "v"]),
    ([["XADD", "A", "1-1", "f", "v"]], ["XADD", "A", "MAXLEN", "0", "2-1", "f", "v"]),
    ([["XADD", "A", "1-1", "f", "v"]], ["XDEL", "A", "1-1"]),
    ([["XADD", "A", "1-1", "f", "v"]], ["XDEL", "A", "2-1"]),
    ([["XADD", "A", "1-1", "f", "v"]], ["XTRIM", "A", "MAXLEN", "0"]),
    ([["XADD", "A", "1-1", "f", "v"]], ["XTRIM", "A", "MAXLEN", "1"]),
    ([["XADD", "A", "1-1", "f", "v"]], ["XTRIM", "A", "MAXLEN", "~", "0"]),
    ([["XADD", "A", "1-1", "f", "v"]], ["XSETID", "A", "5-5"]),
    ([], ["XGROUP", "CREATE", "A", "g", "$", "MKSTREAM"]),
    ([["XADD", "A", "1-1", "f", "v"]], ["XGROUP", "CREATE", "A", "g", "$"]),
    ([["XGROUP", "CREATE", "A", "g", "$", "MKSTREAM"]], ["XGROUP", "SETID", "A", "g", "0"]),
    ([["XGROUP", "CREATE", "A", "g", "$", "MKSTREAM"]], ["XGROUP", "DESTROY", "A", "g"]),
    ([["XGROUP", "CREATE", "A", "g", "$", "MKSTREAM"]], ["XGROUP", "CREATECONSUMER", "A", "g", "c"]),
    ([["XGROUP", "CREATE", "A", "g", "$", "MKSTREAM"], ["XGROUP", "CREATECONSUMER", "A", "g", "c"]], ["XGROUP", "DELCONSUMER", "A", "g", "c"]),
    ([["XADD", "A", "1-1", "f", "v"], ["XGROUP", "CREATE", "A", "g", "0"]], ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "A", ">"]),
    ([["XADD", "A", "1-1", "f", "v"], ["XGROUP", "CREATE", "A", "g", "0"], ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "A", ">"]], ["XACK", "A", "g", "1-1"]),
    ([["XADD", "A", "1-1", "f", "v"], ["XGROUP", "CREATE", "A", "g", "0"], ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "A", ">"]], ["XCLAIM", "A", "g", "c2", "0", "1-1", "JUSTID"]),
    ([["XADD", "A", "1-1", "f", "v"], ["XGROUP", "CREATE", "A", "g", "0"], ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "A", ">"]], ["XAUTOCLAIM", "A", "g", "c2", "0", "0", "JUSTID"]),
    ([["XADD", "A", "1-1", "f", "v"], ["XADD", "B", "1-1", "f", "v"], ["XGROUP", "CREATE", "A", "g", "0"], ["XGROUP", "CREATE", "B", "g", "0"]],
     ["XREADGROUP", "GROUP", "g", "c", "STREAMS", "A", "B", ">", ">"]),
    # SORT ... STORE
    ([["RPUSH", "B", "2", "1"]], ["SORT", "B", "STORE", "A"]),
    ([["SET", "A", "v"]], ["SORT", "B", "STORE", "A"]),
    ([], ["SORT", "B", "STORE", "A"]),
    # MIGRATE: nothing listens on port 1, so both refuse (IOERR) and keep the key; a missing
    # key replies NOKEY. (Moving keys between two servers: test_migrate.py.)
    ([["SET", "A", "v"]], ["MIGRATE", "127.0.0.1", "1", "A", "0", "100"]),
    ([], ["MIGRATE", "127.0.0.1", "1", "A", "0", "100"]),
    # DUMP / RESTORE
    ([], ["RESTORE", "A", "0", DUMP_V]),
    ([["SET", "A", "w"]], ["RESTORE", "A", "0", DUMP_V]),
    ([["SET", "A", "w"]], ["RESTORE", "A", "0", DUMP_V, "REPLACE"]),
    ([["SET", "A", "w"]], ["RESTORE", "A", "1", DUMP_V, "REPLACE", "ABSTTL"]),
    ([], ["RESTORE", "A", "1", DUMP_V, "ABSTTL"]),
    # What MIGRATE sends to a cluster node; outside cluster mode it is RESTORE.
    ([], ["RESTORE-ASKING", "A", "0", DUMP_V]),
    ([["SET", "A", "w"]], ["RESTORE-ASKING", "A", "0", DUMP_V, "REPLACE"]),
]

# Abacus's own HLL.* commands (no Redis counterpart): changed or not, as PFADD/PFMERGE.
# (set-up, write, watched placeholder, aborts?)
HLL_CASES = [
    ([], ["HLL.ADD", "A", "x"], "A", True),
    ([["HLL.ADD", "A", "x"]], ["HLL.ADD", "A", "x"], "A", False),
    ([["HLL.ADD", "A", "x"]], ["HLL.ADD", "A"], "A", False),
    ([["HLL.ADDINT", "A", "1"]], ["HLL.ADDINT", "A", "1"], "A", False),
    ([["HLL.ADDINT", "A", "1"]], ["HLL.ADDINT", "A", "2"], "A", True),
    ([["HLL.ADDRAW", "A", "7"]], ["HLL.ADDRAW", "A", "7"], "A", False),
    ([], ["HLL.ADDRAW", "A", "7"], "A", True),
    ([], ["HLL.CREATE", "A"], "A", True),
    ([["HLL.CREATE", "A"]], ["HLL.CREATE", "A"], "A", False),
    ([["HLL.ADD", "A", "x"]], ["HLL.UNION", "C", "A"], "C", True),
    ([["HLL.ADD", "A", "x"]], ["HLL.UNION", "C", "A"], "A", False),
    # The summarizer's hash write: a change signals, a MIN/MAX that keeps the old value does not.
    ([], ["SUMMARY.UPDATE", "A", "n", "INCRBY", "1"], "A", True),
    ([["SUMMARY.UPDATE", "A", "m", "MAX", "5"]], ["SUMMARY.UPDATE", "A", "m", "MAX", "3"], "A", False),
    ([["SUMMARY.UPDATE", "A", "m", "MAX", "5"]], ["SUMMARY.UPDATE", "A", "m", "MAX", "7"], "A", True),
    # Ingest without rules (or of an unknown feed) writes nothing; test_summarizer.py checks
    # that an ingest's writes abort a WATCH on the summary keys it updates.
    ([], ["SUMMARY.INGEST", "nosuchfeed", "x"], "A", False),
    ([], ["SUMMARY.INGESTSOURCE", "nosuchfeed", "s", "0", "1", "1", "x"], "A", False),
    # The TS.* family (a module in Redis, so no differential run): changed or not.
    ([], ["TS.CREATE", "A"], "A", True),
    ([["TS.CREATE", "A"]], ["TS.CREATE", "A"], "A", False),
    ([["TS.CREATE", "A"]], ["TS.ALTER", "A", "RETENTION", "5"], "A", True),
    ([], ["TS.ADD", "A", "1", "1"], "A", True),
    ([["TS.ADD", "A", "1", "1"]], ["TS.ADD", "A", "1", "2"], "A", False),
    ([["TS.CREATE", "A"]], ["TS.MADD", "A", "1", "1"], "A", True),
    ([], ["TS.MADD", "A", "1", "1"], "A", False),
    ([], ["TS.INCRBY", "A", "1"], "A", True),
    ([], ["TS.DECRBY", "A", "1"], "A", True),
    ([["TS.ADD", "A", "1", "1"]], ["TS.DEL", "A", "0", "5"], "A", True),
    ([["TS.ADD", "A", "1", "1"]], ["TS.DEL", "A", "3", "5"], "A", False),
    ([], ["TS.CREATERULE", "A", "B", "AGGREGATION", "avg", "10"], "A", False),
    ([], ["TS.DELETERULE", "A", "B"], "A", False),
]

# A command word's placeholder keys, for the runs that watch each of them.
PLACEHOLDERS = ("A", "B", "C")


def _concrete(cmd, keys):
    return [keys.get(a, a) for a in cmd]


def _named_keys(setup, write):
    named = [p for p in PLACEHOLDERS if any(p in c for c in setup + [write])]
    return named or ["A"]


def _variants(setup, write):
    """The key layouts to try: spread over shards, and (for several keys) under one tag."""
    named = _named_keys(setup, write)
    return [SPREAD, TAGGED] if len(named) > 1 else [SPREAD]


def _outcome(reply):
    """EXEC's result as run/aborted (a nil reply is an abort)."""
    return "aborted" if reply is None else "ran"


def _case_id(case):
    setup, write = case
    words = [w if isinstance(w, str) else "<bytes>" for w in write]
    return " ".join(words) + (" after " + "; ".join(" ".join(c) for c in setup) if setup else "")


@pytest.fixture(scope="module")
def watch_pair():
    with redis_and_abacus() as (rs, ab):
        clients = [_client(p) for p in (rs, ab, rs, ab)]
        yield clients
        for c in clients:
            c.close()


def _run_case(main, other, setup, write, watched):
    """Returns (the write's reply, EXEC's outcome) on one server."""
    _run(main, ["FLUSHALL"])
    _run(main, ["SELECT", "0"])
    for c in setup:
        _run(main, c)
    _run(main, ["SELECT", "0"])
    assert _run(main, ["WATCH", watched]) == b"OK"
    reply = _run(other, write)
    if write[0] == "SPOP" and isinstance(reply, list):
        reply = sorted(reply)  # every member, in a random order
    assert _run(main, ["MULTI"]) == b"OK"
    _run(main, ["PING"])
    return reply, _outcome(_run(main, ["EXEC"]))


@pytest.mark.parametrize("case", CASES, ids=[_case_id(c) for c in CASES])
def test_watch_outcome_matches_redis(watch_pair, case):
    cr, ca, cr2, ca2 = watch_pair
    setup, write = case
    for keys in _variants(setup, write):
        s = [_concrete(c, keys) for c in setup]
        w = _concrete(write, keys)
        for p in _named_keys(setup, write):
            expected = _run_case(cr, cr2, s, w, keys[p])
            got = _run_case(ca, ca2, s, w, keys[p])
            assert got == expected, "WATCH %s; %s (after %s): redis %r, abacus %r" % (keys[p], w, s, expected, got)


@pytest.mark.parametrize("case", HLL_CASES, ids=[" ".join(c[1]) + " watch " + c[2] for c in HLL_CASES])
def test_watch_outcome_of_hll_commands(watch_pair, case):
    _, ca, _, ca2 = watch_pair
    setup, write, watched, aborts = case
    for keys in (SPREAD, TAGGED):
        reply, outcome = _run_case(ca, ca2, [_concrete(c, keys) for c in setup], _concrete(write, keys), keys[watched])
        assert outcome == ("aborted" if aborts else "ran"), (write, reply)


def test_every_write_command_is_covered(watch_pair):
    """Every command the server flags `write` has a case above."""
    _, ca, _, _ = watch_pair
    covered = {c[1][0].lower() for c in CASES} | {c[1][0].lower() for c in HLL_CASES}
    # FUNCTION's writes change libraries, not keys: nothing a WATCH sees.
    covered |= {"function|flush", "function|load", "function|delete", "function|restore"}
    covered |= {("%s|%s" % (c[1][0], c[1][1])).lower() for c in CASES if c[1][0] == "XGROUP"}
    writes = set()
    for entry in _run(ca, ["COMMAND"]):
        name, flags = entry[0].decode(), {f.decode() for f in entry[2]}
        if "write" in flags:
            writes.add(name)
        for sub in entry[9] if len(entry) > 9 else []:
            if "write" in {f.decode() for f in sub[2]}:
                writes.add(sub[0].decode())
    assert writes, "COMMAND listed no write command"
    assert writes - covered == set()
