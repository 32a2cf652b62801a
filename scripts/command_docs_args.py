#!/usr/bin/env python3
"""Writes crates/server/src/command_docs_args.txt: the `history` and `arguments` of every
command's COMMAND DOCS reply of a running Redis 7.0 (the reference; Redis is BSD-3-Clause,
and these texts come from its src/commands/*.json), in a compact line format that
`crates/server/src/command_docs_args.rs` parses once, lazily.

    redis-server --port 6390 --save '' --appendonly no --daemonize yes
    python3 scripts/command_docs_args.py 6390          # needs redis-py (tests/requirements.txt)
    redis-cli -p 6390 shutdown nosave

Format, one item per line, fields separated by tabs:
    C <full name>                      a command (subcommands as `client|list`)
    H <version> <description>          one entry of its history, in order
    A <depth> <field>=<value> ...      one argument, depth 0 for the command's own; a oneof
                                       or block argument's arguments follow it one deeper
Values are as Redis replies them, except `flags`: its list joined with commas.
"""
import sys

import redis



def args_lines(args, depth, out):
    for a in args:
        fields = dict(zip(a[::2], a[1::2]))
        cells = []
        for k, v in zip(a[::2], a[1::2]):
            k = k.decode()
            if k == "arguments":
                continue
            if k == "flags":
                v = ",".join(f.decode() for f in v)
            elif isinstance(v, int):
                v = str(v)
            else:
                v = v.decode()
            assert "\t" not in v and "\n" not in v, v
            cells.append("%s=%s" % (k, v))
        out.append("A\t%d\t%s" % (depth, "\t".join(cells)))
        if b"arguments" in fields:
            args_lines(fields[b"arguments"], depth + 1, out)


def command_lines(name, body, out):
    fields = dict(zip(body[::2], body[1::2]))
    out.append("C\t" + name.decode())
    for version, text in fields.get(b"history", []):
        assert b"\t" not in text and b"\n" not in text, text
        out.append("H\t%s\t%s" % (version.decode(), text.decode()))
    args_lines(fields.get(b"arguments", []), 0, out)
    subs = fields.get(b"subcommands", [])
    for sub_name, sub_body in sorted(zip(subs[::2], subs[1::2])):
        command_lines(sub_name, sub_body, out)


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 6379
    r = redis.Redis(port=port)
    version = r.info("server")["redis_version"]
    conn = r.connection_pool.get_connection()
    conn.send_command("COMMAND", "DOCS")
    docs = conn.read_response()
    r.connection_pool.release(conn)
    out = ["# COMMAND DOCS history and arguments of Redis %s (BSD-3-Clause), written by" % version,
           "# scripts/command_docs_args.py: regenerate with it, do not edit by hand."]
    for name, body in sorted(zip(docs[::2], docs[1::2])):
        command_lines(name, body, out)
    path = "crates/server/src/command_docs_args.txt"
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wrote", path, len(out), "lines")


if __name__ == "__main__":
    main()
