"""TLS: the tls-port listener with Redis 7.0's parameters, as redis-cli and redis-py use it;
client certificates (tls-auth-clients), refusals (plaintext on the TLS port, a handshake that
never completes, untrusted and expired client certificates), certificate rotation by CONFIG
SET under load, a bad certificate refused with the old one kept, and a replica over TLS
(tls-replication) that keeps every WAIT-acknowledged write through a kill -9 of its primary.

Certificates are made by `openssl` in a temporary directory at the start of the module
(ECDSA P-256: quick to make). The same tests run against redis-server 7.0 with
`--target redis` (Debian's build has TLS); what only Abacus has (INFO's tls_* counters,
tls-handshake-timeout) is marked abacus_only.
"""

import os
import socket
import ssl
import subprocess
import threading
import time

import pytest
import redis

from conftest import ServerProcess, free_port
from helpers import wait_until

EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
LEAF_EXT = ("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
            "extendedKeyUsage=serverAuth,clientAuth\n"
            "basicConstraints=CA:FALSE\n")


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_leaf(d, name, ca="ca"):
    """A key and a certificate signed by `ca`, valid now, for 127.0.0.1."""
    openssl("req", "-new", "-nodes", *EC, "-keyout", name + ".key", "-out", name + ".csr",
            "-subj", "/CN=" + name, cwd=d)
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt", "-CAkey", ca + ".key",
            "-CAcreateserial", "-out", name + ".crt", "-days", "30", "-extfile", "leaf.ext", cwd=d)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("tls"))
    with open(os.path.join(d, "leaf.ext"), "w") as f:
        f.write(LEAF_EXT)
    for ca in ("ca", "rogue-ca"):
        openssl("req", "-x509", "-new", "-nodes", *EC, "-keyout", ca + ".key", "-out", ca + ".crt",
                "-days", "30", "-subj", "/CN=" + ca,
                "-addext", "basicConstraints=critical,CA:TRUE",
                "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)
    for name in ("server", "server2", "client"):
        make_leaf(d, name)
    make_leaf(d, "rogue", ca="rogue-ca")
    # An expired client certificate: `openssl ca` is the tool that sets past dates.
    with open(os.path.join(d, "ca.cnf"), "w") as f:
        f.write("[ca]\ndefault_ca=d\n[d]\ndatabase=index.txt\nnew_certs_dir=.\nserial=serial\n"
                "default_md=sha256\npolicy=p\nunique_subject=no\n[p]\ncommonName=supplied\n")
    open(os.path.join(d, "index.txt"), "w").close()
    with open(os.path.join(d, "serial"), "w") as f:
        f.write("1000\n")
    openssl("req", "-new", "-nodes", *EC, "-keyout", "expired.key", "-out", "expired.csr",
            "-subj", "/CN=expired", cwd=d)
    openssl("ca", "-batch", "-config", "ca.cnf", "-cert", "ca.crt", "-keyfile", "ca.key",
            "-in", "expired.csr", "-out", "expired.crt", "-notext", "-extfile", "leaf.ext",
            "-startdate", "20200101000000Z", "-enddate", "20200102000000Z", cwd=d)
    with open(os.path.join(d, "broken.crt"), "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    return lambda name: os.path.join(d, name)


def tls_args(certs, tls_port, auth_clients="yes", extra=()):
    return ["--tls-port", tls_port, "--tls-cert-file", certs("server.crt"),
            "--tls-key-file", certs("server.key"), "--tls-ca-cert-file", certs("ca.crt"),
            "--tls-auth-clients", auth_clients, *extra]


class TlsNode:
    """A server with a plaintext port (for the harness's readiness check) and a TLS port."""

    def __init__(self, server, certs, auth_clients="yes", extra=()):
        self.tls_port = free_port()
        self.certs = certs
        self.proc = server.start(tls_args(certs, self.tls_port, auth_clients, extra))

    def client(self, cert="client", **kw):
        if cert:
            kw.setdefault("ssl_certfile", self.certs(cert + ".crt"))
            kw.setdefault("ssl_keyfile", self.certs(cert + ".key"))
        kw.setdefault("socket_timeout", 10)
        return redis.Redis(host="127.0.0.1", port=self.tls_port, ssl=True,
                           ssl_ca_certs=self.certs("ca.crt"), ssl_cert_reqs="required", **kw)

    def plain(self):
        return self.proc.client()


@pytest.fixture
def node(server, certs):
    return TlsNode(server, certs)


def tls_info(client):
    return client.info("stats")


def closed_within(sock, seconds):
    """Whether the server closes `sock` within `seconds` (reading and dropping whatever it
    sends, a TLS alert say)."""
    sock.settimeout(0.2)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if sock.recv(4096) == b"":
                return True
        except socket.timeout:
            continue
        except OSError:
            return True
    return False


def test_redis_cli_over_tls(node, certs):
    base = ["redis-cli", "--tls", "--cacert", certs("ca.crt"), "--cert", certs("client.crt"),
            "--key", certs("client.key"), "-p", str(node.tls_port)]
    out = subprocess.run(base + ["SET", "k", "over-tls"], capture_output=True, text=True, timeout=20)
    assert out.stdout.strip() == "OK", out
    out = subprocess.run(base + ["GET", "k"], capture_output=True, text=True, timeout=20)
    assert out.stdout.strip() == "over-tls", out


def test_redis_py_commands_pipelines_resp3_pubsub_blocking(node):
    r = node.client()
    assert r.set("a", "1") is True
    p = r.pipeline(transaction=False)
    for i in range(500):
        p.set("p%d" % i, "x" * (i % 50))
        p.get("p%d" % i)
    out = p.execute()
    assert out[1::2] == [b"x" * (i % 50) for i in range(500)]
    # A reply larger than TLS's 16 KiB record.
    r.set("big", b"y" * 300000)
    assert r.get("big") == b"y" * 300000
    # Transactions.
    with r.pipeline(transaction=True) as t:
        t.incr("n").incr("n")
        assert t.execute() == [1, 2]
    # RESP3.
    r3 = node.client(protocol=3)
    assert r3.hset("h", mapping={"f": "v"}) == 1
    assert r3.hgetall("h") == {b"f": b"v"}
    # Pub/sub.
    sub = node.client().pubsub()
    sub.subscribe("ch")
    assert wait_until(lambda: sub.get_message(timeout=0.2) is not None, timeout=5)
    assert r.publish("ch", "hello") == 1
    msg = wait_until(lambda: sub.get_message(timeout=0.2), timeout=5)
    assert msg and msg["data"] == b"hello", msg
    sub.close()
    # A blocking command woken by another TLS client.
    result = {}

    def blocked():
        result["v"] = node.client().blpop("q", timeout=10)

    t = threading.Thread(target=blocked)
    t.start()
    assert wait_until(lambda: r.info("clients")["blocked_clients"] >= 1, timeout=5)
    r.rpush("q", "item")
    t.join(10)
    assert result.get("v") == (b"q", b"item")
    # MONITOR over TLS sees another client's command.
    with node.client().monitor() as m:
        r.get("monitored-key")
        seen = [m.next_command()["command"] for _ in range(1)]
        assert "monitored-key" in seen[0], seen
    # The plaintext port serves the same data.
    assert node.plain().get("a") == b"1"


def test_client_certificate_required_then_optional(server, certs):
    strict = TlsNode(server, certs, "yes")
    with pytest.raises(redis.exceptions.ConnectionError):
        strict.client(cert=None).ping()
    assert strict.client().ping() is True
    optional = TlsNode(server, certs, "optional")
    assert optional.client(cert=None).ping() is True
    assert optional.client().ping() is True
    # A certificate presented under `optional` must still be trusted.
    with pytest.raises(redis.exceptions.ConnectionError):
        optional.client(cert="rogue").ping()
    off = TlsNode(server, certs, "no")
    assert off.client(cert=None).ping() is True


@pytest.mark.parametrize("cert", ["rogue", "expired"])
def test_untrusted_or_expired_client_certificate_is_refused(node, cert):
    with pytest.raises(redis.exceptions.ConnectionError):
        node.client(cert=cert).ping()
    # The server carries on.
    assert node.client().ping() is True
    if not node.proc.target == "redis":
        assert wait_until(lambda: tls_info(node.plain())["tls_handshake_failures"] >= 1)


def test_plaintext_client_on_tls_port_is_disconnected(node):
    s = socket.create_connection(("127.0.0.1", node.tls_port), timeout=5)
    s.sendall(b"*1\r\n$4\r\nPING\r\n")
    try:
        assert closed_within(s, 10), "a plaintext client kept its connection on the TLS port"
    finally:
        s.close()
    assert node.client().ping() is True
    if node.proc.target != "redis":
        assert tls_info(node.plain())["tls_handshake_failures"] >= 1
        assert "Error accepting a client connection" in node.proc.log()


def test_stalled_handshakes_do_not_hold_up_other_clients(server, certs):
    n = TlsNode(server, certs, extra=["--tls-handshake-timeout", "700"] if not server.is_redis else [])
    # Many silent connections: each would hold a thread if a handshake blocked one.
    stalled = [socket.create_connection(("127.0.0.1", n.tls_port), timeout=5) for _ in range(20)]
    half = socket.create_connection(("127.0.0.1", n.tls_port), timeout=5)
    half.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello cut short
    try:
        r = n.client()
        started = time.monotonic()
        for i in range(200):
            r.set("s%d" % i, i)
            assert r.get("s%d" % i) == str(i).encode()
        # New TLS connections are served meanwhile too.
        for _ in range(10):
            assert n.client().ping() is True
        assert time.monotonic() - started < 10
        if not server.is_redis:
            assert closed_within(half, 10)
            assert all(closed_within(s, 10) for s in stalled)
            assert tls_info(n.plain())["tls_handshake_timeouts"] >= 21
    finally:
        for s in stalled + [half]:
            s.close()


def test_tls_only_with_port_zero(server, certs):
    tls_port = free_port()
    p = ServerProcess(server.target, ["--port", "0"] + tls_args(certs, tls_port))
    p.port = 0
    p.argv = [a for a in p.argv]
    # The harness put its own --port first; a later --port 0 wins, as in Redis.
    p.spawn()
    server._children.append(p)
    ctx = ssl.create_default_context(cafile=certs("ca.crt"))
    ctx.load_cert_chain(certs("client.crt"), certs("client.key"))

    def ping():
        try:
            with socket.create_connection(("127.0.0.1", tls_port), timeout=2) as raw:
                with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                    s.sendall(b"*1\r\n$4\r\nPING\r\n")
                    return s.recv(100) == b"+PONG\r\n"
        except OSError:
            return False

    assert wait_until(ping, timeout=20), p.log()


def peer_cert_der(node, certs):
    ctx = ssl.create_default_context(cafile=certs("ca.crt"))
    ctx.load_cert_chain(certs("client.crt"), certs("client.key"))
    with socket.create_connection(("127.0.0.1", node.tls_port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            return s.getpeercert(binary_form=True)


def der_of(path):
    with open(path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def test_rotation_under_load_fails_no_request(node, certs):
    assert peer_cert_der(node, certs) == der_of(certs("server.crt"))
    stop = threading.Event()
    failures = []
    done = [0]

    def load(tag, reconnect):
        r = node.client()
        i = 0
        while not stop.is_set():
            try:
                if reconnect:
                    r = node.client()
                key = "rot%s:%d" % (tag, i % 100)
                r.set(key, i)
                assert r.get(key) == str(i).encode()
                done[0] += 1
            except Exception as e:  # noqa: BLE001 - any failure is what the test counts
                failures.append(repr(e))
            i += 1

    threads = [threading.Thread(target=load, args=(n, rc)) for n, rc in enumerate((False, False, True, True))]
    for t in threads:
        t.start()
    try:
        time.sleep(0.5)
        admin = node.plain()
        for _ in range(3):
            for pair in (("server2.crt", "server2.key"), ("server.crt", "server.key")):
                # Two parameters in one CONFIG SET: the key must match the certificate.
                assert admin.execute_command("CONFIG", "SET", "tls-cert-file", certs(pair[0]),
                                             "tls-key-file", certs(pair[1])) in (True, b"OK")
                time.sleep(0.2)
        admin.execute_command("CONFIG", "SET", "tls-cert-file", certs("server2.crt"),
                              "tls-key-file", certs("server2.key"))
        time.sleep(0.3)
    finally:
        stop.set()
        for t in threads:
            t.join(20)
    assert failures == [], failures[:5]
    assert done[0] > 50
    assert peer_cert_der(node, certs) == der_of(certs("server2.crt"))


def test_rotation_in_place_by_naming_the_same_files_again(node, certs):
    """A deployment that overwrites the certificate files in place and names them again."""
    import shutil
    live = [certs("live.crt"), certs("live.key")]
    shutil.copy(certs("server.crt"), live[0])
    shutil.copy(certs("server.key"), live[1])
    admin = node.plain()
    admin.execute_command("CONFIG", "SET", "tls-cert-file", live[0], "tls-key-file", live[1])
    assert peer_cert_der(node, certs) == der_of(certs("server.crt"))
    shutil.copy(certs("server2.crt"), live[0])
    shutil.copy(certs("server2.key"), live[1])
    admin.execute_command("CONFIG", "SET", "tls-cert-file", live[0], "tls-key-file", live[1])
    assert peer_cert_der(node, certs) == der_of(certs("server2.crt"))


def test_bad_certificate_is_refused_and_the_old_one_kept(node, certs):
    admin = node.plain()
    # A certificate without its key: the pair would not match.
    with pytest.raises(redis.exceptions.ResponseError):
        admin.config_set("tls-cert-file", certs("server2.crt"))
    for param, path in (("tls-cert-file", certs("missing.crt")),
                        ("tls-cert-file", certs("broken.crt")),
                        ("tls-key-file", certs("missing.key")),
                        ("tls-ca-cert-file", certs("missing-ca.crt"))):
        with pytest.raises(redis.exceptions.ResponseError) as e:
            admin.config_set(param, path)
        assert str(e.value) == ("CONFIG SET failed (possibly related to argument '%s') - "
                                "Unable to update TLS configuration. Check server logs." % param)
    assert admin.config_get("tls-cert-file")["tls-cert-file"] == certs("server.crt")
    assert peer_cert_der(node, certs) == der_of(certs("server.crt"))
    assert node.client().ping() is True


def test_tls_parameters_config_get(node, certs):
    got = node.plain().config_get("tls-*")
    for name in ("tls-port", "tls-cert-file", "tls-key-file", "tls-key-file-pass",
                 "tls-client-cert-file", "tls-client-key-file", "tls-dh-params-file",
                 "tls-ca-cert-file", "tls-ca-cert-dir", "tls-auth-clients", "tls-protocols",
                 "tls-ciphers", "tls-ciphersuites", "tls-prefer-server-ciphers",
                 "tls-session-caching", "tls-session-cache-size", "tls-session-cache-timeout",
                 "tls-replication", "tls-cluster"):
        assert name in got, name
    assert got["tls-port"] == str(node.tls_port)
    assert got["tls-auth-clients"] == "yes"
    assert got["tls-session-cache-size"] == "20480"
    assert got["tls-session-cache-timeout"] == "300"


def test_tls_protocols_limit_versions(server, certs):
    n = TlsNode(server, certs, extra=["--tls-protocols", "TLSv1.2"])
    ctx = ssl.create_default_context(cafile=certs("ca.crt"))
    ctx.load_cert_chain(certs("client.crt"), certs("client.key"))
    with socket.create_connection(("127.0.0.1", n.tls_port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            assert s.version() == "TLSv1.2"
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    with pytest.raises((ssl.SSLError, OSError)):
        with socket.create_connection(("127.0.0.1", n.tls_port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(b"*1\r\n$4\r\nPING\r\n")
                s.recv(10)


def test_replica_over_tls_keeps_waited_writes_through_kill9(server, certs):
    primary = TlsNode(server, certs)
    replica = TlsNode(server, certs, extra=["--tls-replication", "yes"])
    rc = replica.plain()
    assert rc.execute_command("REPLICAOF", "127.0.0.1", primary.tls_port) in (b"OK", True)
    assert wait_until(lambda: rc.info("replication").get("master_link_status") == "up",
                      timeout=20), replica.proc.log()
    pc = primary.client()
    acked = {}
    for i in range(2000):
        pc.set("w%d" % i, i)
        if i % 100 == 99:
            assert pc.execute_command("WAIT", 1, 10000) >= 1
            acked = {"w%d" % j: str(j).encode() for j in range(i + 1)}
    # Writes after the last WAIT may or may not have reached the replica.
    for i in range(2000, 2100):
        pc.set("w%d" % i, i)
    os.killpg(primary.proc.proc.pid, 9)
    primary.proc.proc.wait()
    assert wait_until(lambda: rc.info("replication").get("master_link_status") == "down", timeout=20)
    p = rc.pipeline(transaction=False)
    for k in acked:
        p.get(k)
    assert p.execute() == list(acked.values())
    assert len(acked) == 2000
    # The replica's clients read it over TLS too.
    assert replica.client().get("w0") == b"0"


def test_chained_replica_over_tls(server, certs):
    """A replica of a replica, every link over TLS: writes reach the end of the chain."""
    primary = TlsNode(server, certs)
    middle = TlsNode(server, certs, extra=["--tls-replication", "yes"])
    last = TlsNode(server, certs, extra=["--tls-replication", "yes"])
    for node, upstream in ((middle, primary), (last, middle)):
        c = node.plain()
        assert c.execute_command("REPLICAOF", "127.0.0.1", upstream.tls_port) in (b"OK", True)
        assert wait_until(lambda c=c: c.info("replication").get("master_link_status") == "up",
                          timeout=20), node.proc.log()
    pc = primary.client()
    for i in range(500):
        pc.set("c%d" % i, i)
    assert wait_until(lambda: last.client().get("c499") == b"499", timeout=20), last.proc.log()
    assert last.client().dbsize() == 500


def test_replica_without_tls_replication_cannot_reach_a_tls_port(server, certs):
    primary = TlsNode(server, certs)
    replica = server.start([])
    rc = replica.client()
    rc.execute_command("REPLICAOF", "127.0.0.1", primary.tls_port)
    time.sleep(2)
    assert rc.info("replication").get("master_link_status") == "down"
    assert primary.client().ping() is True


def bus_free_port(taken):
    """A port whose cluster bus port (+10000) is free too."""
    for _ in range(500):
        p = 20000 + int.from_bytes(os.urandom(2), "big") % 10000
        if p in taken:
            continue
        try:
            for q in (p, p + 10000):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", q))
            return p
        except OSError:
            continue
    raise RuntimeError("no free port pair")


def test_cluster_over_tls(server, certs):
    """Three nodes with tls-cluster yes: created by redis-cli over TLS, the bus encrypted (its
    port refuses plaintext), clients redirected to the TLS ports."""
    from redis.cluster import ClusterNode, RedisCluster
    taken, nodes = set(), []
    for _ in range(3):
        tp = bus_free_port(taken)
        taken.add(tp)
        n = ServerProcess(server.target, ["--cluster-enabled", "yes", "--cluster-node-timeout", "5000",
                                          "--tls-cluster", "yes"] + tls_args(certs, tp))
        server._children.append(n)
        n.start()
        n.tls_port = tp
        nodes.append(n)
    cli = ["redis-cli", "--tls", "--cacert", certs("ca.crt"), "--cert", certs("client.crt"),
           "--key", certs("client.key")]
    out = subprocess.run(cli + ["--cluster", "create"] + ["127.0.0.1:%d" % n.tls_port for n in nodes]
                         + ["--cluster-yes"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    for n in nodes:
        assert wait_until(lambda n=n: b"cluster_state:ok" in n.client().execute_command("CLUSTER", "INFO"),
                          timeout=60), n.log()
    # The bus port speaks TLS only.
    s = socket.create_connection(("127.0.0.1", nodes[0].tls_port + 10000), timeout=5)
    s.sendall(b"RCmb" + b"\x00" * 2000)
    try:
        assert closed_within(s, 10)
    finally:
        s.close()
    rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", nodes[0].tls_port)], ssl=True,
                      ssl_ca_certs=certs("ca.crt"), ssl_certfile=certs("client.crt"),
                      ssl_keyfile=certs("client.key"), ssl_cert_reqs="required")
    for i in range(200):
        assert rc.set("ck%d" % i, i)
    for i in range(200):
        assert rc.get("ck%d" % i) == str(i).encode()
    # -MOVED names the TLS port to a TLS client, the plaintext one to a plaintext client
    # (Redis's pport).
    def moved_port(client):
        for i in range(200):
            try:
                client.get("ck%d" % i)
            except redis.exceptions.ResponseError as e:
                assert str(e).startswith("MOVED"), e
                return int(str(e).rsplit(":", 1)[1])
        return None

    tls_client = redis.Redis(host="127.0.0.1", port=nodes[0].tls_port, ssl=True,
                             ssl_ca_certs=certs("ca.crt"), ssl_certfile=certs("client.crt"),
                             ssl_keyfile=certs("client.key"), ssl_cert_reqs="required")
    assert moved_port(tls_client) in [n.tls_port for n in nodes]
    assert moved_port(nodes[0].client()) in [n.port for n in nodes]
    rc.close()
