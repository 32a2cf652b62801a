"""Expiry: EXPIRE PEXPIRE EXPIREAT PEXPIREAT (NX XX GT LT), TTL PTTL,
EXPIRETIME PEXPIRETIME, PERSIST, passive and active expiry."""

import time

import pytest

from helpers import Err, info_dict, wait_until

NOT_INT = Err("ERR value is not an integer or out of range")
NX_XX = Err("ERR NX and XX, GT or LT options at the same time are not compatible")
GT_LT = Err("ERR GT and LT options at the same time are not compatible")
EXPIRE_CMDS = ["EXPIRE", "PEXPIRE", "EXPIREAT", "PEXPIREAT"]


def wrong_args(cmd):
    return Err("ERR wrong number of arguments for '%s' command" % cmd)


def far(cmd, offset_s=1000):
    """An argument for `cmd` meaning 'offset_s seconds from now'."""
    now = time.time()
    return {
        "EXPIRE": offset_s,
        "PEXPIRE": offset_s * 1000,
        "EXPIREAT": int(now) + offset_s,
        "PEXPIREAT": int(now * 1000) + offset_s * 1000,
    }[cmd]


# ---------------------------------------------------------------- TTL / PTTL

def test_ttl_pttl_special_values(c):
    assert c("TTL", "missing") == -2
    assert c("PTTL", "missing") == -2
    c("SET", "k", "v")
    assert c("TTL", "k") == -1
    assert c("PTTL", "k") == -1
    assert c("TTL") == wrong_args("ttl")


def test_expire_and_ttl(c):
    c("SET", "k", "v")
    assert c("EXPIRE", "k", "100") == 1
    assert 98 <= c("TTL", "k") <= 100
    assert 98000 <= c("PTTL", "k") <= 100000
    assert c("EXPIRE", "missing", "100") == 0
    assert c("EXISTS", "missing") == 0


def test_pexpire(c):
    c("SET", "k", "v")
    assert c("PEXPIRE", "k", "100000") == 1
    assert 98000 <= c("PTTL", "k") <= 100000
    assert 98 <= c("TTL", "k") <= 100


def test_expireat_pexpireat(c):
    c("SET", "k", "v")
    now = int(time.time())
    assert c("EXPIREAT", "k", now + 100) == 1
    assert c("EXPIRETIME", "k") == now + 100
    assert c("PEXPIRETIME", "k") == (now + 100) * 1000
    assert c("PEXPIREAT", "k", now * 1000 + 200123) == 1
    assert c("PEXPIRETIME", "k") == now * 1000 + 200123
    assert c("EXPIRETIME", "k") == (now * 1000 + 200123) // 1000
    assert c("EXPIREAT", "missing", now + 100) == 0


def test_expiretime_special_values(c):
    assert c("EXPIRETIME", "missing") == -2
    assert c("PEXPIRETIME", "missing") == -2
    c("SET", "k", "v")
    assert c("EXPIRETIME", "k") == -1
    assert c("PEXPIRETIME", "k") == -1
    c("EXPIRE", "k", "100")
    et = c("EXPIRETIME", "k")
    assert abs(et - (time.time() + 100)) < 5


@pytest.mark.parametrize("cmd", EXPIRE_CMDS)
def test_expire_in_the_past_deletes(c, cmd):
    c("SET", "k", "v")
    arg = {"EXPIRE": -1, "PEXPIRE": -1, "EXPIREAT": 1, "PEXPIREAT": 1}[cmd]
    assert c(cmd, "k", arg) == 1
    assert c("EXISTS", "k") == 0
    assert c("TTL", "k") == -2
    assert c(cmd, "k", arg) == 0


def test_expire_zero_deletes(c):
    c("SET", "k", "v")
    assert c("EXPIRE", "k", "0") == 1
    assert c("GET", "k") is None


def test_negative_ttl_deletes_and_counts(c):
    c("SET", "a", "1")
    c("SET", "b", "1")
    assert c("PEXPIRE", "a", "-1000") == 1
    assert c("EXPIRE", "b", "-100") == 1
    assert c("DBSIZE") == 0


