"""Seeded, deterministic fuzzing of the request path.

Project rule under test: every malformed or oversized request gets a Redis-style error reply or
a clean disconnect; the server never panics, hangs or loses data because of what a client sent.

Each test starts a private server (so its log can be checked for panics) and sends cases, each
on a fresh connection:

- `test_fuzz_mutated_resp`: valid commands encoded as RESP multibulk (or inline), then mutated
  byte-wise (flips, truncation, duplication, hostile headers such as `*-5`, `$9999...`,
  `*2147483648`, RESP3 type bytes, nested arrays, NULs, very long lines, broken quoting).
- `test_fuzz_hostile_arguments`: well-framed commands with hostile arguments (wrong arities,
  i64 extremes, huge counts and offsets, overflowing INCRBY / INCRBYFLOAT, non-UTF-8 and empty
  keys) and corrupted PF* (Redis HYLL) and HLL.* (postgresql-hll) values written with SET.

After the case's bytes a sentinel (`DISCARD`, `ECHO <token>`) is sent on the same connection.
A small model of the request parser (`model_parse`, the rules of crates/protocol/src/request.rs
and Redis's processMultibulkBuffer/processInlineBuffer) says whether the case's bytes end on a
command boundary; if so the sentinel's reply is due, and getting neither it nor a close within
HANG_S is a hang. In every case the client then shuts its sending side, and the server must
close the connection within HANG_S (a server that never closes is stuck). Whatever came back
must be well-formed RESP (no frame cut in half, no CR/LF inside an error or status line).

After every case a long-lived connection checks PING and a canary string; every few cases also
a canary set and hash, that the process is alive, and that its log holds no "panicked".

At the end, tests for what the fuzzer found: `test_auth_pipelined_with_large_command` (fixed in
crates/server/src/conn.rs) and `test_huge_proto_max_bulk_len_does_not_crash` (sizes no allocator can give: an
error reply, see `check_allocatable` in crates/commands/src/args.rs).

Seeds are pytest parameters; a failure message names the case index and the exact bytes, so a
case reproduces with `run_case` alone.
"""

import os
import random
import socket
import time

import pytest

from helpers import Err, RespClient, encode_command

HANG_S = 5.0
SEEDS = [1, 2, 3, 4]
MUTATED_CASES_PER_SEED = 2500
HOSTILE_RANDOM_CASES_PER_SEED = 250
DEEP_CHECK_EVERY = 20

SERVER_ARGS = ["--appendonly", "no", "--save", ""]

MAX_INLINE = 64 * 1024
MAX_BULK = 512 * 1024 * 1024
MAX_MULTIBULK = 2 ** 31 - 1

I64_MAX = 2 ** 63 - 1
I64_MIN = -2 ** 63


# ------------------------------------------------------------------ a model of the parser

def string2ll(s):
    """Redis's string2ll grammar (crates/protocol/src/lib.rs)."""
    if not s or len(s) >= 21:
        return None
    if s == b"0":
        return 0
    neg = s[:1] == b"-"
    digits = s[1:] if neg else s
    if not digits or digits[:1] not in b"123456789" or not digits.isdigit():
        return None
    if not all(48 <= c <= 57 for c in digits):
        return None
    v = int(digits)
    v = -v if neg else v
    if not I64_MIN <= v <= I64_MAX:
        return None
    return v


def _isspace(c):
    return c in (0x20, 0x09, 0x0A, 0x0B, 0x0C, 0x0D)


def split_args(line):
    """Port of sdssplitargs (crates/protocol/src/inline.rs); None on unbalanced quotes."""
    out = []
    p = 0

    def at(i):
        return line[i] if i < len(line) else 0

    while True:
        while at(p) != 0 and _isspace(at(p)):
            p += 1
        if at(p) == 0:
            return out
        cur = bytearray()
        inq = insq = False
        while True:
            c = at(p)
            if inq:
                if c == 0x5C and at(p + 1) == ord("x") and all(
                        chr(at(p + k)) in "0123456789abcdefABCDEF" and at(p + k) != 0
                        for k in (2, 3)):
                    cur.append(int(bytes([at(p + 2), at(p + 3)]), 16))
                    p += 4
                    continue
                if c == 0x5C and at(p + 1) != 0:
                    p += 1
                    cur.append({ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("b"): 8,
                                ord("a"): 7}.get(at(p), at(p)))
                elif c == ord('"'):
                    if at(p + 1) != 0 and not _isspace(at(p + 1)):
                        return None
                    p += 1
                    break
                elif c == 0:
                    return None
                else:
                    cur.append(c)
            elif insq:
                if c == 0x5C and at(p + 1) == ord("'"):
                    p += 1
                    cur.append(ord("'"))
                elif c == ord("'"):
                    if at(p + 1) != 0 and not _isspace(at(p + 1)):
                        return None
                    p += 1
                    break
                elif c == 0:
                    return None
                else:
                    cur.append(c)
            else:
                if c in (0x20, 0x0A, 0x0D, 0x09, 0):
                    if c != 0:
                        p += 1
                    break
                if c == ord('"'):
                    inq = True
                elif c == ord("'"):
                    insq = True
                else:
                    cur.append(c)
            p += 1
        out.append(bytes(cur))


