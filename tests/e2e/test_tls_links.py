"""TLS on the links beyond the client port (issue 54):
- Abacus's own tools as TLS clients (`abacus ingest`, `abacus export`, `abacus bench w1z`
  with redis-cli's `--tls --cacert --cacertdir --cert --key --sni --insecure`), and their
  refusals (an untrusted server, a missing client certificate, TLS options without --tls,
  --tls against a plaintext port);
- the ingest port with `ingest-tls yes` and the metrics endpoint with `metrics-tls yes`
  (HTTPS, scraped by a real Prometheus with a client certificate);
- encrypted keys (`tls-key-file-pass`, `tls-client-key-file-pass`: PKCS#8 made by
  `openssl pkcs8 -topk8`), legacy encrypted PEM refused, `tls-dh-params-file` checked,
  session resumption bounded by `tls-session-cache-timeout`;
- stock Redis Sentinel over TLS promoting a replica after kill -9 of the primary.

Certificates come from test_tls.py's `certs` fixture (made by `openssl` in the test). What
applies to Redis 7.0 also runs with `--target redis`; the rest is marked abacus_only.
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


# ---------------------------------------------------------------- ingest-port and metrics over TLS

def tls_context(certs, cert="client"):
    ctx = ssl.create_default_context(cafile=certs("ca.crt"))
    ctx.check_hostname = False
    if cert:
        ctx.load_cert_chain(certs(cert + ".crt"), certs(cert + ".key"))
    return ctx


def push_lines_tls(port, data, ctx):
    """Sends `data` to the ingest port over TLS, ends the stream with close_notify (the TLS
    end of a producer's stream) and reads the server's one reply line. Memory BIOs, because
    an SSLSocket cannot send close_notify and go on reading."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=30)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(inc, out, server_side=False, server_hostname="localhost")

    def pump_out():
        pending = out.read()
        if pending:
            raw.sendall(pending)

    def pump_in():
        chunk = raw.recv(65536)
        if not chunk:
            inc.write_eof()
        else:
            inc.write(chunk)
        return chunk

    try:
        while True:
            try:
                obj.do_handshake()
                break
            except ssl.SSLWantReadError:
                pump_out()
                if not pump_in():
                    return b""
        pump_out()
        obj.write(data)
        pump_out()
        try:
            obj.unwrap()
        except ssl.SSLWantReadError:
            pass
        pump_out()
        reply = b""
        while not reply.endswith(b"\r\n"):
            try:
                got = obj.read(4096)
                if not got:
                    break
                reply += got
            except ssl.SSLWantReadError:
                if not pump_in():
                    break
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                break
        return reply
    finally:
        raw.close()


@pytest.mark.abacus_only("the ingest port is Abacus's")
def test_ingest_port_over_tls(server, certs, workdir):
    ingest_port = free_port()
    node = TlsNode(server, certs, extra=["--summarizer-rules", os.path.join(workdir, "rules.toml"),
                                         "--ingest-port", ingest_port, "--ingest-tls", "yes"])
    data = events(1500).encode()
    assert push_lines_tls(ingest_port, data, tls_context(certs)) == b"+OK 1500 0\r\n"
    want = {}
    for i in range(1500):
        k = b"c%d" % (i % 7)
        want[k] = want.get(k, 0) + 1
    assert counts(node.client()) == want
    before = int(node.plain().info("stats")["tls_handshake_failures"])
    # A plaintext producer on the TLS ingest port: disconnected, nothing ingested, counted.
    s = socket.create_connection(("127.0.0.1", ingest_port), timeout=10)
    s.sendall(data)
    try:
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    got = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    s.close()
    assert b"+OK" not in got
    # An untrusted client certificate: refused (tls-auth-clients yes, the TLS port's rule).
    try:
        got = push_lines_tls(ingest_port, data, tls_context(certs, cert="rogue"))
    except (OSError, ssl.SSLError):
        got = b""
    assert got == b""
    assert counts(node.client()) == want
    assert int(node.plain().info("stats")["tls_handshake_failures"]) >= before + 2
    # ingest-tls no (CONFIG SET, read per connection): the same port is plaintext again.
    node.plain().config_set("ingest-tls", "no")
    s = socket.create_connection(("127.0.0.1", ingest_port), timeout=10)
    s.sendall(b"1700000000,c0,u1\n")
    s.shutdown(socket.SHUT_WR)
    assert s.recv(100) == b"+OK 1 0\r\n"
    s.close()


@pytest.mark.abacus_only("the metrics endpoint is Abacus's")
def test_metrics_over_https(server, certs):
    import http.client
    import urllib.error
    import urllib.request
    mport = free_port()
    node = TlsNode(server, certs, extra=["--metrics-port", mport, "--metrics-tls", "yes"])
    node.client().set("k", "v")
    url = "https://127.0.0.1:%d/metrics" % mport
    with urllib.request.urlopen(url, context=tls_context(certs), timeout=10) as resp:
        body = resp.read().decode()
        assert resp.status == 200
    assert 'abacus_db_keys{db="0"} 1' in body
    assert "abacus_tls_handshakes_total" in body or "abacus_tls_handshakes " in body
    # Plain HTTP on the HTTPS port gets no metrics; nor does a client without a certificate.
    with pytest.raises((urllib.error.URLError, http.client.HTTPException, OSError)):
        urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport, timeout=10).read()
    with pytest.raises((urllib.error.URLError, ssl.SSLError, ConnectionError, OSError)):
        urllib.request.urlopen(url, context=tls_context(certs, cert=None), timeout=10).read()
    # CONFIG SET metrics-tls no: plain HTTP on the next connection.
    node.plain().config_set("metrics-tls", "no")
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % mport, timeout=10) as resp:
        assert resp.status == 200


