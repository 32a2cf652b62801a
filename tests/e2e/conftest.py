"""End-to-end test harness for Abacus (and the real Redis, as the oracle).

Run:
    python -m pytest tests/e2e                   # against target/release/abacus
    python -m pytest tests/e2e --target redis    # against /usr/bin/redis-server

Environment:
    ABACUS_TEST_TARGET   abacus|redis (overridden by --target)
    ABACUS_BIN           path of the abacus binary
                         (default <repo>/target/release/abacus)
    REDIS_SERVER_BIN     path of redis-server (default: found on PATH)
"""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest
import redis

from helpers import RespClient, encode_command

HOST = "127.0.0.1"
REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
START_TIMEOUT = 20.0


def pytest_addoption(parser):
    parser.addoption(
        "--target",
        action="store",
        default=None,
        choices=("abacus", "redis"),
        help="server under test: abacus (default) or redis (the reference)",
    )


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "one_shard: run on a private single-thread server (test_eviction.py)")
    config.addinivalue_line(
        "markers", "abacus_only(reason): behaviour specific to abacus; skipped "
        "against redis")


def _target(config):
    t = config.getoption("--target") or os.environ.get("ABACUS_TEST_TARGET") or "abacus"
    if t not in ("abacus", "redis"):
        raise pytest.UsageError("unknown target %r (abacus|redis)" % t)
    return t


def pytest_report_header(config):
    return "abacus e2e target: %s" % _target(config)


def pytest_collection_modifyitems(config, items):
    target = _target(config)
    for item in items:
        m = item.get_closest_marker("abacus_only")
        if target == "redis" and m:
            reason = m.args[0] if m.args else m.kwargs.get("reason", "abacus-specific behaviour")
            item.add_marker(pytest.mark.skip(reason="abacus only: " + reason))