def model_parse(data):
    """How the server splits `data` (all of it received): ("ok", commands) if it ends on a
    command boundary, ("partial", commands) if it ends inside a command, ("error", commands)
    if a protocol error closes the connection after `commands`."""
    pos, n, cmds = 0, len(data), []
    while pos < n:
        if data[pos] == ord("*"):
            cr = data.find(b"\r", pos)
            if cr < 0:
                return ("error" if n - pos > MAX_INLINE else "partial"), cmds
            if cr + 1 >= n:
                return "partial", cmds
            count = string2ll(data[pos + 1:cr])
            if count is None or count > MAX_MULTIBULK:
                return "error", cmds
            p = cr + 2
            if count <= 0:
                pos = p
                continue
            args = []
            for _ in range(count):
                cr = data.find(b"\r", p)
                if cr < 0:
                    return ("error" if n - p > MAX_INLINE else "partial"), cmds
                if cr + 1 >= n:
                    return "partial", cmds
                if data[p] != ord("$"):
                    return "error", cmds
                ln = string2ll(data[p + 1:cr])
                if ln is None or ln < 0 or ln > MAX_BULK:
                    return "error", cmds
                s = cr + 2
                if s + ln + 2 > n:
                    return "partial", cmds
                args.append(data[s:s + ln])
                p = s + ln + 2
            cmds.append(args)
            pos = p
        else:
            nl = data.find(b"\n", pos)
            if nl < 0:
                return ("error" if n - pos > MAX_INLINE else "partial"), cmds
            end = nl
            if end > pos and data[end - 1] == 0x0D:
                end -= 1
            toks = split_args(data[pos:end])
            if toks is None:
                return "error", cmds
            pos = nl + 1
            if toks:
                cmds.append(toks)
    return "ok", cmds


# ------------------------------------------------------------------ reply checking

class BadReply(Exception):
    pass


def check_resp_stream(buf):
    """Parse the server's whole output as RESP frames; raise BadReply on anything malformed
    (including a frame cut short by the close). Returns the number of top-level frames."""
    pos = 0

    def line(p):
        i = buf.find(b"\r\n", p)
        if i < 0:
            raise BadReply("incomplete line at offset %d" % p)
        return buf[p:i], i + 2

    def frame(p, depth=0):
        if depth > 64:
            raise BadReply("nesting too deep")
        if p >= len(buf):
            raise BadReply("missing frame at offset %d" % p)
        t = buf[p:p + 1]
        body, nxt = line(p + 1)
        if t in (b"+", b"-"):
            if b"\r" in body or b"\n" in body:
                raise BadReply("CR/LF inside a %r line: %r" % (t, body[:200]))
            if t == b"-" and not body:
                raise BadReply("empty error line")
            return nxt
        if t in (b":", b"("):
            try:
                int(body)
            except ValueError:
                raise BadReply("bad integer %r" % body[:100])
            return nxt
        if t == b",":
            try:
                float(body)
            except ValueError:
                raise BadReply("bad double %r" % body[:100])
            return nxt
        if t == b"_":
            if body:
                raise BadReply("bad null %r" % body)
            return nxt
        if t == b"#":
            if body not in (b"t", b"f"):
                raise BadReply("bad boolean %r" % body)
            return nxt
        if t in (b"$", b"=", b"!"):
            n = int(body)
            if n < 0:
                if t != b"$" or n != -1:
                    raise BadReply("bad bulk length %d" % n)
                return nxt
            if buf[nxt + n:nxt + n + 2] != b"\r\n":
                raise BadReply("bulk of %d not terminated by CRLF at offset %d" % (n, nxt))
            return nxt + n + 2
        if t in (b"*", b"~", b">", b"%", b"|"):
            n = int(body)
            if n < 0:
                if t != b"*" or n != -1:
                    raise BadReply("bad aggregate length %d" % n)
                return nxt
            items = n * 2 if t in (b"%", b"|") else n
            p = nxt
            for _ in range(items):
                p = frame(p, depth + 1)
            if t == b"|":
                p = frame(p, depth + 1)
            return p
        raise BadReply("unknown type byte %r at offset %d" % (t, p))

    frames = 0
    try:
        while pos < len(buf):
            pos = frame(pos)
            frames += 1
    except (ValueError, IndexError) as e:
        raise BadReply("malformed frame: %s" % e)
    return frames