@pytest.mark.abacus_only("ingest-tls and metrics-tls are Abacus's")
def test_side_port_tls_without_tls_port(server, certs):
    """ingest-tls / metrics-tls alone set TLS up (no tls-port), and a CONFIG SET that turns
    one on with a bad certificate is refused, as a tls-* parameter's would be."""
    mport = free_port()
    p = server.start(["--tls-cert-file", certs("server.crt"), "--tls-key-file", certs("server.key"),
                      "--tls-ca-cert-file", certs("ca.crt"), "--tls-auth-clients", "no",
                      "--metrics-port", mport, "--metrics-tls", "yes"])
    import urllib.request
    with urllib.request.urlopen("https://127.0.0.1:%d/metrics" % mport, context=tls_context(certs, cert=None),
                                timeout=10) as resp:
        assert resp.status == 200
    q = server.start(["--tls-cert-file", certs("broken.crt"), "--tls-key-file", certs("server.key"),
                      "--tls-auth-clients", "no"])
    c = q.client()
    with pytest.raises(Exception) as e:
        c.config_set("ingest-tls", "yes")
    assert "Unable to update TLS configuration" in str(e.value)
    assert c.config_get("ingest-tls") == {"ingest-tls": "no"}
    assert p.client().ping()


# ---------------------------------------------------------------- encrypted keys, DH parameters, sessions

def certs_dir(certs):
    return os.path.dirname(certs("ca.crt"))


def encrypt_key(certs, name, out, *how):
    """`openssl pkcs8 -topk8` of NAME.key into OUT with the password s3cret."""
    subprocess.run(["openssl", "pkcs8", "-topk8", *how, "-passout", "pass:s3cret", "-in", certs(name + ".key"),
                    "-out", out], cwd=certs_dir(certs), check=True, capture_output=True)
    return certs(out)


def ping_over_tls(port, certs):
    c = __import__("redis").Redis(host="127.0.0.1", port=port, ssl=True, ssl_ca_certs=certs("ca.crt"),
                                  ssl_certfile=certs("client.crt"), ssl_keyfile=certs("client.key"),
                                  ssl_cert_reqs="required", socket_timeout=10)
    return c.ping()


