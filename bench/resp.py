"""Raw RESP over a socket for the bench/ clients: the load generators must not be the
bottleneck (redis-py would be), and they speak to Redis and Abacus alike.

    from resp import Conn, command
    c = Conn(port)
    c.send(command("SET", "k", "v"))       # pipelined: send now, read replies later
    c.reply()                              # b"OK"
    c.call(("GET", "k"), ("DEL", "k"))     # [b"v", b"1"]
"""

import socket


def command(*args):
    """One command as a RESP array of bulk strings (str, int or bytes arguments)."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port, host="127.0.0.1"):
        self.s = socket.create_connection((host, port))
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def send(self, payload):
        self.s.sendall(payload)

    def line(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        """The next reply: bytes for simple strings, integers and bulk strings, None for a
        null, a list for an array; an error reply raises RuntimeError."""
        line = self.line()
        kind, rest = line[:1], line[1:]
        if kind in (b"+", b":"):
            return rest
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                chunk = self.s.recv(65536)
                if not chunk:
                    raise ConnectionError("server closed the connection")
                self.buf += chunk
            data, self.buf = self.buf[:n], self.buf[n + 2:]
            return data
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RuntimeError("unexpected reply %r" % line)

    def call(self, *cmds):
        """Sends the commands (tuples of arguments) in one write; returns their replies."""
        self.send(b"".join(command(*c) for c in cmds))
        return [self.reply() for _ in cmds]