def run_case(host, port, payload, token):
    """Send `payload` and the sentinel on a fresh connection. Returns (output, closed_early,
    status). Raises AssertionError on a hang or malformed output."""
    sentinel = encode_command("DISCARD") + encode_command("ECHO", token)
    expected = b"$%d\r\n%s\r\n" % (len(token), token)
    status, _ = model_parse(payload)
    due = status == "ok"
    out = bytearray()
    closed = False
    s = socket.create_connection((host, port), timeout=HANG_S)
    try:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            s.sendall(payload + sentinel)
        except (BrokenPipeError, ConnectionResetError):
            closed = True

        def recv_some(deadline):
            nonlocal closed
            s.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = s.recv(1 << 16)
            except socket.timeout:
                return False
            except (ConnectionResetError, BrokenPipeError):
                closed = True
                return True
            if not chunk:
                closed = True
                return True
            out.extend(chunk)
            return True

        if due and not closed:
            deadline = time.monotonic() + HANG_S
            while expected not in out and not closed:
                if not recv_some(deadline):
                    raise AssertionError(
                        "HANG: complete request, no reply to the sentinel and no close within "
                        "%.0fs\npayload=%r\noutput so far=%r" % (HANG_S, payload[:2000],
                                                              bytes(out[-2000:])))
        if not closed:
            try:
                s.shutdown(socket.SHUT_WR)
            except OSError:
                closed = True
        deadline = time.monotonic() + HANG_S
        while not closed:
            if not recv_some(deadline):
                raise AssertionError(
                    "HANG: no close within %.0fs after the client shut its side\n"
                    "payload=%r\noutput so far=%r" % (HANG_S, payload[:2000],
                                                      bytes(out[-2000:])))
    finally:
        s.close()
    data = bytes(out)
    try:
        check_resp_stream(data)
    except BadReply as e:
        raise AssertionError("malformed reply stream (%s)\npayload=%r\noutput=%r"
                             % (e, payload[:2000], data[-2000:]))
    return data, status


# ------------------------------------------------------------------ the harness

CANARY_KEY = b"fuzz:canary:string"
CANARY_VALUE = b"canary-\x00\xff-value"
CANARY_SET = b"fuzz:canary:set"
CANARY_HASH = b"fuzz:canary:hash"


class Harness:
    def __init__(self, proc):
        self.proc = proc
        self.host, self.port = proc.host, proc.port
        self.watch = RespClient(self.host, self.port, timeout=HANG_S)
        assert self.watch("SET", CANARY_KEY, CANARY_VALUE) == "OK"
        assert self.watch("SADD", CANARY_SET, "1", "2", "x") == 3
        assert self.watch("HSET", CANARY_HASH, "f", "v", "g", "w") == 2
        self.count = 0
        self.token_n = 0

    def token(self):
        self.token_n += 1
        return b"sentinel-%d-%d" % (os.getpid(), self.token_n)

    def case(self, payload, label=""):
        self.count += 1
        try:
            run_case(self.host, self.port, payload, self.token())
        except AssertionError as e:
            raise AssertionError("case %s #%d: %s" % (label, self.count, e)) from None
        except OSError as e:
            self.health(label, payload, deep=True)
            raise AssertionError("case %s #%d: socket error %r\npayload=%r"
                                 % (label, self.count, e, payload[:2000])) from None
        self.health(label, payload, deep=self.count % DEEP_CHECK_EVERY == 0)

    def health(self, label, payload, deep=False):
        where = "after case %s #%d (payload=%r)" % (label, self.count, payload[:2000])
        if self.proc.proc.poll() is not None:
            pytest.fail("server exited with %s %s\nlog:\n%s"
                        % (self.proc.proc.returncode, where, self.proc.log()[-5000:]))
        try:
            assert self.watch("PING") == "PONG", where
            assert self.watch("GET", CANARY_KEY) == CANARY_VALUE, "canary lost " + where
            if deep:
                assert sorted(self.watch("SMEMBERS", CANARY_SET)) == [b"1", b"2", b"x"], where
                assert self.watch("HGETALL", CANARY_HASH) == [b"f", b"v", b"g", b"w"], where
        except OSError as e:
            pytest.fail("watch connection failed (%r) %s\nlog:\n%s"
                        % (e, where, self.proc.log()[-5000:]))
        if deep:
            self.check_log(where)

    def check_log(self, where="at the end"):
        log = self.proc.log()
        if "panicked" in log:
            pytest.fail("server log shows a panic %s:\n%s" % (where, log[-5000:]))

    def finish(self):
        self.health("final", b"", deep=True)
        self.check_log()
        self.watch.close()


@pytest.fixture
def fuzz(server):
    p = server.start(SERVER_ARGS)
    h = Harness(p)
    yield h
    h.watch.close()


# ------------------------------------------------------------------ corpus and mutators

KEYS = [b"k1", b"k2", b"h1", b"s1", b"s2", b"pf1", b"pf2", b"hll1", b"hll2", b"n1"]