@pytest.mark.parametrize("how", [["-v2", "aes-256-cbc"], ["-scrypt"]], ids=["pbkdf2-aes256", "scrypt-aes256"])
def test_encrypted_key_with_tls_key_file_pass(server, certs, how):
    enc = encrypt_key(certs, "server", "server-enc-%s.key" % how[-1], *how)
    with open(enc) as f:
        assert "ENCRYPTED PRIVATE KEY" in f.read()
    port = free_port()
    p = server.start(["--tls-port", port, "--tls-cert-file", certs("server.crt"), "--tls-key-file", enc,
                      "--tls-key-file-pass", "s3cret", "--tls-ca-cert-file", certs("ca.crt")])
    assert ping_over_tls(port, certs) is True
    c = p.client()
    # A wrong password fails the CONFIG SET, and the key in use stays.
    with pytest.raises(Exception) as e:
        c.config_set("tls-key-file-pass", "wrong")
    assert "Unable to update TLS configuration" in str(e.value)
    assert c.config_get("tls-key-file-pass") == {"tls-key-file-pass": "s3cret"}
    assert ping_over_tls(port, certs) is True
    # Rotation to the plain key, and back to the encrypted one with its password.
    c.config_set("tls-key-file", certs("server.key"))
    assert ping_over_tls(port, certs) is True
    c.execute_command("CONFIG", "SET", "tls-key-file", enc, "tls-key-file-pass", "s3cret")
    assert ping_over_tls(port, certs) is True
    # Without the password (or with a wrong one) the server does not start.
    for pw in ([], ["--tls-key-file-pass", "wrong"]):
        q = server.start(["--tls-port", free_port(), "--tls-cert-file", certs("server.crt"), "--tls-key-file", enc,
                          "--tls-ca-cert-file", certs("ca.crt"), *pw], wait=False)
        assert q.wait_exit(30) not in (None, 0), q.log()


@pytest.mark.abacus_only("Redis (OpenSSL) reads OpenSSL's legacy encrypted PEM; Abacus refuses it with a hint")
def test_legacy_encrypted_pem_is_refused_with_a_hint(server, certs):
    subprocess.run(["openssl", "pkey", "-traditional", "-aes256", "-passout", "pass:s3cret", "-in", certs("server.key"),
                    "-out", "server-legacy.key"], cwd=certs_dir(certs), check=True, capture_output=True)
    q = server.start(["--tls-port", free_port(), "--tls-cert-file", certs("server.crt"),
                      "--tls-key-file", certs("server-legacy.key"), "--tls-key-file-pass", "s3cret",
                      "--tls-ca-cert-file", certs("ca.crt")], wait=False)
    assert q.wait_exit(30) not in (None, 0)
    assert "legacy key encryption (Proc-Type: 4,ENCRYPTED) is not supported" in q.log(), q.log()
    assert "openssl pkcs8 -topk8" in q.log()


def test_replica_with_encrypted_client_key(server, certs):
    """tls-client-key-file-pass: a replica presents an encrypted client key to a primary that
    requires client certificates (tls-auth-clients yes)."""
    enc = encrypt_key(certs, "client", "client-enc.key", "-v2", "aes-256-cbc")
    primary = TlsNode(server, certs)
    replica = TlsNode(server, certs, extra=["--tls-replication", "yes", "--tls-client-cert-file", certs("client.crt"),
                                            "--tls-client-key-file", enc, "--tls-client-key-file-pass", "s3cret"])
    primary.client().set("k", "v")
    rc = replica.plain()
    rc.execute_command("REPLICAOF", "127.0.0.1", primary.tls_port)
    from helpers import wait_until
    assert wait_until(lambda: rc.get("k") == b"v", timeout=30), replica.proc.log()
    with pytest.raises(Exception) as e:
        rc.config_set("tls-client-key-file-pass", "wrong")
    assert "Unable to update TLS configuration" in str(e.value)


