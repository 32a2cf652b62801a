"""The server-side EXPORT command (issue 52): the same Parquet files as `abacus export`,
written by the server into `export-dir` on a background thread. Off by default (refused
with a clear error), set by the command line / config file and CONFIG SET, readable by
CONFIG GET; a FILE that would leave export-dir is refused; progress and the outcome in INFO's
persistence section (export_in_progress, export_keys_total, export_reads, export_last_*).
"""

import os
import shutil
import subprocess
import tempfile
import time

import pytest
import redis

pq = pytest.importorskip("pyarrow.parquet", reason="pip install -r tests/requirements.txt")

from test_export import RULES, load_sales  # noqa: E402
from test_export_offline import populate, sorted_rows  # noqa: E402
from test_summarizer import ABACUS, Node  # noqa: E402

pytestmark = pytest.mark.abacus_only("EXPORT is Abacus's")

LAYOUTS = [
    (["SUMMARY", "money"], ["--summary", "money"]),
    (["SUMMARY", "money", "FROM", 1_700_000_000 - 1_700_000_000 % 86400 + 86400, "TO", 1_700_000_000 - 1_700_000_000 % 86400 + 2 * 86400],
     ["--summary", "money", "--from", 1_700_000_000 - 1_700_000_000 % 86400 + 86400, "--to", 1_700_000_000 - 1_700_000_000 % 86400 + 2 * 86400]),
    (["STREAMS", "user:*"], ["--streams", "user:*"]),
    (["STREAMS", "user:1*", "FLAT", "COMPRESSION", "snappy"], ["--streams", "user:1*", "--flat", "--compression", "snappy"]),
    (["SERIES", "sensor=temp", "room!=r1"], ["--series", "sensor=temp", "room!=r1"]),
    (["KEYS", "g:*"], ["--keys", "g:*"]),
]