@pytest.mark.parametrize("cmd", EXPIRE_CMDS)
def test_expire_invalid_args(c, cmd):
    c("SET", "k", "v")
    assert c(cmd, "k", "abc") == NOT_INT
    assert c(cmd, "k", "1.5") == NOT_INT
    assert c(cmd, "k", "") == NOT_INT
    assert c(cmd, "k") == wrong_args(cmd.lower())
    assert c(cmd, "k", far(cmd), "FOO") == Err("ERR Unsupported option FOO")
    # The options are checked before the time, as Redis does.
    assert c(cmd, "k", "abc", "FOO") == Err("ERR Unsupported option FOO")
    assert c(cmd, "k", "9223372036854775808", "NX", "GT") == NX_XX
    assert c(cmd, "k", "", "GT", "LT") == GT_LT
    assert c("TTL", "k") == -1


def test_expire_overflow(c):
    c("SET", "k", "v")
    big = "9223372036854775807"
    assert c("EXPIRE", "k", big) == Err("ERR invalid expire time in 'expire' command")
    assert c("PEXPIRE", "k", big) == Err("ERR invalid expire time in 'pexpire' command")
    assert c("EXPIREAT", "k", big) == Err("ERR invalid expire time in 'expireat' command")
    assert c("EXPIRE", "k", "-9223372036854775808") == Err(
        "ERR invalid expire time in 'expire' command")
    assert c("TTL", "k") == -1


# ---------------------------------------------------------------- NX / XX / GT / LT

@pytest.mark.parametrize("cmd", EXPIRE_CMDS)
def test_expire_options_incompatible(c, cmd):
    c("SET", "k", "v")
    a = far(cmd)
    assert c(cmd, "k", a, "NX", "XX") == NX_XX
    assert c(cmd, "k", a, "XX", "NX") == NX_XX
    assert c(cmd, "k", a, "NX", "GT") == NX_XX
    assert c(cmd, "k", a, "LT", "NX") == NX_XX
    assert c(cmd, "k", a, "GT", "LT") == GT_LT
    assert c(cmd, "k", a, "lt", "gt") == GT_LT
    assert c("TTL", "k") == -1


@pytest.mark.parametrize("cmd", EXPIRE_CMDS)
def test_expire_nx(c, cmd):
    c("SET", "k", "v")
    assert c(cmd, "k", far(cmd, 100), "NX") == 1
    assert c(cmd, "k", far(cmd, 500), "NX") == 0
    assert c("TTL", "k") <= 100
    assert c(cmd, "missing", far(cmd), "NX") == 0


@pytest.mark.parametrize("cmd", EXPIRE_CMDS)
def test_expire_xx(c, cmd):
    c("SET", "k", "v")
    assert c(cmd, "k", far(cmd, 100), "XX") == 0
    assert c("TTL", "k") == -1
    c("EXPIRE", "k", "100")
    assert c(cmd, "k", far(cmd, 500), "xx") == 1
    assert 490 <= c("TTL", "k") <= 500


@pytest.mark.parametrize("cmd", EXPIRE_CMDS)
def test_expire_gt(c, cmd):
    c("SET", "k", "v")
    # a key without TTL counts as an infinite TTL: GT never applies
    assert c(cmd, "k", far(cmd, 100), "GT") == 0
    assert c("TTL", "k") == -1
    c("EXPIRE", "k", "100")
    assert c(cmd, "k", far(cmd, 50), "GT") == 0
    assert c("TTL", "k") > 90
    assert c(cmd, "k", far(cmd, 500), "GT") == 1
    assert c("TTL", "k") > 400
    assert c(cmd, "k", far(cmd, 800), "XX", "GT") == 1
    assert c("TTL", "k") > 700