CORPUS = [
    [b"SET", b"k1", b"hello"],
    [b"SET", b"k2", b"v", b"EX", b"100"],
    [b"GET", b"k1"],
    [b"APPEND", b"k1", b"world"],
    [b"INCRBY", b"n1", b"5"],
    [b"INCRBYFLOAT", b"n1", b"1.5"],
    [b"EXPIRE", b"k2", b"100"],
    [b"PEXPIRE", b"k2", b"100000"],
    [b"TTL", b"k2"],
    [b"HSET", b"h1", b"f1", b"v1", b"f2", b"v2"],
    [b"HGET", b"h1", b"f1"],
    [b"HGETALL", b"h1"],
    [b"SADD", b"s1", b"1", b"2", b"3"],
    [b"SADD", b"s2", b"a", b"b", b"3"],
    [b"SINTERSTORE", b"s3", b"s1", b"s2"],
    [b"SUNION", b"s1", b"s2"],
    [b"SRANDMEMBER", b"s1", b"-3"],
    [b"PFADD", b"pf1", b"a", b"b", b"c"],
    [b"PFCOUNT", b"pf1", b"pf2"],
    [b"PFMERGE", b"pf2", b"pf1"],
    [b"HLL.CREATE", b"hll1", b"LOG2M", b"11", b"REGWIDTH", b"5"],
    [b"HLL.ADD", b"hll1", b"x", b"y"],
    [b"HLL.ADDINT", b"hll1", b"1", b"-7"],
    [b"HLL.ADDRAW", b"hll2", b"12345", b"-1"],
    [b"HLL.CARD", b"hll1", b"hll2"],
    [b"HLL.UNION", b"hll2", b"hll1"],
    [b"HLL.INFO", b"hll1"],
    [b"HLL.HASH", b"abc", b"SEED", b"3"],
    [b"HLL.HASHINT", b"42"],
    [b"MULTI"],
    [b"EXEC"],
    [b"SCAN", b"0", b"COUNT", b"10", b"MATCH", b"k*"],
    [b"DEBUG", b"POPULATE", b"3"],
    [b"CONFIG", b"GET", b"hz"],
    [b"CONFIG", b"SET", b"hz", b"10"],
    [b"CONFIG", b"GET", b"proto-max-bulk-len"],
    [b"OBJECT", b"ENCODING", b"s1"],
    [b"TYPE", b"h1"],
    [b"DEL", b"k1", b"s3"],
    [b"EXISTS", b"k1", b"k2"],
    [b"PING"],
    [b"ECHO", b"hi"],
    [b"GETRANGE", b"k1", b"0", b"-1"],
    [b"SETRANGE", b"k1", b"2", b"zz"],
    [b"MSET", b"k1", b"a", b"k2", b"b"],
]

HOSTILE_TOKENS = [
    b"*-5\r\n", b"*-1\r\n", b"*0\r\n", b"$-1\r\n", b"$-5\r\n",
    b"$99999999999999999999\r\n", b"*99999999999999999999\r\n",
    b"*2147483648\r\n", b"*2147483647\r\n", b"$536870913\r\n", b"$536870912\r\n",
    b"*9223372036854775807\r\n", b"*-9223372036854775808\r\n", b"$9223372036854775807\r\n",
    b"$abc\r\n", b"*abc\r\n", b"*\r\n", b"$\r\n", b"* 1\r\n", b"$ 3\r\n", b"*+1\r\n", b"$01\r\n",
    b"%1\r\n", b"~2\r\n", b"_\r\n", b",1.5\r\n", b"#t\r\n", b"(123\r\n", b"=5\r\ntxt:x\r\n",
    b">1\r\n", b"|1\r\n", b"!3\r\nerr\r\n", b":1\r\n", b"+OK\r\n", b"-ERR x\r\n",
    b"\x00", b"\r", b"\n", b"\r\n", b"\r\r\n", b"\n\n", b"\xff\xfe",
    b"*1\r\n" * 8, b"*1\r\n*1\r\n*1\r\n$4\r\nPING\r\n",
    b'"', b"'", b'"\\', b'\\x', b'"\\x4"', b"\t\x0b\x0c",
]


def encode(args):
    return b"".join([b"*%d\r\n" % len(args)] + [b"$%d\r\n%s\r\n" % (len(a), a) for a in args])


def quote_inline(rng, a):
    r = rng.random()
    if r < 0.5 and a and not any(c in a for c in b" \t\r\n\"'\x00"):
        return a
    if r < 0.75:
        return b'"' + b"".join(
            b"\\x%02x" % c if (c < 0x20 or c > 0x7e or c in b'"\\') else bytes([c])
            for c in a) + b'"'
    return b"'" + a.replace(b"'", b"\\'") + b"'"


def encode_inline(rng, args):
    return b" ".join(quote_inline(rng, a) for a in args) + rng.choice([b"\r\n", b"\n"])


def mutate(rng, data):
    data = bytearray(data)
    op = rng.randrange(10)
    if not data:
        op = 5
    if op == 0:  # flip a byte
        i = rng.randrange(len(data))
        data[i] ^= rng.randrange(1, 256)
    elif op == 1:  # set a byte to a structurally interesting one
        i = rng.randrange(len(data))
        data[i] = rng.choice(b"\r\n*$:-+0123456789\x00 \"'\\%~_,#")
    elif op == 2:  # truncate
        del data[rng.randrange(len(data)):]
    elif op == 3:  # duplicate a slice
        i = rng.randrange(len(data))
        j = min(len(data), i + rng.randrange(1, 40))
        data[j:j] = data[i:j]
    elif op == 4:  # delete a slice
        i = rng.randrange(len(data))
        del data[i:i + rng.randrange(1, 8)]
    elif op in (5, 6):  # insert a hostile token
        i = rng.randrange(len(data) + 1)
        data[i:i] = rng.choice(HOSTILE_TOKENS)
    elif op == 7:  # replace a header number with an extreme one
        idxs = [i for i, c in enumerate(data) if c in b"*$"]
        if idxs:
            i = rng.choice(idxs)
            j = i + 1
            while j < len(data) and data[j:j + 1].isdigit():
                j += 1
            data[i + 1:j] = rng.choice([b"-5", b"-1", b"0", b"99999999999999999999",
                                        b"2147483648", b"536870913", b"x", b"", b"1" * 30,
                                        b"9223372036854775808", b"-9223372036854775808"])
    elif op == 8:  # drop a CR or an LF
        idxs = [i for i, c in enumerate(data) if c in b"\r\n"]
        if idxs:
            del data[rng.choice(idxs)]
    else:  # insert NULs / random bytes
        i = rng.randrange(len(data) + 1)
        data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 6)))
    return bytes(data)


