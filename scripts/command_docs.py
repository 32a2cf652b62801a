#!/usr/bin/env python3
"""Prints the documentation builder calls of Redis commands, from a running Redis 7.0's
COMMAND DOCS and COMMAND INFO (Redis is BSD-3-Clause; the texts are its
src/commands/*.json), to paste after a command's table entry (`Spec::keyed(..)` or
`Spec::conn(..)`) when Abacus takes up a command Redis has: `.docs(since, complexity)`,
`.deprecated(..)` or `.syscmd()`, `.history(..)`, `.tips(..)` and `.args(..)` in the notation
`crates/server/src/command_docs.rs` parses. Key spec flags (`.key_specs(..)`) and the
informational flags (`.noscript()`, ...) are the entry's to state; COMMAND INFO prints them.

    redis-server --port 6390 --save '' --appendonly no --daemonize yes
    python3 scripts/command_docs.py 6390 eval 'function|load'   # needs redis-py
    redis-cli -p 6390 shutdown nosave
"""
import sys

import redis


def rs(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def arg_lines(args, depth, out, pad):
    for a in args:
        fields = list(zip(a[::2], a[1::2]))
        cells = []
        subs = []
        for k, v in fields:
            k = k.decode()
            if k == "arguments":
                subs = v
                continue
            if k == "flags":
                v = ",".join(f.decode() for f in v)
            elif isinstance(v, int):
                v = str(v)
            else:
                v = v.decode()
            assert " " not in v and "\n" not in v and '"' not in v and "\\" not in v, v
            cells.append(v if k == "name" else "%s=%s" % (k, v))
        out.append(pad + "    " + "  " * depth + " ".join(cells))
        arg_lines(subs, depth + 1, out, pad)


def builder_calls(name, body, pad="        "):
    f = {k.decode(): v for k, v in zip(body[::2], body[1::2])}
    d = lambda k: f.get(k, b"").decode()
    out = [".docs(%s, %s)" % (rs(d("since")), rs(d("complexity")))]
    doc_flags = [x.decode() for x in f.get("doc_flags", [])]
    if "deprecated" in doc_flags:
        out.append(".deprecated(%s, %s)" % (rs(d("deprecated_since")), rs(d("replaced_by"))))
    elif "syscmd" in doc_flags:
        out.append(".syscmd()")
    history = f.get("history", [])
    if history:
        items = "".join("\n%s    (%s, %s)," % (pad, rs(v.decode()), rs(t.decode())) for v, t in history)
        out.append(".history(&[%s\n%s])" % (items, pad))
    args = f.get("arguments", [])
    if args:
        lines = []
        arg_lines(args, 0, lines, pad)
        out.append('.args("\n%s\n%s")' % ("\n".join(lines), pad))
    return "".join("\n" + pad + c for c in out)


def raw(r, *args):
    # Without redis-py's reply parsing (its COMMAND callbacks reshape the replies).
    conn = r.connection_pool.get_connection()
    try:
        conn.send_command(*args)
        return conn.read_response()
    finally:
        r.connection_pool.release(conn)


def main():
    port = int(sys.argv[1])
    names = sys.argv[2:]
    r = redis.Redis(port=port)
    for full in names:
        parts = full.split("|")
        docs = raw(r, "COMMAND", "DOCS", parts[0])
        body = dict(zip(docs[::2], docs[1::2]))[parts[0].encode()]
        if len(parts) > 1:
            subs = dict(zip(body[::2], body[1::2]))[b"subcommands"]
            body = dict(zip(subs[::2], subs[1::2]))[full.encode()]
        info = raw(r, "COMMAND", "INFO", parts[0])[0]
        if len(parts) > 1:
            info = next(s for s in info[9] if s[0] == full.encode())
        tips = [t.decode() for t in info[7]]
        calls = builder_calls(full, body)
        if tips:
            calls += "\n        .tips(%s)" % rs(" ".join(tips))
        print("// %s" % full + calls)


if __name__ == "__main__":
    main()