def test_dh_params_file_is_checked(server, certs):
    # RFC 7919's ffdhe2048 group as PKCS#3 "DH PARAMETERS" (instant, unlike a new prime).
    subprocess.run(["openssl", "genpkey", "-genparam", "-algorithm", "DH", "-pkeyopt", "group:ffdhe2048", "-out", "dh.pem"],
                   cwd=certs_dir(certs), check=True, capture_output=True)
    # X9.42 parameters (`openssl dhparam -dsaparam`), which Redis 7.0 cannot read either.
    subprocess.run(["openssl", "dhparam", "-dsaparam", "-out", "dh-x942.pem", "1024"], cwd=certs_dir(certs), check=True,
                   capture_output=True)
    node = TlsNode(server, certs, extra=["--tls-dh-params-file", certs("dh.pem")])
    assert node.client().ping() is True
    c = node.plain()
    # Not DH parameters, or no file: refused, the old configuration kept.
    for bad in (certs("ca.crt"), certs("missing-dh.pem"), certs("dh-x942.pem")):
        with pytest.raises(Exception) as e:
            c.config_set("tls-dh-params-file", bad)
        assert "Unable to update TLS configuration" in str(e.value)
    assert c.config_get("tls-dh-params-file") == {"tls-dh-params-file": certs("dh.pem")}
    assert node.client().ping() is True


