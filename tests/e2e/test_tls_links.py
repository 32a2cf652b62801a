"""TLS on the links beyond the client port (issue 54): Abacus's own tools as TLS clients
(`abacus ingest`, `abacus export`, `abacus bench w1z` with redis-cli's `--tls --cacert
--cacertdir --cert --key --sni --insecure`), and their refusals (an untrusted server, a
missing client certificate, TLS options without --tls, --tls against a plaintext port).

Certificates come from test_tls.py's `certs` fixture (made by `openssl` in the test).
"""

import os
import shutil
import socket
import ssl
import subprocess
import tempfile

import pytest

from conftest import free_port
from test_summarizer import ABACUS
from test_tls import TlsNode, certs  # noqa: F401  (the fixture)

duckdb = pytest.importorskip("duckdb", reason="pip install -r tests/requirements.txt")
pq = pytest.importorskip("pyarrow.parquet", reason="pip install -r tests/requirements.txt")

RULES = '''
[feed.v1]
format = "csv"
columns = ["ts", "campaign", "user"]
time = { field = "ts", unit = "s" }

[[summary]]
name = "by_campaign"
feed = "v1"
dimensions = ["campaign"]
bucket = "none"
metrics = { n = "count", users = "distinct(user)" }
'''


@pytest.fixture(scope="module")
def workdir():
    d = tempfile.mkdtemp(prefix="abacus-tls-links-")
    with open(os.path.join(d, "rules.toml"), "w") as f:
        f.write(RULES)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def tool_tls(certs, cert="client"):
    args = ["--tls", "--cacert", certs("ca.crt")]
    if cert:
        args += ["--cert", certs(cert + ".crt"), "--key", certs(cert + ".key")]
    return args


def run(args, timeout=120):
    return subprocess.run([ABACUS] + [str(a) for a in args], capture_output=True, text=True, timeout=timeout)


def events(n):
    return "".join("%d,c%d,u%d\n" % (1_700_000_000 + i, i % 7, i % 101) for i in range(n))


def counts(client):
    """SUMMARY.QUERY by_campaign GROUPBY campaign as {campaign: n}."""
    reply = client.execute_command("SUMMARY.QUERY", "by_campaign", "GROUPBY", "campaign")
    out = {}
    for row in reply:
        d = dict(zip(row[::2], row[1::2]))
        out[d[b"campaign"]] = int(d[b"n"])
    return out


@pytest.mark.abacus_only("abacus ingest and the summarizer are Abacus's")
def test_ingest_over_tls_with_client_certificate(server, certs, workdir):
    node = TlsNode(server, certs, extra=["--summarizer-rules", os.path.join(workdir, "rules.toml")])
    path = os.path.join(workdir, "events.csv")
    with open(path, "w") as f:
        f.write(events(3000))
    p = run(["ingest", "--quiet", "--feed", "v1", "-p", node.tls_port, *tool_tls(certs), path])
    assert p.returncode == 0, p.stderr
    # Three connections, each a TLS link of its own, over a second file.
    path2 = os.path.join(workdir, "events2.csv")
    with open(path2, "w") as f:
        f.write(events(2000))
    p = run(["ingest", "--quiet", "--feed", "v1", "-p", node.tls_port, "--connections", "3",
             *tool_tls(certs), path2])
    assert p.returncode == 0, p.stderr
    want = {}
    for n in (3000, 2000):
        for i in range(n):
            k = b"c%d" % (i % 7)
            want[k] = want.get(k, 0) + 1
    assert counts(node.client()) == want
    assert int(node.plain().info("stats")["tls_handshakes"]) >= 5