def special_payload(rng):
    """Big or structural payloads, not derived from the corpus."""
    k = rng.randrange(12)
    if k == 0:
        return b"a" * (MAX_INLINE + rng.randrange(1, 5000))  # too big inline request
    if k == 1:
        return b"*" + b"1" * (MAX_INLINE + 10)  # too big mbulk count string
    if k == 2:
        return b"*1\r\n$" + b"9" * (MAX_INLINE + 10)  # too big bulk count string
    if k == 3:
        return b"ECHO " + b"x" * (MAX_INLINE - 100) + b"\r\n"  # long but legal inline
    if k == 4:
        depth = rng.randrange(1, 200)
        return b"*1\r\n" * depth + encode([b"PING"])
    if k == 5:
        return rng.choice([b"%1\r\n+a\r\n+b\r\n", b"~1\r\n$4\r\nPING\r\n", b"_\r\n",
                           b",3.14\r\n", b"#f\r\n", b"(1\r\n", b">1\r\n$4\r\nPING\r\n",
                           b"=8\r\ntxt:PING\r\n", b"|1\r\n+a\r\n+b\r\n*1\r\n$4\r\nPING\r\n"])
    if k == 6:  # inline with escapes, quotes, NULs
        parts = [b"SET", b'"k\\x00\\xff\\n"', b"'it\\'s'", b'"\\q\\"\\\\"', b"a\x00b",
                 b'"unbalanced', b"'also", b'"x"y', b"\x0b\x0c"]
        rng.shuffle(parts)
        return b" ".join(parts[:rng.randrange(1, len(parts))]) + b"\r\n"
    if k == 7:  # a valid bulk whose terminator is not CRLF, then more commands
        return b"*2\r\n$4\r\nECHO\r\n$2\r\nhiXY" + encode([b"PING"])
    if k == 8:  # many tiny commands
        return b"".join(encode([b"INCR", b"n1"]) for _ in range(rng.randrange(1, 2000)))
    if k == 9:  # many empty lines and *0
        return (b"\r\n" * rng.randrange(1, 100)) + (b"*0\r\n" * rng.randrange(1, 100))
    if k == 10:  # a command with many arguments
        n = rng.randrange(1, 5000)
        return encode([b"SADD", b"s9"] + [b"%d" % i for i in range(n)])
    return b"*3\r\n$3\r\nSET\r\n$2\r\nk1\r\n$" + b"%d" % rng.randrange(1 << 20, 1 << 29) \
        + b"\r\n" + b"x" * rng.randrange(0, 1000)  # truncated big bulk


def mutated_payload(rng):
    if rng.random() < 0.12:
        base = special_payload(rng)
        return mutate(rng, base) if rng.random() < 0.5 else base
    cmds = [rng.choice(CORPUS) for _ in range(rng.randrange(1, 4))]
    if rng.random() < 0.25:
        base = b"".join(encode_inline(rng, c) for c in cmds)
    else:
        base = b"".join(encode(c) for c in cmds)
    data = base
    for _ in range(rng.randrange(1, 4)):
        data = mutate(rng, data)
    return data


# ------------------------------------------------------------------ hostile arguments

def i64s():
    return [I64_MAX, I64_MIN, I64_MAX - 1, I64_MIN + 1, 2 ** 63, -2 ** 63 - 1, 2 ** 64,
            2 ** 32, -2 ** 31, 0, -1]


