"""`huge-pages yes`: jemalloc backs the heap with transparent huge pages.

jemalloc reads its options before the server's `main`, so `abacus serve --huge-pages yes`
starts itself again, once, with `thp:always` in `_RJEM_MALLOC_CONF` (an exec: the process id
the parent sees stays the same). Where the kernel allows THP (`madvise` or `always`), the
server's anonymous memory then holds huge pages; where it has THP off, the server runs on
with normal pages.
"""

import os

import pytest
import redis

pytestmark = pytest.mark.abacus_only("huge-pages is Abacus's allocator setting")

THP = "/sys/kernel/mm/transparent_hugepage/enabled"


def thp_allowed():
    try:
        mode = open(THP).read()
    except OSError:
        return False
    return "[never]" not in mode


def environ(pid):
    return dict(e.split(b"=", 1) for e in open(f"/proc/{pid}/environ", "rb").read().split(b"\0") if b"=" in e)


def anon_huge_kb(pid):
    for line in open(f"/proc/{pid}/smaps_rollup"):
        if line.startswith("AnonHugePages:"):
            return int(line.split()[1])
    return 0


def test_default_is_no_and_fixed_at_start(server):
    c = server.client()
    assert c.config_get("huge-pages") == {"huge-pages": "no"}
    with pytest.raises(redis.ResponseError):
        c.config_set("huge-pages", "yes")


def test_unknown_value_refused_at_start(server):
    p = server.start(["--huge-pages", "maybe"], wait=False)
    assert p.wait_exit(10) not in (None, 0)


def test_huge_pages_restart_with_thp_and_keep_data(server):
    p = server.start(["--huge-pages", "yes"])
    c = p.client()
    assert c.config_get("huge-pages") == {"huge-pages": "yes"}
    pid = p.proc.pid
    c.execute_command("DEBUG", "POPULATE", 300_000, "key", 100)
    assert c.dbsize() == 300_000
    assert c.get("key:123") is not None
    if not thp_allowed():
        assert b"thp:always" not in environ(pid).get(b"_RJEM_MALLOC_CONF", b"")
        return
    # The same process id, now running with jemalloc's thp:always.
    assert b"thp:always" in environ(pid)[b"_RJEM_MALLOC_CONF"]
    assert anon_huge_kb(pid) > 0


def test_without_huge_pages_no_restart(server):
    p = server.start([])
    assert b"thp:always" not in environ(p.proc.pid).get(b"_RJEM_MALLOC_CONF", b"")