def test_bench_w1z_over_tls_reader_and_writer_threads(server, certs):
    """w1z runs a reader thread and a writer thread on each connection: one TLS connection
    shared by two threads (abacus-tls's BlockingStream), and a PING connection."""
    node = TlsNode(server, certs)
    p = run(["bench", "w1z", "-p", node.tls_port, *tool_tls(certs), "--keys", "2000", "--rate", "2000",
             "--minutes", "0.05", "--report-secs", "1", "--connections", "2", "--label", "tls"], timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "preloaded 2000 keys" in p.stdout
    assert node.client().dbsize() == 2000
    # Every write was answered as expected: no error or mismatch in the summary.
    assert "0 error replies, 0 replies not the expected length; DBSIZE 2000 (ok)" in p.stdout, p.stdout


@pytest.mark.abacus_only("abacus export's generic keys layout reads Abacus's replies")
def test_export_over_tls(server, certs, workdir):
    node = TlsNode(server, certs)
    c = node.client()
    for i in range(500):
        c.set("k:%d" % i, "v%d" % i)
    c.hset("k:h", mapping={"f": "v"})
    out = os.path.join(workdir, "keys.parquet")
    p = run(["export", "-q", "-p", node.tls_port, *tool_tls(certs), "--keys", "k:*", "--out", out])
    assert p.returncode == 0, p.stderr
    rows = {(r["key"], r["member"], r["value"]) for r in pq.read_table(out).to_pylist()}
    want = {("k:%d" % i, None, b"v%d" % i) for i in range(500)} | {("k:h", b"f", b"v")}
    assert rows == want


def test_tool_tls_options_and_refusals(server, certs, workdir):
    node = TlsNode(server, certs)
    base = ["export", "-q", "-p", node.tls_port, "--keys", "none:*", "--out", os.path.join(workdir, "x.parquet")]
    # The server's certificate does not chain to the CA given.
    p = run(base + ["--tls", "--cacert", certs("rogue-ca.crt"), "--cert", certs("client.crt"),
                    "--key", certs("client.key")])
    assert p.returncode != 0 and "TLS handshake" in p.stderr and "UnknownIssuer" in p.stderr, p.stderr
    # No client certificate while the server requires one (tls-auth-clients yes): the server
    # refuses after the handshake (TLS 1.3 checks it after the client's Finished).
    p = run(base + ["--tls", "--cacert", certs("ca.crt")])
    assert p.returncode != 0, p.stderr
    # TLS options without --tls; --cert without --key; an unreadable CA file.
    p = run(base + ["--cacert", certs("ca.crt")])
    assert p.returncode != 0 and "need --tls" in p.stderr, p.stderr
    p = run(base + ["--tls", "--cacert", certs("ca.crt"), "--cert", certs("client.crt")])
    assert p.returncode != 0 and "--cert and --key go together" in p.stderr, p.stderr
    p = run(base + ["--tls", "--cacert", os.path.join(workdir, "missing.crt")])
    assert p.returncode != 0 and "--cacert: cannot read" in p.stderr, p.stderr
    # --tls against the plaintext port: a clean failure, not a hang.
    p = run(["export", "-q", "-p", node.proc.port, "--keys", "none:*", "--out", os.path.join(workdir, "x.parquet"),
             *tool_tls(certs)], timeout=60)
    assert p.returncode != 0 and "TLS handshake" in p.stderr, p.stderr
    assert not os.path.exists(os.path.join(workdir, "x.parquet"))


def test_tool_cacertdir_insecure_and_sni(server, certs, workdir):
    node = TlsNode(server, certs)
    node.client().set("k:1", "v")
    cadir = os.path.join(workdir, "cadir")
    os.makedirs(cadir, exist_ok=True)
    shutil.copy(certs("ca.crt"), os.path.join(cadir, "ca.pem"))
    client = ["--cert", certs("client.crt"), "--key", certs("client.key")]
    for how in (["--cacertdir", cadir], ["--insecure"], ["--cacert", certs("ca.crt"), "--sni", "localhost"]):
        out = os.path.join(workdir, "k.parquet")
        p = run(["export", "-q", "-p", node.tls_port, "--tls", *how, *client, "--keys", "k:*", "--out", out])
        assert p.returncode == 0, (how, p.stderr)
        assert [r["value"] for r in pq.read_table(out).to_pylist()] == [b"v"]
        os.remove(out)