def hostile_commands():
    """Well-framed commands with hostile arguments (each one case, run after SETUP)."""
    big = ["%d" % v for v in i64s()]
    c = []
    # wrong arities
    for name in ["GET", "SET", "APPEND", "INCRBY", "EXPIRE", "HSET", "SADD", "SINTERSTORE",
                 "PFADD", "PFCOUNT", "PFMERGE", "HLL.CREATE", "HLL.ADD", "HLL.CARD",
                 "HLL.UNION", "HLL.INFO", "HLL.HASH", "SCAN", "DEBUG", "CONFIG", "OBJECT",
                 "TYPE", "DEL", "GETRANGE", "SETRANGE", "SRANDMEMBER", "MULTI", "EXEC",
                 "PFDEBUG", "INCRBYFLOAT", "CONFIG|GET", "HLL.ADDINT", "HLL.ADDRAW"]:
        c.append([name])
        c.append([name, "a", "b", "c", "d", "e", "f", "g"][:2 + len(name) % 6])
    c += [["HSET", "h", "f"], ["HSET", "h", "f", "v", "g"], ["MSET", "a"], ["MSET", "a", "b", "c"],
          ["CONFIG", "GET"], ["CONFIG", "SET", "hz"], ["OBJECT"], ["OBJECT", "ENCODING"],
          ["DEBUG", "POPULATE"], ["SCAN", "0", "COUNT"], ["SCAN", "0", "MATCH"]]
    # huge counts and extremes
    for v in big + ["18446744073709551616", "1e3", "-0", "+5", " 5", "0x10", "", "nan"]:
        c += [["SCAN", "0", "COUNT", v], ["SCAN", v], ["SRANDMEMBER", "hs", v],
              ["SRANDMEMBER", "missing", v], ["SPOP", "hs", v],
              ["GETRANGE", "hstr", v, v], ["GETRANGE", "hstr", "0", v], ["GETRANGE", "hstr", v, "-1"],
              ["EXPIRE", "hstr2", v], ["PEXPIRE", "hstr2", v], ["EXPIREAT", "hstr2", v],
              ["PEXPIREAT", "hstr2", v], ["SETEX", "hx", v, "v"], ["PSETEX", "hx", v, "v"],
              ["SET", "hx", "v", "EX", v], ["SET", "hx", "v", "PX", v], ["GETEX", "hstr", "EXAT", v],
              ["INCRBY", "hnum", v], ["DECRBY", "hnum", v], ["INCRBY", "hmax", v],
              # DEBUG POPULATE does what it is asked (as Redis): only small or invalid counts
              ["DEBUG", "POPULATE", v if string2ll(v.encode()) is None or int(v) <= 100 else "2"],
              ["HLL.CREATE", "hnew", "LOG2M", v], ["HLL.CREATE", "hnew", "REGWIDTH", v],
              ["HLL.CREATE", "hnew", "EXPTHRESH", v], ["HLL.CREATE", "hnew", "SPARSEON", v],
              ["HLL.ADDINT", "hll", v], ["HLL.ADDRAW", "hll", v], ["HLL.HASH", "x", "SEED", v],
              ["HLL.HASHINT", v, "SEED", v], ["SSCAN", "hs", "0", "COUNT", v],
              ["HSCAN", "hh", "0", "COUNT", v], ["CONFIG", "SET", "hz", v],
              ["CONFIG", "SET", "lfu-log-factor", v], ["CONFIG", "SET", "hll-sparse-max-bytes", v],
              ["OBJECT", "FREQ", "hstr"], ["SRANDMEMBER", "hs", v, "extra"]]
    # SETRANGE near and beyond 512 MB (proto-max-bulk-len)
    for off in [536870911, 536870912, 536870913, 2 ** 31, 2 ** 32, I64_MAX, -1, I64_MIN]:
        c += [["SETRANGE", "hbig", "%d" % off, "xx"], ["SETRANGE", "hbig", "%d" % off, ""],
              ["SETRANGE", "missing2", "%d" % off, ""]]
    c.append(["SETRANGE", "hbig", "536870911", "x"])  # exactly 512 MB: legal, allocates
    c.append(["STRLEN", "hbig"])
    c.append(["DEL", "hbig"])
    # INCRBY overflow, INCRBYFLOAT to inf/nan
    c += [["INCRBY", "hmax", "1"], ["INCR", "hmax"], ["DECRBY", "hmin", "1"], ["DECR", "hmin"],
          ["DECRBY", "hnum", "-9223372036854775808"], ["INCRBY", "hmin", "-1"],
          ["INCRBYFLOAT", "hflt", "1e308"], ["INCRBYFLOAT", "hflt", "inf"],
          ["INCRBYFLOAT", "hflt", "-inf"], ["INCRBYFLOAT", "hflt", "nan"],
          ["INCRBYFLOAT", "hflt", "1.7976931348623157e308"], ["INCRBYFLOAT", "hflt", "1e-400"],
          ["INCRBYFLOAT", "hflt", "0x10"], ["INCRBYFLOAT", "hflt", "1" * 400],
          ["INCRBYFLOAT", "hstr", "1"], ["HINCRBYFLOAT", "hh", "f", "1e308"],
          ["HINCRBYFLOAT", "hh", "f", "inf"], ["HINCRBY", "hh", "n", "9223372036854775807"],
          ["HINCRBY", "hh", "n", "1"], ["HINCRBY", "hh", "n", "1"]]
    # non-UTF-8 and empty keys and values
    for key in [b"", b"\xff\xfe\x00", b"\r\n", b"\x80" * 300, b"k" * 70000]:
        c += [["SET", key, b"\xff\x00"], ["GET", key], ["APPEND", key, b"\xc3"],
              ["HSET", key + b"h", b"", b"\xff"], ["SADD", key + b"s", b"", b"\xff"],
              ["PFADD", key + b"p", b"\xff"], ["HLL.ADD", key + b"l", b"\xff"],
              ["TYPE", key], ["OBJECT", "ENCODING", key], ["EXPIRE", key, "100"],
              ["SINTERSTORE", key, key + b"s", b"hs"], ["PFMERGE", key + b"p", key + b"p"],
              ["SCAN", "0", "MATCH", key], ["DEL", key], ["INCRBY", key + b"h", "1"],
              [key], [key, key]]
    c += [["SCAN", "0", "MATCH", "[" * 1000], ["SCAN", "0", "MATCH", "*" * 5000 + "x"],
          ["SCAN", "0", "MATCH", "[^-]" * 200, "COUNT", "1000"], ["SCAN", "0", "TYPE", "\xff"],
          ["CONFIG", "GET", "*" * 10000], ["CONFIG", "GET", "[" * 500],
          ["OBJECT", "HELP", "x"], ["CONFIG", "SET", "hz", "10", "hz", "11"],
          ["MULTI"], ["MULTI", "x"], ["EXEC", "x"], ["DISCARD"],
          ["PFDEBUG", "GETREG", "hs"], ["PFDEBUG", "DECODE", "hstr"], ["PFDEBUG", "x", "pf"],
          ["PFCOUNT", "pf", "hs"], ["PFMERGE", "hs", "pf"], ["HLL.CARD", "pf"],
          ["PFCOUNT", "hll"], ["HLL.UNION", "pf", "hll"], ["HLL.INFO", "hs"], ["PFSELFTEST"]]
    return c


