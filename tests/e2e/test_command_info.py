"""COMMAND INFO's flags, key specs and tips, COMMAND DOCS, and GETKEYSANDFLAGS, against a real Redis.

The comparison tests start the Debian redis-server 7.0 beside the server under test and
compare, for every command both have (subcommands included), what COMMAND INFO and
COMMAND DOCS reply. Differences that are known and deliberate are listed below with their
reason; anything else fails. Against --target redis they compare Redis with itself, so they
are marked abacus_only. Abacus's own commands (HLL.*, SUMMARY.*, TS.*, ...) have no reference:
their key specs are evaluated here, independently of the server's own evaluator, and must
name exactly the keys COMMAND GETKEYS names.
"""

import pytest

# Commands whose ACL categories differ from Redis 7.0's, and why.
KNOWN_CATEGORY_DIFFERENCES = {
    # Abacus flags CLIENT UNBLOCK `fast` (it only marks the blocked client); the CLIENT
    # table is being reworked on another branch, so the flag is left to that work.
    "client|unblock": "fast flag in Abacus's table",
}


def raw(server_like, *args):
    """A RESP3 reply as Python values (maps as dicts, sets as lists), untouched by redis-py's
    COMMAND callbacks."""
    client = server_like.client(protocol=3)
    conn = client.connection_pool.get_connection()
    try:
        conn.send_command(*args)
        return conv(conn.read_response())
    finally:
        client.connection_pool.release(conn)
        client.close()


def conv(x):
    if isinstance(x, bytes):
        return x.decode()
    if isinstance(x, dict):
        return {conv(k): conv(v) for k, v in x.items()}
    if isinstance(x, (set, frozenset)):
        # A RESP3 set's order is lost in Python's set: compared sorted.
        return sorted(conv(v) for v in x)
    if isinstance(x, (list, tuple)):
        return [conv(v) for v in x]
    return x


def flatten(info):
    out = {}
    for c in info:
        out[c[0]] = c
        subs = c[9] if len(c) > 9 else []
        for s in subs:
            out[s[0]] = s
    return out


def key_specs(entry):
    # Notes are prose, which Abacus does not carry; the rest must match.
    return [{k: v for k, v in spec.items() if k != "notes"} for spec in entry[8]]


def normalise(spec):
    return {**spec, "flags": sorted(spec["flags"])}


@pytest.fixture
def infos(server, real_redis):
    return flatten(raw(server, "COMMAND")), flatten(raw(real_redis, "COMMAND"))


@pytest.mark.abacus_only("compares Abacus with the reference Redis")
def test_key_specs_match_redis(infos):
    ours, theirs = infos
    shared = sorted(set(ours) & set(theirs))
    assert len(shared) > 250
    bad = []
    for name in shared:
        a = [normalise(s) for s in key_specs(ours[name])]
        b = [normalise(s) for s in key_specs(theirs[name])]
        if a != b:
            bad.append((name, a, b))
        # The legacy range and movablekeys follow from the same declaration.
        if ours[name][3:6] != theirs[name][3:6]:
            bad.append((name, "range", ours[name][3:6], theirs[name][3:6]))
        if ("movablekeys" in ours[name][2]) != ("movablekeys" in theirs[name][2]):
            bad.append((name, "movablekeys", ours[name][2], theirs[name][2]))
    assert bad == []


@pytest.mark.abacus_only("compares Abacus with the reference Redis")
def test_tips_and_categories_match_redis(infos):
    ours, theirs = infos
    bad = []
    for name in sorted(set(ours) & set(theirs)):
        if sorted(ours[name][7]) != sorted(theirs[name][7]):
            bad.append((name, "tips", ours[name][7], theirs[name][7]))
        if sorted(ours[name][6]) != sorted(theirs[name][6]) and name not in KNOWN_CATEGORY_DIFFERENCES:
            bad.append((name, "categories", ours[name][6], theirs[name][6]))
    assert bad == []
    for name in KNOWN_CATEGORY_DIFFERENCES:
        assert sorted(ours[name][6]) != sorted(theirs[name][6]), "%s now matches: drop it from the list" % name


# Commands whose COMMAND INFO flags differ from Redis 7.0's, and why.
KNOWN_FLAG_DIFFERENCES = {
    # See KNOWN_CATEGORY_DIFFERENCES.
    "client|unblock": "fast flag in Abacus's table",
}


@pytest.mark.abacus_only("compares Abacus with the reference Redis")
def test_flags_match_redis(infos):
    ours, theirs = infos
    bad = []
    for name in sorted(set(ours) & set(theirs)):
        if sorted(ours[name][2]) != sorted(theirs[name][2]) and name not in KNOWN_FLAG_DIFFERENCES:
            bad.append((name, sorted(ours[name][2]), sorted(theirs[name][2])))
    assert bad == []
    for name in KNOWN_FLAG_DIFFERENCES:
        assert sorted(ours[name][2]) != sorted(theirs[name][2]), "%s now matches: drop it from the list" % name


def flatten_docs(docs):
    out = {}
    for name, d in docs.items():
        out[name] = d
        out.update(flatten_docs(d.get("subcommands", {})))
    return out