@pytest.mark.parametrize("cmd", EXPIRE_CMDS)
def test_expire_lt(c, cmd):
    c("SET", "k", "v")
    # a key without TTL counts as an infinite TTL: LT always applies
    assert c(cmd, "k", far(cmd, 500), "LT") == 1
    assert 490 <= c("TTL", "k") <= 500
    assert c(cmd, "k", far(cmd, 1000), "LT") == 0
    assert c("TTL", "k") <= 500
    assert c(cmd, "k", far(cmd, 100), "LT") == 1
    assert c("TTL", "k") <= 100
    assert c(cmd, "k", far(cmd, 50), "XX", "LT") == 1
    assert c("TTL", "k") <= 50


def test_expire_xx_lt_on_persistent_key(c):
    c("SET", "k", "v")
    assert c("EXPIRE", "k", "100", "XX", "LT") == 0
    assert c("TTL", "k") == -1


def test_expire_gt_lt_with_past_time(c):
    c("SET", "k", "v", "EX", "100")
    assert c("EXPIRE", "k", "-1", "GT") == 0
    assert c("EXISTS", "k") == 1
    assert c("EXPIRE", "k", "-1", "LT") == 1
    assert c("EXISTS", "k") == 0


def test_expire_redis_py(r):
    r.set("k", "v")
    assert r.expire("k", 100, nx=True) is True
    assert r.expire("k", 200, lt=True) is False
    assert r.ttl("k") <= 100
    assert r.pexpire("k", 500000, gt=True) is True
    assert r.ttl("k") > 400


# ---------------------------------------------------------------- PERSIST

def test_persist(c):
    c("SET", "k", "v", "EX", "100")
    assert c("PERSIST", "k") == 1
    assert c("TTL", "k") == -1
    assert c("PERSIST", "k") == 0
    assert c("PERSIST", "missing") == 0
    assert c("GET", "k") == b"v"
    assert c("PERSIST") == wrong_args("persist")


# ---------------------------------------------------------------- actual expiry

def test_key_expires_passively(c):
    c("SET", "k", "v", "PX", "100")
    assert wait_until(lambda: c("GET", "k") is None, timeout=5)
    assert c("TTL", "k") == -2
    assert c("EXISTS", "k") == 0
    assert c("STRLEN", "k") == 0
    assert c("KEYS", "*") == []


def test_pexpire_then_expiry(c):
    c("SET", "k", "v")
    assert c("PEXPIRE", "k", "100") == 1
    assert wait_until(lambda: c("EXISTS", "k") == 0, timeout=5)
    # an expired key behaves as missing for every command
    assert c("EXPIRE", "k", "100") == 0
    assert c("PERSIST", "k") == 0
    assert c("SET", "k", "new", "XX") is None
    assert c("INCR", "k") == 1
    assert c("TTL", "k") == -1


def test_active_expiry_without_access(c):
    for i in range(100):
        c("SET", "exp:%d" % i, "v", "PX", "50")
    c("SET", "keeper", "v")
    # never touch the expiring keys again: the server must reclaim them
    assert wait_until(lambda: c("DBSIZE") == 1, timeout=10, interval=0.05), \
        "expired keys were not reclaimed: DBSIZE=%r" % c("DBSIZE")
    ks = info_dict(c("INFO", "keyspace"))
    assert ks["db0"].startswith("keys=1,expires=0")


def test_expired_keys_stat(c):
    before = int(info_dict(c("INFO", "stats"))["expired_keys"])
    for i in range(5):
        c("SET", "e%d" % i, "v", "PX", "20")
    assert wait_until(lambda: c("DBSIZE") == 0, timeout=10, interval=0.05)
    after = int(info_dict(c("INFO", "stats"))["expired_keys"])
    assert after - before == 5


def test_expire_other_db(c):
    c("SELECT", "4")
    c("SET", "k", "v", "PX", "50")
    c("SELECT", "0")
    c("SET", "k", "v")
    c("SELECT", "4")
    assert wait_until(lambda: c("EXISTS", "k") == 0, timeout=5)
    c("SELECT", "0")
    assert c("GET", "k") == b"v"