@pytest.fixture(scope="module")
def workdir():
    d = tempfile.mkdtemp(prefix="abacus-export-cmd-")
    with open(os.path.join(d, "rules.toml"), "w") as f:
        f.write(RULES)
    os.makedirs(os.path.join(d, "exports"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def node(workdir):
    data = os.path.join(workdir, "data")
    os.makedirs(data)
    n = Node(data, "--summarizer-rules", os.path.join(workdir, "rules.toml")).start()
    rc = n.client()
    populate(rc, 1)
    populate(rc, 2)
    yield n
    n.kill()


def info(rc):
    return rc.info("persistence")


def wait_export(rc, timeout=120):
    """Polls INFO until the export is over (a bound, not a timing assumption)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        i = info(rc)
        if i["export_in_progress"] == 0:
            return i
        time.sleep(0.02)
    raise AssertionError("the export did not finish")


def test_refused_until_export_dir_is_set(node, workdir):
    rc = node.client()
    assert rc.config_get("export-dir") == {"export-dir": ""}
    with pytest.raises(redis.ResponseError, match="EXPORT is disabled: set export-dir"):
        rc.execute_command("EXPORT", "STREAMS", "user:*", "FILE", "x.parquet")
    assert info(rc)["export_last_status"] == "none"
    # As a client library reads the table (name, arity, flags): EXPORT is an admin command.
    conn = rc.connection_pool.get_connection()
    try:
        conn.send_command("COMMAND", "INFO", "export")
        (entry,) = conn.read_response()
    finally:
        rc.connection_pool.release(conn)
    assert entry[0] == b"export" and entry[1] == -5 and b"admin" in entry[2]


def test_file_names_cannot_leave_export_dir(node, workdir):
    rc = node.client()
    exports = os.path.join(workdir, "exports")
    rc.config_set("export-dir", exports)
    for name in ["../x.parquet", "/tmp/x.parquet", "sub/x.parquet", "..", ".", ".hidden", "a\\b"]:
        with pytest.raises(redis.ResponseError, match="bad export file name"):
            rc.execute_command("EXPORT", "STREAMS", "user:*", "FILE", name)
    assert os.listdir(exports) == [] and not os.path.exists(os.path.join(workdir, "x.parquet"))
    for args, msg in [(["STREAMS", "user:*", "COMPRESSION", "zstd"], "needs FILE"), (["TABLES", "x", "FILE", "x"], "expected SUMMARY, STREAMS, SERIES or KEYS"),
                      (["STREAMS", "user:*", "FILE", "x", "COMPRESSION", "lz5"], "unknown compression"), (["KEYS", "g:*", "FLAT", "FILE", "x"], "syntax error")]:
        with pytest.raises(redis.ResponseError, match=msg):
            rc.execute_command("EXPORT", *args)
    assert os.listdir(exports) == []


def test_export_writes_the_clis_files(node, workdir):
    rc = node.client()
    exports = os.path.join(workdir, "exports")
    rc.config_set("export-dir", exports)
    assert rc.config_get("export-dir") == {"export-dir": exports}
    cli = tempfile.mkdtemp(prefix="cli-", dir=workdir)
    for i, (cmd, flags) in enumerate(LAYOUTS):
        name = "e%d.parquet" % i
        assert rc.execute_command("EXPORT", *cmd, "FILE", name) == b"Background export started"
        done = wait_export(rc)
        assert done["export_last_status"] == "ok", done
        assert done["export_last_file"] == name
        mine = os.path.join(exports, name)
        theirs = os.path.join(cli, name)
        p = subprocess.run([ABACUS, "export", "-q", "-p", str(node.p.port), "--out", theirs] + [str(f) for f in flags], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        t = pq.read_table(mine)
        assert done["export_last_rows"] == t.num_rows > 0 and done["export_last_bytes"] == os.path.getsize(mine)
        # Keys listed (all the summary's keys even for one day), then the reads of those kept.
        assert done["export_keys_total"] > 0 and done["export_reads"] > 0
        if cmd[0] == "KEYS":
            assert sorted_rows(mine) == sorted_rows(theirs)
        else:
            assert t.equals(pq.read_table(theirs)), cmd
    assert sorted(os.listdir(exports)) == sorted("e%d.parquet" % i for i in range(len(LAYOUTS)))


def test_a_failed_export_reports_and_leaves_nothing(node, workdir):
    rc = node.client()
    exports = tempfile.mkdtemp(prefix="failed-", dir=workdir)
    rc.config_set("export-dir", exports)
    assert rc.execute_command("EXPORT", "STREAMS", "nothing:*", "FILE", "n.parquet") == b"Background export started"
    done = wait_export(rc)
    assert done["export_last_status"] == "err" and "no stream key matches 'nothing:*'" in done["export_last_error"]
    assert rc.execute_command("EXPORT", "SUMMARY", "nope", "FILE", "n.parquet") == b"Background export started"
    done = wait_export(rc)
    assert done["export_last_status"] == "err" and "no such summary 'nope'" in done["export_last_error"]
    assert os.listdir(exports) == []
    rc.config_set("export-dir", os.path.join(workdir, "no-such-dir"))
    with pytest.raises(redis.ResponseError, match="is not a directory"):
        rc.execute_command("EXPORT", "STREAMS", "user:*", "FILE", "x.parquet")


def test_export_dir_from_the_command_line(workdir):
    data = os.path.join(workdir, "data2")
    os.makedirs(data)
    exports = tempfile.mkdtemp(prefix="flag-", dir=workdir)
    n = Node(data, "--export-dir", exports).start()
    try:
        rc = n.client()
        assert rc.config_get("export-dir") == {"export-dir": exports}
        rc.xadd("s", {"a": "b"})
        assert rc.execute_command("EXPORT", "STREAMS", "*", "FILE", "s.parquet") == b"Background export started"
        assert wait_export(rc)["export_last_status"] == "ok"
        assert [r["key"] for r in pq.read_table(os.path.join(exports, "s.parquet")).to_pylist()] == ["s"]
    finally:
        n.kill()