SETUP = [
    ["SET", "hstr", "hello world"], ["SET", "hstr2", "v"], ["SET", "hnum", "10"],
    ["SET", "hmax", "9223372036854775807"], ["SET", "hmin", "-9223372036854775808"],
    ["SET", "hflt", "1.5e308"], ["SET", "hbig", "abc"],
    ["SADD", "hs", "1", "2", "3", "a"], ["HSET", "hh", "f", "1.5e308", "n", "1"],
    ["PFADD", "pf", "a", "b", "c"], ["HLL.ADD", "hll", "a", "b"],
]


def corrupt(rng, data):
    data = bytearray(data)
    for _ in range(rng.randrange(1, 5)):
        op = rng.randrange(7)
        if op == 0 and data:
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
        elif op == 1 and data:
            i = rng.randrange(len(data))
            data[i] = rng.choice([0, 0xff, 0x7f, 0x80, 0x40, 0x3f, rng.randrange(256)])
        elif op == 2 and data:
            del data[rng.randrange(len(data)):]
        elif op == 3:
            data += bytes(rng.randrange(256) for _ in range(rng.randrange(1, 50)))
        elif op == 4 and len(data) > 1:  # header bytes are the interesting ones
            i = rng.randrange(min(len(data), 16))
            data[i] = rng.randrange(256)
        elif op == 5 and data:
            i = rng.randrange(len(data))
            data[i:i] = data[i:i + rng.randrange(1, 20)]
        else:
            i = rng.randrange(len(data) + 1)
            data[i:i] = rng.choice([b"\x00" * 8, b"\xff" * 8, b"\x7f\xff", b"\x80\x00"])
    return bytes(data)


def hll_sources(c):
    """Valid sketches of every representation to corrupt: {name: bytes}."""
    out = {}
    c("DEL", "src:ps", "src:pd", "src:e", "src:x", "src:s", "src:f")
    c("PFADD", "src:ps", *["e%d" % i for i in range(20)])
    out["pf-sparse"] = c("GET", "src:ps")
    c("PFADD", "src:pd", *["e%d" % i for i in range(3000)])
    out["pf-dense"] = c("GET", "src:pd")
    c("HLL.CREATE", "src:e")
    out["hll-empty"] = c("GET", "src:e")
    c("HLL.CREATE", "src:x", "LOG2M", "11", "EXPTHRESH", "-1")
    c("HLL.ADD", "src:x", "a", "b", "c")
    out["hll-explicit"] = c("GET", "src:x")
    c("HLL.CREATE", "src:s", "LOG2M", "11", "EXPTHRESH", "0")
    c("HLL.ADD", "src:s", *["e%d" % i for i in range(50)])
    out["hll-sparse"] = c("GET", "src:s")
    c("HLL.CREATE", "src:f", "LOG2M", "10", "EXPTHRESH", "0", "SPARSEON", "0")
    c("HLL.ADD", "src:f", *["e%d" % i for i in range(500)])
    out["hll-full"] = c("GET", "src:f")
    for k, v in out.items():
        assert isinstance(v, bytes) and v, (k, v)
    return out


PF_USES = [
    [["PFCOUNT", "cx"]], [["PFADD", "cx", "new1", "new2"]], [["PFMERGE", "cd", "cx"]],
    [["PFCOUNT", "cx", "src:ps"]], [["PFMERGE", "cx", "src:pd"]], [["PFDEBUG", "GETREG", "cx"]],
    [["PFDEBUG", "DECODE", "cx"]], [["PFDEBUG", "TODENSE", "cx"], ["PFCOUNT", "cx"]],
    [["PFDEBUG", "ENCODING", "cx"]], [["PFADD", "cx"], ["PFCOUNT", "cx", "cx"]],
    [["HLL.CARD", "cx"]], [["GETRANGE", "cx", "0", "-1"]],
]
HLL_USES = [
    [["HLL.CARD", "cx"]], [["HLL.ADD", "cx", "x", "y"]], [["HLL.ADDINT", "cx", "5"]],
    [["HLL.ADDRAW", "cx", "-9223372036854775808", "9223372036854775807", "0"]],
    [["HLL.UNION", "cd", "cx"]], [["HLL.UNION", "cx", "src:s"]], [["HLL.CARD", "cx", "src:f"]],
    [["HLL.INFO", "cx"]], [["HLL.ADD", "cx", "z"], ["GET", "cx"], ["HLL.INFO", "cx"]],
    [["PFCOUNT", "cx"]], [["APPEND", "cx", "\x00"], ["HLL.CARD", "cx"]],
]


# ------------------------------------------------------------------ the tests

