"""The Prometheus metrics endpoint (`metrics-port`), read three ways: plain HTTP with a
parser of the text exposition format, a real Prometheus (Debian `prometheus`) scraping it,
and the standard `prometheus-redis-exporter` (Debian) scraping the server over RESP, which
must work against Abacus as against Redis (that test runs on both targets).

Waiting on Prometheus and the exporter polls until the expected series show up (or a
generous deadline passes); nothing is asserted on time.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request

import pytest

from conftest import free_port
from helpers import wait_until

PROMETHEUS = shutil.which("prometheus")
EXPORTER = shutil.which("prometheus-redis-exporter")

abacus_only = pytest.mark.abacus_only("metrics-port is Abacus's own endpoint")

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text):
    """The text format (0.0.4) as {(name, frozenset(labels)): value}; raises on a malformed
    line, a TYPE line after its family's samples, or a repeated series."""
    series = {}
    typed = {}
    seen_families = set()
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped"), line
            assert name not in typed and name not in seen_families, "TYPE repeated or late: " + line
            typed[name] = kind
            continue
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, "malformed sample line: %r" % line
        name, _, labels, value = m.groups()
        labels = frozenset(LABEL.findall(labels or ""))
        float(value)  # NaN, +Inf and numbers all parse
        key = (name, labels)
        assert key not in series, "repeated series: " + line
        series[key] = float(value)
        family = re.sub(r"_(bucket|sum|count)$", "", name) if name.endswith(("_bucket", "_sum", "_count")) else name
        seen_families.add(family if family in typed else name)
    return series, typed


def scrape(port, path="/metrics"):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=10) as resp:
        return resp.status, resp.headers.get("Content-Type"), resp.read().decode()


def value(series, name, **labels):
    return series.get((name, frozenset(labels.items())))


def start_with_metrics(server):
    port = free_port()
    p = server.start(["--metrics-port", str(port)])
    return p, port