# Starts tried when the picked port turns out to be taken (see repick_port_if_taken).
PORT_ATTEMPTS = 3


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class ServerProcess:
    """One running server process (abacus or redis-server)."""

    def __init__(self, target, extra_args=(), port=None):
        self.target = target
        self.host = HOST
        self.auto_port = port is None
        self.port = port or free_port()
        self.dir = tempfile.mkdtemp(prefix="abacus-e2e-")
        self.log_path = os.path.join(self.dir, "server.log")
        self.extra_args = [str(a) for a in extra_args]
        self.proc = None
        self.argv = self._argv()

    def _argv(self):
        if self.target == "redis":
            binary = os.environ.get("REDIS_SERVER_BIN") or shutil.which("redis-server") \
                or "/usr/bin/redis-server"
            return [binary, "--port", str(self.port), "--dir", self.dir,
                    "--save", "", "--appendonly", "no",
                    "--bind", "127.0.0.1",
                    # Redis 7 disables DEBUG by default; abacus allows DEBUG SLEEP.
                    "--enable-debug-command", "local"] + self.extra_args
        binary = os.environ.get("ABACUS_BIN") or os.path.join(
            REPO_ROOT, "target", "release", "abacus")
        return [binary, "serve", "--port", str(self.port), "--dir", self.dir,
                "--threads", "2"] + self.extra_args

    def spawn(self):
        """Start the process without waiting for readiness."""
        if not os.path.exists(self.argv[0]):
            shutil.rmtree(self.dir, ignore_errors=True)
            pytest.fail("server binary not found: %s (build it with `cargo build "
                        "--release`, or set ABACUS_BIN / REDIS_SERVER_BIN)" % self.argv[0])
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.dir,
                                     start_new_session=True)
        return self

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def ping_ok(self):
        """True if the server answers a PING with any reply but -LOADING (an
        error such as NOAUTH also proves it is up)."""
        try:
            with socket.create_connection((self.host, self.port), timeout=1.0) as s:
                s.sendall(encode_command("PING"))
                data = s.recv(100)
                # -LOADING: up, but still loading its data (not ready yet).
                return data[:1] in (b"+", b"-") and not data.startswith(b"-LOADING")
        except OSError:
            return False

    def wait_ready(self, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited early with code %s\ncommand: %s\n%s"
                                   % (self.proc.returncode, " ".join(self.argv), self.log()))
            if self.ping_ok():
                return self
            time.sleep(0.05)
        msg = ("server did not answer PING within %.0fs\ncommand: %s\n%s"
               % (timeout, " ".join(self.argv), self.log()))
        self.stop()
        raise RuntimeError(msg)

    def start(self):
        for attempt in range(PORT_ATTEMPTS):
            self.spawn()
            try:
                return self.wait_ready()
            except RuntimeError as e:
                if self.repick_port_if_taken(attempt):
                    continue
                self.stop()
                pytest.fail(str(e))

    def lost_its_port(self):
        """Whether the process exited because its port was taken: free_port only finds a
        port that was free a moment before; another process, or a client's ephemeral port,
        may take it before the server binds."""
        return self.proc.poll() is not None and "address already in use" in self.log().lower()

    def repick_port_if_taken(self, attempt):
        """After a failed start: if the process lost its port, pick another and return True,
        so the caller starts again. Only for ports this class picked, and a few times."""
        if not self.auto_port or attempt + 1 >= PORT_ATTEMPTS or not self.lost_its_port():
            return False
        self._log.close()
        self._log = None
        self.port = free_port()
        self.argv = self._argv()
        return True

    def wait_exit(self, timeout):
        """Wait (bounded) for the process to exit on its own; return its code
        or None if it is still running."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                self.proc.wait(timeout=5)
        if getattr(self, "_log", None):
            self._log.close()
            self._log = None
        shutil.rmtree(self.dir, ignore_errors=True)

    # convenience clients
    def client(self, **kw):
        kw.setdefault("socket_timeout", 10)
        kw.setdefault("socket_connect_timeout", 5)
        return redis.Redis(host=self.host, port=self.port, **kw)

    def raw(self, timeout=10.0):
        return RespClient(self.host, self.port, timeout=timeout)


class Server:
    """The `server` fixture: the shared server plus a way to start extra ones."""

    def __init__(self, target, main):
        self.target = target
        self.main = main
        self.host = main.host
        self.port = main.port
        self._children = []

    def start(self, extra_args=(), wait=True):
        """Start a private server with extra redis-style args (e.g.
        ['--requirepass', 'pw']). It is stopped at the end of the test.
        With wait=False the process is only spawned (for start-up failure
        tests); use .wait_exit()/.wait_ready() on the result."""
        p = ServerProcess(self.target, extra_args)
        self._children.append(p)
        if wait:
            return p.start()
        return p.spawn()

    def _cleanup_children(self):
        while self._children:
            self._children.pop().stop()

    def client(self, **kw):
        return self.main.client(**kw)

    def raw(self, timeout=10.0):
        return self.main.raw(timeout)

    @property
    def is_redis(self):
        return self.target == "redis"


@pytest.fixture(scope="module")
def real_redis():
    """A real redis-server (Debian's) beside the server under test: the reference end of
    byte-level comparisons and DUMP/MIGRATE round trips."""
    p = ServerProcess("redis")
    p.start()
    yield p
    p.stop()


@pytest.fixture(scope="session")
def target(request):
    return _target(request.config)


@pytest.fixture(scope="session")
def _main_server(target):
    p = ServerProcess(target)
    p.start()
    yield p
    p.stop()


@pytest.fixture
def server(target, _main_server):
    s = Server(target, _main_server)
    yield s
    s._cleanup_children()


@pytest.fixture
def r(server):
    """redis-py client (RESP2, bytes) on a FLUSHALLed server."""
    client = server.client(decode_responses=False)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def r3(server, r):
    """redis-py client speaking RESP3 (the server is already flushed by `r`)."""
    client = server.client(decode_responses=False, protocol=3)
    yield client
    client.close()


@pytest.fixture
def c(server, r):
    """Exact wire-level RESP client (see helpers.RespClient) on a flushed server."""
    client = server.raw()
    yield client
    client.close()


@pytest.fixture
def raw_conn(server, r):
    """Factory for extra RespClient connections, closed at test end."""
    conns = []

    def make(timeout=10.0, srv=None):
        srv = srv or server
        cl = RespClient(srv.host, srv.port, timeout=timeout)
        conns.append(cl)
        return cl

    yield make
    for cl in conns:
        cl.close()
