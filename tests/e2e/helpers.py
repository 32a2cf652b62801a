"""Small helpers shared by the end-to-end tests.

`RespClient` is a minimal, strict RESP2/RESP3 client over a plain socket.
Unlike redis-py it applies no response callbacks and keeps error messages
exactly as the server sent them (including the `ERR `/`WRONGTYPE ` prefix),
so tests can assert the precise wire-level reply.

Reply mapping:
  simple string  -> str             ("+OK"   -> "OK")
  error          -> Err             ("-ERR x" -> Err("ERR x"))
  integer        -> int
  bulk string    -> bytes           (null bulk -> None)
  array          -> list            (null array -> None)
  RESP3 null     -> None
  RESP3 boolean  -> bool
  RESP3 double   -> float
  RESP3 bignum   -> int
  RESP3 verbatim -> Verbatim(bytes) (a bytes subclass carrying .fmt)
  RESP3 map      -> dict
  RESP3 set      -> RespSet (a list subclass; order is as sent)
  RESP3 push     -> Push (a list subclass)
"""

import binascii
import socket
import time


class Err:
    """An error reply. Compares equal to another Err or to its exact text."""

    def __init__(self, message):
        self.message = message

    def __eq__(self, other):
        if isinstance(other, Err):
            return self.message == other.message
        if isinstance(other, str):
            return self.message == other
        return NotImplemented

    def __hash__(self):
        return hash(self.message)

    def startswith(self, prefix):
        return self.message.startswith(prefix)

    def __repr__(self):
        return "Err(%r)" % self.message


class Verbatim(bytes):
    fmt = b""


class RespSet(list):
    pass


class Push(list):
    pass


class ConnectionClosed(Exception):
    pass


def encode_command(*args):
    """Encode a command as a RESP multibulk request."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, str):
            a = a.encode()
        elif isinstance(a, int):
            a = str(a).encode()
        elif isinstance(a, float):
            a = repr(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class RespClient:
    def __init__(self, host, port, timeout=10.0):
        self.host = host
        self.port = port
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    # -- low level -----------------------------------------------------
    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionClosed("connection closed by server")
        self.buf += chunk

    def _readline(self):
        while True:
            i = self.buf.find(b"\r\n")
            if i >= 0:
                line = self.buf[:i]
                self.buf = self.buf[i + 2:]
                return line
            self._fill()

    def _readexact(self, n):
        while len(self.buf) < n + 2:
            self._fill()
        data = self.buf[:n]
        if self.buf[n:n + 2] != b"\r\n":
            raise AssertionError("bulk payload not terminated by CRLF")
        self.buf = self.buf[n + 2:]
        return data

    def read_reply(self):
        line = self._readline()
        if not line:
            raise AssertionError("empty reply line")
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            return Err(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            return self._readexact(n)
        if t in (b"*", b"~", b">"):
            n = int(rest)
            if n < 0:
                return None
            items = [self.read_reply() for _ in range(n)]
            if t == b"~":
                return RespSet(items)
            if t == b">":
                return Push(items)
            return items
        if t == b"%":
            n = int(rest)
            d = {}
            for _ in range(n):
                k = self.read_reply()
                if isinstance(k, list):
                    k = tuple(k)
                d[k] = self.read_reply()
            return d
        if t == b"_":
            return None
        if t == b"#":
            return rest == b"t"
        if t == b",":
            return float(rest.decode().replace("inf", "inf"))
        if t == b"(":
            return int(rest)
        if t == b"=":
            data = self._readexact(int(rest))
            v = Verbatim(data[4:])
            v.fmt = data[:3]
            return v
        if t == b"|":
            # attribute: read and discard, then return the following reply
            n = int(rest)
            for _ in range(2 * n):
                self.read_reply()
            return self.read_reply()
        raise AssertionError("unknown RESP type byte %r in %r" % (t, line))

    # -- high level ----------------------------------------------------
    def execute(self, *args):
        self.send(encode_command(*args))
        return self.read_reply()

    __call__ = execute

    def pipeline(self, commands):
        self.send(b"".join(encode_command(*c) for c in commands))
        return [self.read_reply() for _ in commands]

    def is_closed(self, timeout=5.0):
        """True if the server closes the connection within `timeout` seconds
        (any pending, unread data is discarded)."""
        self.buf = b""
        deadline = time.monotonic() + timeout
        old = self.sock.gettimeout()
        try:
            while time.monotonic() < deadline:
                self.sock.settimeout(max(0.01, deadline - time.monotonic()))
                try:
                    chunk = self.sock.recv(1 << 16)
                except socket.timeout:
                    return False
                except (ConnectionResetError, BrokenPipeError):
                    return True
                if not chunk:
                    return True
            return False
        finally:
            self.sock.settimeout(old)

    def no_reply_within(self, seconds):
        """True if nothing at all arrives within `seconds`."""
        if self.buf:
            return False
        old = self.sock.gettimeout()
        self.sock.settimeout(seconds)
        try:
            chunk = self.sock.recv(1 << 16)
        except socket.timeout:
            return True
        finally:
            self.sock.settimeout(old)
        self.buf += chunk
        return False

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def send_raw(host, port, data, nreplies=1, timeout=10.0):
    """Open a fresh connection, send `data` in one write, and read
    `nreplies` parsed replies. Returns (replies, client); the caller
    may keep using or close the client."""
    c = RespClient(host, port, timeout=timeout)
    c.send(data)
    replies = [c.read_reply() for _ in range(nreplies)]
    return replies, c


def wait_until(predicate, timeout=5.0, interval=0.02):
    """Poll `predicate` until it returns a truthy value or `timeout`
    seconds elapse. Returns the last value (never raises on timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


def info_dict(text):
    """Parse INFO output (bytes or str) into {field: value-string}."""
    if isinstance(text, bytes):
        text = text.decode()
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        k, _, v = line.partition(":")
        out[k] = v
    return out


def info_sections(text):
    if isinstance(text, bytes):
        text = text.decode()
    return [line[2:].strip() for line in text.splitlines() if line.startswith("# ")]


def kv_fields(value):
    """Parse 'a=1,b=2' into {'a': '1', 'b': '2'}."""
    out = {}
    for part in value.split(","):
        k, _, v = part.partition("=")
        out[k] = v
    return out


def shard_of(key, shards=2):
    """The shard of `key` in a server with `shards` worker threads: its Redis Cluster slot
    mod `shards` (binascii.crc_hqx is Redis Cluster's CRC-16/XMODEM)."""
    return (binascii.crc_hqx(key.encode(), 0) % 16384) % shards


def key_on(shard, prefix):
    """The first key `prefix:N` that lives on `shard` (of two)."""
    i = 0
    while True:
        k = "%s:%d" % (prefix, i)
        if shard_of(k) == shard:
            return k
        i += 1
