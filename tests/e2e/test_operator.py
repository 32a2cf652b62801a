"""What an operator meets: one server per data directory, the start-up banner, loading progress,
"Ready" only once the data is loaded, plain-text logs, and clear command-line errors.

Every test runs private abacus processes on data directories of their own.
"""

import os
import re
import subprocess

import pytest

from test_persistence import ABACUS, data_dir, node  # noqa: F401  (data_dir is a fixture)

pytestmark = pytest.mark.abacus_only("Abacus's data directory lock, banner and start-up log")


def test_a_second_server_on_the_same_directory_refuses_to_start(data_dir):
    d, _ = data_dir
    first = node(data_dir).start()
    first.client().set("k", "v")
    out = node(data_dir).start_fails()
    assert "in use by another process" in out, out
    assert os.path.realpath(d) in out, out
    assert "pid %d" % first.p.proc.pid in out, out
    # The first one is untouched: it still serves, and its log alone holds the write.
    assert first.client().get("k") == b"v"
    first.term()
    restarted = node(data_dir).start()
    assert restarted.client().get("k") == b"v"


def test_the_lock_is_released_when_the_holder_is_killed(data_dir):
    first = node(data_dir).start()
    first.client().set("k", "v")
    first.kill()
    # SIGKILL runs no clean-up: the kernel releases the lock with the process, so the next
    # server starts at once, with no stale lock to remove by hand.
    second = node(data_dir).start()
    assert second.client().get("k") == b"v"


def test_check_aof_fix_refuses_a_directory_in_use_and_checkers_only_note_it(data_dir):
    n = node(data_dir).start()
    n.client().set("k", "v")
    path = n.log_path()
    fix = subprocess.run([ABACUS, "check-aof", "--fix", path], capture_output=True, text=True)
    assert fix.returncode != 0, fix.stdout
    assert "not fixing" in fix.stderr and "pid %d" % n.p.proc.pid in fix.stderr, fix.stderr
    check = subprocess.run([ABACUS, "check-aof", path], capture_output=True, text=True)
    assert check.returncode == 0 and "log is valid" in check.stdout, check.stdout + check.stderr
    assert "a server is using this data directory" in check.stderr, check.stderr
    n.term()
    fix = subprocess.run([ABACUS, "check-aof", "--fix", path], capture_output=True, text=True)
    assert fix.returncode == 0, fix.stdout + fix.stderr
    assert "a server is using" not in fix.stderr


def lines(log, pattern):
    return [i for i, line in enumerate(log.splitlines()) if re.search(pattern, line)]


def test_banner_loading_progress_and_ready_after_the_data(data_dir):
    d, _ = data_dir
    n = node(data_dir, "--maxmemory", "1gb", "--maxmemory-policy", "allkeys-lru").start()
    r = n.client()
    keys = 2_000_000
    assert r.execute_command("DEBUG", "POPULATE", keys, "key", 16) == b"OK"
    assert r.save()
    first_log = n.p.log()
    n.term()
    n.start()
    assert n.client().dbsize() == keys
    log = n.p.log()
    for text in (first_log, log):
        assert "\x1b[" not in text, "colour codes in a log file"
    banner = lines(log, r"Abacus .* starting: pid \d+")
    assert len(banner) == 1, log
    line = log.splitlines()[banner[0]]
    for part in ("pid %d" % n.p.proc.pid, "listening on 127.0.0.1:%d" % n.p.port,
                 "2 worker threads", "data directory %s" % os.path.realpath(d),
                 "maxmemory 1073741824 bytes", "maxmemory-policy allkeys-lru",
                 "appendonly yes, appendfsync everysec", 'save "3600 1 300 100 60 10000"'):
        assert part in line, (part, line)
    start = lines(log, r"Loading the data set from .*snapshot snap-\d+\.abs")
    progress = lines(log, r"Loading: [\d.]+% \([\d.]+ of [\d.]+ MB\), \d+ keys and \d+ log commands so far, "
                          r"[\d.]+ MB/s, ETA ")
    summary = lines(log, r"DB loaded from disk: %d keys from the snapshot" % keys)
    ready = lines(log, r"Ready to accept connections tcp on 127\.0\.0\.1:%d" % n.p.port)
    assert start and progress and summary and len(ready) == 1, log
    assert banner[0] < start[0] < progress[0] <= progress[-1] < summary[0] < ready[0], log
    # The last progress line (at the end of the snapshot at least) has every key.
    assert "%d keys" % keys in log.splitlines()[progress[-1]], log
    # SAVE is logged as what it is: a snapshot for SAVE, not a "background" one.
    assert re.search(r"Snapshot snap-\d+\.abs started for SAVE", first_log), first_log
    assert re.search(r"Snapshot snap-\d+\.abs saved on disk \(SAVE\): %d keys" % keys, first_log), first_log
    assert "Background saving" not in first_log


def test_config_file_is_in_the_banner_and_info(data_dir):
    d, _ = data_dir
    conf = os.path.join(d, "abacus.conf")
    with open(conf, "w") as f:
        f.write("hz 20\n")
    n = node(data_dir, "--config", conf).start()
    assert n.client().info("server")["config_file"] == os.path.realpath(conf)
    assert "config file %s" % os.path.realpath(conf) in n.p.log()


@pytest.mark.parametrize("args, expected", [
    (["--port"], "--port needs a value"),
    (["--port", "1", "--dir"], "--dir needs a value"),
    (["--dir", "--port", "1"], "--dir needs a value"),
    (["--port", "x"], "invalid value for 'port'"),
    (["--dir", ""], "dir: the data directory must not be empty"),
    (["--bogus", "1"], "unknown configuration parameter 'bogus'"),
])
def test_command_line_errors_name_the_parameter(args, expected, tmp_path):
    out = subprocess.run([ABACUS, "serve"] + args, capture_output=True, text=True, cwd=tmp_path, timeout=30)
    assert out.returncode != 0
    assert expected in out.stderr, out.stderr