@pytest.mark.abacus_only("compares Abacus with the reference Redis")
def test_docs_match_redis(server, real_redis):
    ours = flatten_docs(raw(server, "COMMAND", "DOCS"))
    theirs = flatten_docs(raw(real_redis, "COMMAND", "DOCS"))
    for name, d in ours.items():
        assert d["summary"] and d["since"] and d["group"], name
    bad = []
    for name in sorted(set(ours) & set(theirs)):
        for field in ("since", "complexity", "doc_flags", "deprecated_since", "replaced_by", "history", "arguments"):
            if ours[name].get(field) != theirs[name].get(field):
                bad.append((name, field, ours[name].get(field), theirs[name].get(field)))
    assert bad == []
    # Abacus's own commands are documented too.
    for name in ("hll.add", "summary.query", "ts.range", "attribute"):
        assert ours[name]["complexity"].startswith("O("), name


def evaluate(specs, argv):
    """Redis's getKeysUsingKeySpecs for index/keyword begins and range/keynum finds."""
    keys = []
    argc = len(argv)
    for spec in specs:
        begin, find = spec["begin_search"], spec["find_keys"]
        if begin["type"] == "index":
            first = begin["spec"]["index"]
        elif begin["type"] == "keyword":
            kw, start = begin["spec"]["keyword"], begin["spec"]["startfrom"]
            order = range(start, argc - 1) if start >= 0 else range(argc + start, 0, -1)
            hits = [i for i in order if argv[i].upper() == kw.upper()]
            if not hits:
                continue
            first = hits[0] + 1
        else:
            continue
        if find["type"] == "range":
            last, step, limit = find["spec"]["lastkey"], find["spec"]["keystep"], find["spec"]["limit"]
            if last >= 0:
                last = first + last
            elif limit <= 1:
                last = argc + last
            else:
                last = first + ((argc - first) // limit + last)
        elif find["type"] == "keynum":
            n = int(argv[first + find["spec"]["keynumidx"]])
            first += find["spec"]["firstkey"]
            step = find["spec"]["keystep"]
            last = first + (n - 1) * step
        else:
            continue
        keys.extend(argv[i] for i in range(first, last + 1, step) if i < argc)
    return keys


ABACUS_ONLY_CALLS = [
    ["HLL.ADD", "h", "a", "b"],
    ["HLL.CARD", "h1", "h2"],
    ["HLL.UNION", "dst", "h1", "h2"],
    ["HLL.CREATE", "h", "LOG2M", "11"],
    ["HLL.INFO", "h"],
    ["SUMMARY.UPDATE", "s", "f", "INCRBY", "1"],
    ["TS.CREATE", "t"],
    ["TS.ADD", "t", "1", "2"],
    ["TS.MADD", "t1", "1", "2", "t2", "1", "3"],
    ["TS.CREATERULE", "src", "dst", "AGGREGATION", "avg", "60"],
    ["TS.DELETERULE", "src", "dst"],
    ["TS.RANGE", "t", "-", "+"],
    ["TS.DEL", "t", "0", "10"],
]


@pytest.mark.abacus_only("Abacus's own commands")
@pytest.mark.parametrize("call", ABACUS_ONLY_CALLS, ids=[" ".join(c) for c in ABACUS_ONLY_CALLS])
def test_abacus_only_key_specs_name_getkeys_keys(server, call):
    info = raw(server, "COMMAND", "INFO", call[0])[0]
    specs = info[8]
    assert specs, call
    assert evaluate(specs, call) == raw(server, "COMMAND", "GETKEYS", *call)


SHARED_CALLS = [
    ["LMOVE", "src", "dst", "LEFT", "RIGHT"],
    ["SET", "k", "v"],
    ["DEL", "a", "b"],
    ["EXISTS", "a"],
    ["ZUNIONSTORE", "d", "2", "a", "b"],
    ["GEORADIUS", "s", "0", "0", "1", "km", "STORE", "d"],
    ["XREAD", "COUNT", "1", "STREAMS", "a", "b", "0", "0"],
    ["SORT", "k", "STORE", "d"],
    ["BITOP", "AND", "d", "a", "b"],
    ["MSET", "a", "1", "b", "2"],
    ["RENAME", "a", "b"],
]


@pytest.mark.parametrize("call", SHARED_CALLS, ids=[" ".join(c) for c in SHARED_CALLS])
def test_getkeysandflags(server, real_redis, call):
    # Against Abacus: Redis's own answer; against --target redis: Redis against itself.
    ours = raw(server, "COMMAND", "GETKEYSANDFLAGS", *call)
    theirs = raw(real_redis, "COMMAND", "GETKEYSANDFLAGS", *call)
    assert [(k, sorted(f)) for k, f in ours] == [(k, sorted(f)) for k, f in theirs]


def test_key_specs_shape(server):
    info = raw(server, "COMMAND", "INFO", "lmove", "xread")
    lmove, xread = info
    assert lmove[8] == [
        {"flags": ["RW", "access", "delete"], "begin_search": {"type": "index", "spec": {"index": 1}},
         "find_keys": {"type": "range", "spec": {"lastkey": 0, "keystep": 1, "limit": 0}}},
        {"flags": ["RW", "insert"], "begin_search": {"type": "index", "spec": {"index": 2}},
         "find_keys": {"type": "range", "spec": {"lastkey": 0, "keystep": 1, "limit": 0}}},
    ]
    assert xread[8][0]["begin_search"] == {"type": "keyword", "spec": {"keyword": "STREAMS", "startfrom": 1}}
    assert "movablekeys" in xread[2]