@pytest.mark.parametrize("seed", SEEDS)
def test_fuzz_mutated_resp(fuzz, seed):
    rng = random.Random(seed)
    for i in range(MUTATED_CASES_PER_SEED):
        payload = mutated_payload(rng)
        fuzz.case(payload, "seed=%d mutated %d" % (seed, i))
    fuzz.finish()


@pytest.mark.parametrize("seed", SEEDS)
def test_fuzz_hostile_arguments(fuzz, seed):
    rng = random.Random(1000 + seed)
    setup = b"".join(encode_command(*a) for a in SETUP)
    cmds = hostile_commands()
    # Every seed runs a quarter of the fixed list (seed picks which), so together they cover it.
    part = [cmd for j, cmd in enumerate(cmds) if j % len(SEEDS) == SEEDS.index(seed)]
    for j, cmd in enumerate(part):
        fuzz.case(setup + encode_command(*cmd), "seed=%d hostile %d %r" % (seed, j, cmd[:3]))
    # corrupted HyperLogLogs, both families
    srcs = hll_sources(fuzz.watch)
    names = sorted(srcs)
    for j in range(HOSTILE_RANDOM_CASES_PER_SEED):
        name = rng.choice(names)
        bad = corrupt(rng, srcs[name])
        uses = rng.choice(PF_USES if name.startswith("pf") else HLL_USES + PF_USES[:3])
        payload = encode_command("SET", "cx", bad) + encode_command("SET", "cd", srcs[name]) \
            + b"".join(encode_command(*u) for u in uses)
        fuzz.case(payload, "seed=%d hll %d (%s)" % (seed, j, name))
    fuzz.finish()


def test_fuzz_model_sanity():
    """The parser model agrees with the documented protocol errors and completions."""
    assert model_parse(encode_command("PING"))[0] == "ok"
    assert model_parse(b"*1\r\n$4\r\nPI")[0] == "partial"
    assert model_parse(b"*abc\r\n")[0] == "error"
    assert model_parse(b"*2147483648\r\n")[0] == "error"
    assert model_parse(b"*-5\r\n")[0] == "ok"
    assert model_parse(b"*1\r\n$536870913\r\n")[0] == "error"
    assert model_parse(b'SET a "b\r\n')[0] == "error"
    assert model_parse(b"SET a 'b' c\r\n") == ("ok", [[b"SET", b"a", b"b", b"c"]])
    assert model_parse(b'"\\x41\\q"\n') == ("ok", [[b"Aq"]])
    assert model_parse(b"a" * 70000)[0] == "error"
    assert check_resp_stream(b"+OK\r\n$3\r\nabc\r\n*2\r\n:1\r\n$-1\r\n") == 3
    with pytest.raises(BadReply):
        check_resp_stream(b"$5\r\nab")


# ------------------------------------------------------------------ findings of the fuzzer

def _read_all(host, port, payload, timeout=HANG_S):
    s = socket.create_connection((host, port), timeout=timeout)
    out = b""
    try:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        while True:
            try:
                chunk = s.recv(1 << 16)
            except ConnectionResetError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        s.close()
    return out


def test_auth_pipelined_with_large_command(server):
    """AUTH lifts the unauthenticated request limits (10 arguments, 16 KiB bulks) for the
    commands pipelined after it in the same write, as in Redis (which parses one command at
    a time). Abacus used to parse the whole read first and drop the connection with
    `-ERR Protocol error: unauthenticated multibulk length`."""
    p = server.start(SERVER_ARGS + ["--requirepass", "pw"])
    out = _read_all(p.host, p.port, encode_command("AUTH", "pw")
                    + encode_command("SADD", "s", *[str(i) for i in range(20)])
                    + encode_command("SET", "big", "x" * 20000)
                    + encode_command("STRLEN", "big"))
    assert out == b"+OK\r\n:20\r\n+OK\r\n:20000\r\n"
    # Without AUTH the limits still hold.
    out = _read_all(p.host, p.port, encode_command("SADD", "s", *[str(i) for i in range(20)]))
    assert out == b"-ERR Protocol error: unauthenticated multibulk length\r\n"


@pytest.mark.abacus_only("proto-max-bulk-len above the memory; Redis 7.0 crashes as well")
def test_huge_proto_max_bulk_len_does_not_crash(server):
    p = server.start(SERVER_ARGS)
    c = RespClient(p.host, p.port, timeout=HANG_S)
    try:
        assert c("CONFIG", "SET", "proto-max-bulk-len", str(I64_MAX)) == "OK"
        # Sizes no allocator can give get an error reply (the server checks before it
        # grows the string, and before it logs a DEBUG POPULATE).
        oom = "ERR out of memory: cannot allocate a string of %d bytes"
        for cmd, size in ((["SETRANGE", "q", "9223372036854775806", "x"], I64_MAX),
                          (["SETBIT", "q", str(2 ** 62), "1"], 2 ** 59 + 1),
                          (["DEBUG", "POPULATE", "1", "p", str(I64_MAX)], I64_MAX)):
            c2 = RespClient(p.host, p.port, timeout=HANG_S)
            assert c2(*cmd) == Err(oom % size), cmd
            c2.close()
        assert c("EXISTS", "q", "p:0") == 0
        assert p.proc.poll() is None, "server died"
        assert c("PING") == "PONG"
        assert "panicked" not in p.log()
    finally:
        c.close()