def resumed(port, ctx, session=None):
    """Connects with `session` (None: a fresh one), sends a PING, and returns (whether the
    server resumed the session, the session to resume next time)."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    s = ctx.wrap_socket(raw, server_hostname="localhost", session=session)
    try:
        s.sendall(b"*1\r\n$4\r\nPING\r\n")
        assert s.recv(100) == b"+PONG\r\n"
        return s.session_reused, s.session
    finally:
        s.close()


def test_session_resumption_cache_timeout_and_caching_off(server, certs):
    import time
    node = TlsNode(server, certs, extra=["--tls-session-cache-timeout", "3"])
    ctx = tls_context(certs)
    _, sess = resumed(node.tls_port, ctx)
    reused, _ = resumed(node.tls_port, ctx, sess)
    assert reused is True
    # Past tls-session-cache-timeout: a full handshake (the session is not resumed).
    time.sleep(4.5)
    reused, _ = resumed(node.tls_port, ctx, sess)
    assert reused is False
    if server.is_redis:
        return  # Redis 7.0 answers a ticket offered to it with caching off with an internal_error alert
    # tls-session-caching no: nothing is resumed.
    node.plain().config_set("tls-session-caching", "no")
    _, sess = resumed(node.tls_port, ctx)
    reused, _ = resumed(node.tls_port, ctx, sess)
    assert reused is False


# ---------------------------------------------------------------- Sentinel over TLS

def test_sentinel_over_tls_promotes_the_replica(server, certs, tmp_path):
    """Stock Redis Sentinel (Debian's redis-sentinel, installed by scripts/test.sh) with only a
    tls-port and `tls-replication yes` monitors a primary and a replica that replicate over
    TLS: it finds the replica through the primary's INFO (the TLS port it announced), and
    when the primary is killed it promotes the replica, every link encrypted."""
    import signal
    import redis
    from helpers import wait_until
    binary = shutil.which("redis-sentinel")
    argv0 = [binary] if binary else [shutil.which("redis-server") or "/usr/bin/redis-server"]
    if not os.path.exists(argv0[0] or ""):
        pytest.skip("redis-sentinel is not installed (scripts/test.sh installs it)")
    primary = TlsNode(server, certs)
    replica = TlsNode(server, certs, extra=["--tls-replication", "yes"])
    rc = replica.plain()
    rc.execute_command("REPLICAOF", "127.0.0.1", primary.tls_port)
    assert wait_until(lambda: rc.info("replication").get("master_link_status") == "up", timeout=30), replica.proc.log()
    sport = free_port()
    conf = tmp_path / "sentinel.conf"
    conf.write_text(
        "port 0\ntls-port %d\nbind 127.0.0.1\ndir %s\n"
        "tls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\n"
        "tls-replication yes\ntls-auth-clients yes\n"
        "sentinel monitor m 127.0.0.1 %d 1\n"
        "sentinel down-after-milliseconds m 1000\n"
        "sentinel failover-timeout m 6000\n"
        % (sport, tmp_path, certs("server.crt"), certs("server.key"), certs("ca.crt"), primary.tls_port))
    log_path = tmp_path / "sentinel.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv0 + [str(conf)] + ([] if binary else ["--sentinel"]), stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    try:
        s = redis.Redis(host="127.0.0.1", port=sport, ssl=True, ssl_ca_certs=certs("ca.crt"),
                        ssl_certfile=certs("client.crt"), ssl_keyfile=certs("client.key"),
                        ssl_cert_reqs="required", socket_timeout=5)

        def replicas():
            try:
                return [(r["port"], r["flags"]) for r in s.sentinel_slaves("m")]
            except (redis.ConnectionError, redis.TimeoutError):
                return None

        assert wait_until(lambda: replicas() == [(replica.tls_port, "slave")], timeout=30), \
            (replicas(), log_path.read_text())
        pc = primary.client()
        for i in range(200):
            pc.set("s%d" % i, i)
        assert pc.execute_command("WAIT", 1, 10000) == 1
        os.killpg(primary.proc.proc.pid, signal.SIGKILL)
        primary.proc.proc.wait()

        def master():
            try:
                return s.sentinel_get_master_addr_by_name("m")
            except (redis.ConnectionError, redis.TimeoutError):
                return None

        assert wait_until(lambda: master() == (b"127.0.0.1", replica.tls_port), timeout=60), \
            (master(), log_path.read_text())
        switched = "+switch-master m 127.0.0.1 %d 127.0.0.1 %d" % (primary.tls_port, replica.tls_port)
        assert wait_until(lambda: switched in log_path.read_text(), timeout=60), log_path.read_text()
        promoted = replica.client()
        assert wait_until(lambda: promoted.execute_command("ROLE")[0] == b"master", timeout=30)
        assert [promoted.get("s%d" % i) for i in range(200)] == [str(i).encode() for i in range(200)]
        promoted.set("after", "failover")
        assert promoted.get("after") == b"failover"
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.abacus_only("the metrics endpoint is Abacus's")
def test_prometheus_scrapes_the_https_endpoint_with_a_client_certificate(server, certs, tmp_path):
    """A real Prometheus (Debian's, installed by scripts/test.sh) scrapes `metrics-tls yes`
    with its tls_config: the CA, a client certificate (tls-auth-clients yes), and its own
    check of the server's name (the certificate's IP SAN 127.0.0.1)."""
    import urllib.parse
    from helpers import wait_until
    from test_metrics import PROMETHEUS, Proc, http_json
    if PROMETHEUS is None:
        pytest.skip("the Debian prometheus package is not installed (scripts/test.sh installs it)")
    mport = free_port()
    node = TlsNode(server, certs, extra=["--metrics-port", mport, "--metrics-tls", "yes"])
    c = node.client()
    for i in range(3):
        c.set("k%d" % i, "v")
    pport = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: abacus\n    scheme: https\n"
        "    tls_config:\n      ca_file: %s\n      cert_file: %s\n      key_file: %s\n"
        "    static_configs:\n      - targets: ['127.0.0.1:%d']\n"
        % (certs("ca.crt"), certs("client.crt"), certs("client.key"), mport))
    prom = Proc([PROMETHEUS, "--config.file", str(config), "--storage.tsdb.path", str(tmp_path / "data"),
                 "--web.listen-address", "127.0.0.1:%d" % pport], str(tmp_path / "prometheus.log"))
    try:
        def query(q):
            got = http_json("http://127.0.0.1:%d/api/v1/query?query=%s" % (pport, urllib.parse.quote(q)))
            if not got or got.get("status") != "success":
                return None
            return got["data"]["result"] or None

        up = wait_until(lambda: query('up{job="abacus"} == 1'), timeout=60, interval=0.5)
        assert up, (tmp_path / "prometheus.log").read_text()[-3000:]
        keys = wait_until(lambda: query('abacus_db_keys{db="0"}'), timeout=30, interval=0.5)
        assert keys and float(keys[0]["value"][1]) == 3
    finally:
        prom.stop()