@abacus_only
def test_metrics_endpoint_serves_the_text_format(server):
    p, mport = start_with_metrics(server)
    r = p.client()
    for i in range(7):
        r.set("k%d" % i, "v")
    r.get("k1")
    r3 = p.client(db=3)
    r3.set("other", "1")
    r3.expire("other", 1000)
    try:
        r.execute_command("NOSUCHTHING")
    except Exception:
        pass
    status, ctype, text = scrape(mport)
    assert status == 200
    assert ctype.startswith("text/plain; version=0.0.4")
    series, typed = parse_exposition(text)
    assert value(series, "abacus_commands_total", cmd="set") == 8  # 7 in db 0, 1 in db 3
    assert value(series, "abacus_commands_total", cmd="get") == 1
    assert value(series, "abacus_db_keys", db="0") == 7
    assert value(series, "abacus_db_keys", db="3") == 1
    assert value(series, "abacus_db_keys_expiring", db="3") == 1
    assert value(series, "abacus_connected_clients") >= 2
    assert value(series, "abacus_used_memory") > 0
    assert value(series, "abacus_errors_total", err="ERR") >= 1
    assert typed["abacus_commands_processed_total"] == "counter"
    assert typed["abacus_command_latency_seconds"] == "histogram"
    # The latency histogram of SET: cumulative buckets ending at its call count.
    buckets = sorted(
        (float(dict(labels)["le"]), v) for (name, labels), v in series.items()
        if name == "abacus_command_latency_seconds_bucket" and dict(labels)["cmd"] == "set" and dict(labels)["le"] != "+Inf"
    )
    counts = [v for _, v in buckets]
    assert counts == sorted(counts)
    assert value(series, "abacus_command_latency_seconds_bucket", cmd="set", le="+Inf") == 8
    assert value(series, "abacus_command_latency_seconds_count", cmd="set") == 8
    # Persistence and memory figures where they exist.
    assert ("abacus_aof_enabled", frozenset()) in series
    assert ("abacus_maxmemory", frozenset()) in series
    # Anything else is refused.
    with pytest.raises(urllib.error.HTTPError) as e:
        scrape(mport, "/nope")
    assert e.value.code == 404
    with socket.create_connection(("127.0.0.1", mport), timeout=5) as s:
        s.sendall(b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 405")
    with socket.create_connection(("127.0.0.1", mport), timeout=5) as s:
        s.sendall(b"GARBAGE" * 2000)
        assert s.recv(100).startswith(b"HTTP/1.1 400")
    r.close()
    r3.close()


@abacus_only
def test_metrics_port_is_off_by_default(server):
    r = server.client()
    assert r.execute_command("CONFIG", "GET", "metrics-port") == [b"metrics-port", b"0"]
    r.close()


@pytest.fixture
def workdir():
    d = tempfile.mkdtemp(prefix="abacus-metrics-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


class Proc:
    def __init__(self, argv, log_path):
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)
        self.log.close()


def http_json(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return json.loads(resp.read())
    except (OSError, ValueError):
        return None


@abacus_only
@pytest.mark.skipif(PROMETHEUS is None, reason="the Debian prometheus package is not installed (scripts/test.sh installs it)")
def test_prometheus_scrapes_the_endpoint(server, workdir):
    p, mport = start_with_metrics(server)
    r = p.client()
    for i in range(3):
        r.set("k%d" % i, "v")
    pport = free_port()
    config = os.path.join(workdir, "prometheus.yml")
    with open(config, "w") as f:
        f.write(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: abacus\n    static_configs:\n"
            "      - targets: ['127.0.0.1:%d']\n" % mport
        )
    prom = Proc([PROMETHEUS, "--config.file", config, "--storage.tsdb.path", os.path.join(workdir, "data"),
                 "--web.listen-address", "127.0.0.1:%d" % pport], os.path.join(workdir, "prometheus.log"))
    try:
        def query(q):
            got = http_json("http://127.0.0.1:%d/api/v1/query?query=%s" % (pport, urllib.parse.quote(q)))
            if not got or got.get("status") != "success":
                return None
            return got["data"]["result"] or None

        up = wait_until(lambda: query('up{job="abacus"} == 1'), timeout=60, interval=0.5)
        assert up, "Prometheus never scraped the endpoint successfully:\n" + open(os.path.join(workdir, "prometheus.log")).read()[-3000:]
        sets = wait_until(lambda: query('abacus_commands_total{cmd="set"}'), timeout=30, interval=0.5)
        assert sets and float(sets[0]["value"][1]) == 3
        keys = query('abacus_db_keys{db="0"}')
        assert keys and float(keys[0]["value"][1]) == 3
        hist = query('abacus_command_latency_seconds_count{cmd="set"}')
        assert hist and float(hist[0]["value"][1]) == 3
        # A histogram Prometheus can take quantiles of.
        q = query('histogram_quantile(0.99, abacus_command_latency_seconds_bucket{cmd="set"})')
        assert q and float(q[0]["value"][1]) > 0
        targets = http_json("http://127.0.0.1:%d/api/v1/targets" % pport)
        active = targets["data"]["activeTargets"]
        assert active and active[0]["health"] == "up" and active[0]["lastError"] == ""
    finally:
        prom.stop()
        r.close()


@pytest.mark.skipif(EXPORTER is None, reason="the Debian prometheus-redis-exporter package is not installed (scripts/test.sh installs it)")
def test_redis_exporter_reads_the_server(server, workdir):
    p = server.start([])
    r = p.client()
    for i in range(4):
        r.set("k%d" % i, "v")
    r.get("k0")
    eport = free_port()
    exporter = Proc([EXPORTER, "--redis.addr", "redis://127.0.0.1:%d" % p.port, "--web.listen-address", "127.0.0.1:%d" % eport],
                    os.path.join(workdir, "exporter.log"))
    try:
        def metrics():
            try:
                return scrape(eport)[2]
            except OSError:
                return None

        text = wait_until(metrics, timeout=30, interval=0.3)
        assert text, open(os.path.join(workdir, "exporter.log")).read()[-3000:]
        series, _ = parse_exposition(text)
        assert value(series, "redis_up") == 1, text[-3000:]
        assert value(series, "redis_connected_clients") >= 1
        assert value(series, "redis_db_keys", db="db0") == 4
        assert value(series, "redis_commands_total", cmd="set") == 4
        assert value(series, "redis_commands_total", cmd="get") == 1
        assert value(series, "redis_memory_used_bytes") > 0
        assert value(series, "redis_uptime_in_seconds") >= 0
        assert ("redis_slowlog_length", frozenset()) in series
    finally:
        exporter.stop()
        r.close()
