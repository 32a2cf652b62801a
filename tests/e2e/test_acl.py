"""ACL users (Redis 7.0): SETUSER/GETUSER/DELUSER/LIST/USERS/WHOAMI/CAT/GENPASS/LOG/DRYRUN,
SAVE/LOAD with an aclfile, AUTH as a user, and the rules enforced for commands, keys,
channels and commands queued in MULTI.

Every test here also passes against redis-server 7.0 (`--target redis`); the texts compared
are Redis's. Users are created on the shared server and removed after each test.
"""

import hashlib
import os

import pytest

from helpers import Err, RespClient

NOPERM_KEYS = Err("NOPERM this user has no permissions to access one of the keys used as arguments")
NOPERM_CHANNELS = Err("NOPERM this user has no permissions to access one of the channels used as arguments")
WRONGPASS = Err("WRONGPASS invalid username-password pair or user is disabled.")


def noperm_cmd(name):
    return Err("NOPERM this user has no permissions to run the '%s' command" % name)


def sha(p):
    return hashlib.sha256(p.encode()).hexdigest()


@pytest.fixture
def adm(server, r):
    """A raw admin connection (the default user); every other user is removed afterwards."""
    cl = RespClient(server.host, server.port)
    cl("ACL", "LOG", "RESET")
    yield cl
    for u in cl("ACL", "USERS"):
        if u != b"default":
            cl("ACL", "DELUSER", u)
    cl("ACL", "LOG", "RESET")
    cl.close()


@pytest.fixture
def login(server, adm):
    """Connects and authenticates as a user: login(name, password) -> RespClient."""
    conns = []

    def make(name, password, srv=None):
        srv = srv or server
        cl = RespClient(srv.host, srv.port)
        assert cl("AUTH", name, password) == "OK"
        conns.append(cl)
        return cl

    yield make
    for cl in conns:
        cl.close()


def getuser(cl, name):
    reply = cl("ACL", "GETUSER", name)
    return None if reply is None else dict(zip(reply[0::2], reply[1::2]))


def test_whoami_users_and_auth(adm, login):
    assert adm("ACL", "WHOAMI") == b"default"
    assert adm("ACL", "SETUSER", "alice", "on", ">p1", "+@all", "~*") == "OK"
    assert adm("ACL", "SETUSER", "bob") == "OK"
    assert adm("ACL", "USERS") == [b"alice", b"bob", b"default"]
    a = login("alice", "p1")
    assert a("ACL", "WHOAMI") == b"alice"
    assert a("SET", "k", "v") == "OK"
    # Wrong password, unknown user, disabled user: the same error.
    assert a("AUTH", "alice", "nope") == WRONGPASS
    assert a("AUTH", "nosuch", "p1") == WRONGPASS
    assert a("AUTH", "bob", "") == WRONGPASS
    # A failed AUTH keeps the connection's user.
    assert a("ACL", "WHOAMI") == b"alice"
    # The one-argument form is the default user's, which has no password.
    assert a("AUTH", "x") == Err("ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
    # HELLO AUTH authenticates too.
    h = RespClient(adm.host, adm.port)
    try:
        assert h("HELLO", "2", "AUTH", "alice", "bad") == WRONGPASS
        hello = h("HELLO", "2", "AUTH", "alice", "p1")
        assert b"proto" in hello
        assert h("ACL", "WHOAMI") == b"alice"
        # RESET returns to the default user.
        assert h("RESET") == "RESET"
        assert h("ACL", "WHOAMI") == b"default"
    finally:
        h.close()
    assert b"user=alice" in a("CLIENT", "INFO")


def test_getuser_and_list(adm):
    assert adm("ACL", "SETUSER", "alice", "on", ">p1", "~foo*", "%R~r*", "&ch*", "-@all", "+@hash", "-hget") == "OK"
    u = getuser(adm, "alice")
    assert u[b"flags"] == [b"on"]
    assert u[b"passwords"] == [sha("p1").encode()]
    assert u[b"commands"] == b"-@all +@hash -hget"
    assert u[b"keys"] == b"~foo* %R~r*"
    assert u[b"channels"] == b"&ch*"
    assert u[b"selectors"] == []
    assert getuser(adm, "nosuch") is None
    d = getuser(adm, "default")
    assert d[b"flags"] == [b"on", b"nopass"]
    assert (d[b"commands"], d[b"keys"], d[b"channels"]) == (b"+@all", b"~*", b"&*")
    adm("ACL", "SETUSER", "bob")
    assert adm("ACL", "LIST") == [
        ("user alice on #%s ~foo* %%R~r* resetchannels &ch* -@all +@hash -hget" % sha("p1")).encode(),
        b"user bob off resetchannels -@all",
        b"user default on nopass ~* &* +@all",
    ]
    # Rules add up over several SETUSERs; a password goes away with <.
    adm("ACL", "SETUSER", "alice", "<p1", "nopass", "allkeys", "+@all", "-@hash", "+hget")
    u = getuser(adm, "alice")
    assert u[b"flags"] == [b"on", b"nopass"]
    assert u[b"passwords"] == []
    assert (u[b"commands"], u[b"keys"]) == (b"+@all -@hash +hget", b"~*")


def test_setuser_errors(adm):
    def modifier(op, why):
        return Err("ERR Error in ACL SETUSER modifier '%s': %s" % (op, why))

    assert adm("ACL", "SETUSER", "x", "foo") == modifier("foo", "Syntax error")
    assert adm("ACL", "SETUSER", "x", "+nosuch") == modifier("+nosuch", "Unknown command or category name in ACL")
    assert adm("ACL", "SETUSER", "x", "+@nosuch") == modifier("+@nosuch", "Unknown command or category name in ACL")
    assert adm("ACL", "SETUSER", "x", "+client|nosuch") == modifier("+client|nosuch", "Unknown command or category name in ACL")
    assert adm("ACL", "SETUSER", "x", "%X~d") == modifier("%X~d", "Syntax error")
    assert adm("ACL", "SETUSER", "x", "<nope") == modifier("<nope", "The password you are trying to remove from the user does not exist")
    assert adm("ACL", "SETUSER", "x", "#abc") == modifier("#abc", "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters")
    assert adm("ACL", "SETUSER", "x", "allkeys", "~foo") == modifier(
        "~foo", "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns")
    # A bad rule changes nothing: the user was not even created.
    assert b"x" not in adm("ACL", "USERS")
    assert adm("ACL", "DELUSER", "default") == Err("ERR The 'default' user cannot be removed")


def test_command_and_category_rules(adm, login):
    adm("ACL", "SETUSER", "u", "on", ">pw", "~*", "+get", "+@hash", "-hget", "+client|id")
    u = login("u", "pw")
    assert u("GET", "k") is None
    assert u("SET", "k", "v") == noperm_cmd("set")
    assert u("HSET", "h", "f", "v") == 1
    assert u("HGET", "h", "f") == noperm_cmd("hget")
    assert isinstance(u("CLIENT", "ID"), int)
    assert u("CLIENT", "LIST") == noperm_cmd("client|list")
    # The rules change under a connected client at once.
    adm("ACL", "SETUSER", "u", "+set")
    assert u("SET", "k", "v") == "OK"
    adm("ACL", "SETUSER", "u", "-@all")
    assert u("GET", "k") == noperm_cmd("get")


def test_key_patterns_read_and_write(adm, login):
    adm("ACL", "SETUSER", "u", "on", ">pw", "+@all", "%R~r*", "%W~w*", "~both*")
    u = login("u", "pw")
    assert u("GET", "r1") is None
    assert u("GET", "w1") == NOPERM_KEYS
    assert u("LPUSH", "w1", "x") == 1
    assert u("LPUSH", "r1", "x") == NOPERM_KEYS
    assert u("DEL", "w1") == 1
    assert u("MGET", "both1", "other") == NOPERM_KEYS
    assert u("MSET", "both1", "a", "both2", "b") == "OK"
    assert u("GET", "both1") == b"a"
    adm("ACL", "SETUSER", "u", "resetkeys", "~x")
    assert u("GET", "r1") == NOPERM_KEYS
    assert u("GET", "x") is None


def test_channel_patterns(adm, login):
    adm("ACL", "SETUSER", "u", "on", ">pw", "+@all", "~*", "&news.*")
    u = login("u", "pw")
    assert u("PUBLISH", "news.today", "m") == 0
    assert u("PUBLISH", "sports", "m") == NOPERM_CHANNELS
    assert u("SUBSCRIBE", "sports") == NOPERM_CHANNELS
    # A pattern must be one of the user's patterns, literally.
    assert u("PSUBSCRIBE", "n*") == NOPERM_CHANNELS
    assert u("PSUBSCRIBE", "news.*") == [b"psubscribe", b"news.*", 1]
    s = login("u", "pw")
    assert s("SUBSCRIBE", "news.a") == [b"subscribe", b"news.a", 1]
    # New users get no channels (Redis 7.0's acl-pubsub-default resetchannels).
    adm("ACL", "SETUSER", "v", "on", ">pw", "+@all", "~*")
    v = login("v", "pw")
    assert v("PUBLISH", "news.today", "m") == NOPERM_CHANNELS


def test_multi_checks_when_queued_and_at_exec(adm, login):
    adm("ACL", "SETUSER", "u", "on", ">pw", "~k*", "+multi", "+exec", "+get", "+set")
    u = login("u", "pw")
    # Refused while queueing: the transaction aborts.
    assert u("MULTI") == "OK"
    assert u("GET", "other") == NOPERM_KEYS
    assert u("DEL", "k1") == noperm_cmd("del")
    assert u("SET", "k1", "v") == "QUEUED"
    assert u("EXEC") == Err("EXECABORT Transaction discarded because of previous errors.")
    assert u("GET", "k1") is None
    # Allowed when queued, refused at EXEC after the rules changed: that command alone fails.
    assert u("MULTI") == "OK"
    assert u("GET", "k1") == "QUEUED"
    assert u("SET", "k1", "v") == "QUEUED"
    adm("ACL", "SETUSER", "u", "-get")
    assert u("EXEC") == [
        Err("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. "
            "This command is no longer allowed for the following reason: no permission to execute the command or subcommand"),
        "OK",
    ]
    assert adm("GET", "k1") == b"v"
    entries = adm("ACL", "LOG")
    contexts = {dict(zip(e[0::2], e[1::2]))[b"context"] for e in entries}
    assert contexts == {b"multi"}


def log_entries(cl, *count):
    return [dict(zip(e[0::2], e[1::2])) for e in cl("ACL", "LOG", *count)]


def test_acl_log(adm, login):
    adm("ACL", "SETUSER", "u", "on", ">pw", "~k*", "&c", "+get", "+publish")
    u = login("u", "pw")
    u("GET", "z")
    u("GET", "z")
    u("DEL", "k")
    u("PUBLISH", "other", "m")
    u("AUTH", "u", "wrong")
    log = log_entries(adm)
    assert [(e[b"reason"], e[b"object"], e[b"count"]) for e in log] == [
        (b"auth", b"AUTH", 1),
        (b"channel", b"other", 1),
        (b"command", b"del", 1),
        (b"key", b"z", 2),
    ]
    for e in log:
        assert e[b"username"] == b"u"
        assert e[b"context"] == b"toplevel"
        assert float(e[b"age-seconds"]) >= 0
        assert b"user=u" in e[b"client-info"]
    assert len(log_entries(adm, "1")) == 1
    assert adm("ACL", "LOG", "x") == Err("ERR value is not an integer or out of range")
    assert adm("ACL", "LOG", "RESET") == "OK"
    assert adm("ACL", "LOG") == []


def test_deluser_disconnects_its_clients(adm, login):
    adm("ACL", "SETUSER", "u", "on", ">pw", "+@all", "~*")
    adm("ACL", "SETUSER", "w", "on", ">pw", "+@all", "~*")
    u = login("u", "pw")
    w = login("w", "pw")
    assert adm("ACL", "DELUSER", "u", "nosuch") == 1
    assert u.is_closed()
    assert w("PING") == "PONG"
    # A client deleting its own user gets the reply, then is disconnected.
    assert w("ACL", "DELUSER", "w") == 1
    assert w.is_closed()


def test_cat_genpass_dryrun(adm):
    cats = adm("ACL", "CAT")
    for c in (b"keyspace", b"read", b"write", b"hash", b"geo", b"pubsub", b"admin", b"fast", b"slow", b"dangerous", b"connection", b"transaction"):
        assert c in cats
    hash_cmds = adm("ACL", "CAT", "hash")
    assert b"hget" in hash_cmds and b"hset" in hash_cmds and b"get" not in hash_cmds
    assert adm("ACL", "CAT", "nosuch") == Err("ERR Unknown category 'nosuch'")
    p = adm("ACL", "GENPASS")
    assert len(p) == 64 and int(p, 16) >= 0
    assert len(adm("ACL", "GENPASS", "10")) == 3
    assert adm("ACL", "GENPASS", "0") == Err("ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096")
    adm("ACL", "SETUSER", "u", "on", "nopass", "~foo*", "%R~r*", "+get", "+hset", "+hget")
    assert adm("ACL", "DRYRUN", "u", "GET", "foo1") == "OK"
    assert adm("ACL", "DRYRUN", "u", "GET", "bar") == b"This user has no permissions to access the 'bar' key"
    assert adm("ACL", "DRYRUN", "u", "HSET", "r1", "f", "v") == b"This user has no permissions to access the 'r1' key"
    assert adm("ACL", "DRYRUN", "u", "DEL", "foo") == b"This user has no permissions to run the 'del' command"
    assert adm("ACL", "DRYRUN", "nosuch", "GET", "x") == Err("ERR User 'nosuch' not found")
    assert adm("ACL", "DRYRUN", "u", "nosuch") == Err("ERR Command 'nosuch' not found")
    # DRYRUN logs nothing.
    assert adm("ACL", "LOG") == []


def test_save_without_aclfile(adm):
    err = Err("ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.")
    assert adm("ACL", "SAVE") == err
    assert adm("ACL", "LOAD") == err


def test_aclfile_load_and_save(server, tmp_path):
    path = tmp_path / "users.acl"
    path.write_text("user bob on #%s ~b* resetchannels -@all +get\n" % sha("pw"))
    srv = server.start(["--aclfile", str(path)])
    adm = RespClient(srv.host, srv.port)
    bob = RespClient(srv.host, srv.port)
    try:
        assert adm("ACL", "USERS") == [b"bob", b"default"]
        assert bob("AUTH", "bob", "pw") == "OK"
        assert bob("GET", "b1") is None
        assert bob("GET", "x") == NOPERM_KEYS
        # SAVE writes what ACL LIST shows.
        assert adm("ACL", "SETUSER", "carol", "on", ">c", "~c*", "+@read") == "OK"
        assert adm("ACL", "SAVE") == "OK"
        saved = [line for line in path.read_text().splitlines() if line]
        assert [line.encode() for line in saved] == adm("ACL", "LIST")
        # LOAD replaces every user: carol is gone, bob changed (his client follows).
        path.write_text("user bob on #%s ~* resetchannels -@all +get +set\n" % sha("pw"))
        assert adm("ACL", "LOAD") == "OK"
        assert adm("ACL", "USERS") == [b"bob", b"default"]
        # A file with an error changes nothing.
        path.write_text("user bob on +nosuch\n")
        assert adm("ACL", "LOAD").startswith("ERR")
        assert adm("ACL", "USERS") == [b"bob", b"default"]
        bob2 = RespClient(srv.host, srv.port)
        try:
            assert bob2("AUTH", "bob", "pw") == "OK"
            assert bob2("SET", "x", "1") == "OK"
        finally:
            bob2.close()
    finally:
        adm.close()
        bob.close()


def test_requirepass_is_the_default_users_password(server):
    srv = server.start(["--requirepass", "s3cret"])
    cl = RespClient(srv.host, srv.port)
    try:
        assert cl("PING") == Err("NOAUTH Authentication required.")
        assert cl("AUTH", "default", "s3cret") == "OK"
        d = getuser(cl, "default")
        assert d[b"flags"] == [b"on"]
        assert d[b"passwords"] == [sha("s3cret").encode()]
        # A password added with ACL works for AUTH too.
        assert cl("ACL", "SETUSER", "default", ">other") == "OK"
        other = RespClient(srv.host, srv.port)
        try:
            assert other("AUTH", "other") == "OK"
        finally:
            other.close()
        # Setting requirepass again replaces the default user's passwords.
        assert cl("CONFIG", "SET", "requirepass", "") == "OK"
        assert getuser(cl, "default")[b"flags"] == [b"on", b"nopass"]
        fresh = RespClient(srv.host, srv.port)
        try:
            assert fresh("PING") == "PONG"
        finally:
            fresh.close()
    finally:
        cl.close()


def test_selectors(adm, login):
    # A selector is a further set of permissions: a command runs if the root or any
    # selector allows it with all its keys.
    assert adm("ACL", "SETUSER", "sel", "on", ">pw", "~b*", "+set", "(~a* +get)") == "OK"
    # A selector split over several arguments is merged, as Redis merges it.
    assert adm("ACL", "SETUSER", "sel", "(%R~c*", "&ch", "+@hash)") == "OK"
    assert adm("ACL", "LIST")[-1] == (
        "user sel on #%s ~b* resetchannels -@all +set (~a* resetchannels -@all +get) "
        "(%%R~c* resetchannels &ch -@all +@hash)" % sha("pw")).encode()
    u = getuser(adm, "sel")
    assert u[b"selectors"] == [
        [b"commands", b"-@all +get", b"keys", b"~a*", b"channels", b""],
        [b"commands", b"-@all +@hash", b"keys", b"%R~c*", b"channels", b"&ch"],
    ]
    s = login("sel", "pw")
    assert s("SET", "b1", "x") == "OK"
    assert s("GET", "a1") is None
    assert s("HGET", "c1", "f") is None
    # No selector allows these: the most relevant refusal (a key over a command) is reported.
    assert s("GET", "b1") == NOPERM_KEYS
    assert s("HSET", "c1", "f", "v") == NOPERM_KEYS
    assert s("LPUSH", "a1", "x") == noperm_cmd("lpush")
    assert adm("ACL", "DRYRUN", "sel", "GET", "b1") == b"This user has no permissions to access the 'b1' key"
    assert adm("ACL", "DRYRUN", "sel", "SET", "a1", "x") == b"This user has no permissions to access the 'a1' key"
    assert adm("ACL", "DRYRUN", "sel", "HGET", "c1", "f") == "OK"
    # Errors: an unclosed selector, user rules inside one.
    assert adm("ACL", "SETUSER", "sel", "(~a*") == Err("ERR Unmatched parenthesis in acl selector starting at '(~a*'.")
    assert adm("ACL", "SETUSER", "sel", "(on)") == Err("ERR Error in ACL SETUSER modifier '(on)': Syntax error")
    assert adm("ACL", "SETUSER", "sel", "(>pw)") == Err("ERR Error in ACL SETUSER modifier '(>pw)': Syntax error")
    assert adm("ACL", "SETUSER", "sel", "clearselectors") == "OK"
    assert getuser(adm, "sel")[b"selectors"] == []
    assert s("GET", "a1") == noperm_cmd("get")


def test_key_permissions_follow_key_specs(adm, login):
    # LMOVE's source is read and written, its destination only written; SET's key only
    # written, or with GET read and written; EXISTS reads no value: either will do.
    assert adm("ACL", "SETUSER", "ks", "on", ">pw", "+@all", "%R~r*", "%W~w*", "~rw*") == "OK"
    s = login("ks", "pw")
    assert s("LMOVE", "rw1", "w1", "LEFT", "RIGHT") is None
    assert s("LMOVE", "w1", "w2", "LEFT", "RIGHT") == NOPERM_KEYS
    assert s("LMOVE", "rw1", "r1", "LEFT", "RIGHT") == NOPERM_KEYS
    assert s("SET", "w1", "x") == "OK"
    assert s("SET", "w1", "x", "GET") == NOPERM_KEYS
    assert s("SET", "rw1", "x", "GET") is None
    assert s("EXISTS", "r1", "w9") == 0
    assert s("COPY", "r1", "w9") == 0
    assert s("COPY", "w1", "r1") == NOPERM_KEYS


def test_first_argument_rules(adm, login):
    # Redis 7.0's (deprecated) `+cmd|firstarg` on a command without subcommands: the
    # command runs only with that first argument (any case), and the rule is listed back.
    def modifier(op, why):
        return Err("ERR Error in ACL SETUSER modifier '%s': %s" % (op, why))

    assert adm("ACL", "SETUSER", "fa", "on", "nopass", "~*", "+@string", "+select|0", "+select|Ab", "+select|ab") == "OK"
    assert getuser(adm, "fa")[b"commands"] == b"-@all +@string +select|0 +select|Ab"
    assert b"user fa on nopass ~* resetchannels -@all +@string +select|0 +select|Ab" in adm("ACL", "LIST")
    u = login("fa", "")
    assert u("SELECT", "0") == "OK"
    assert u("SELECT", "1") == noperm_cmd("select")
    assert u("SELECT", "aB") == Err("ERR value is not an integer or out of range")
    assert u("GET", "k") is None
    assert adm("ACL", "DRYRUN", "fa", "SELECT", "0") == "OK"
    assert adm("ACL", "DRYRUN", "fa", "SELECT", "2") == b"This user has no permissions to run the 'select' command"
    # Allowing or denying the command (or all commands) drops its first-argument rules.
    adm("ACL", "SETUSER", "fa", "+select")
    assert getuser(adm, "fa")[b"commands"] == b"-@all +@string +select"
    adm("ACL", "SETUSER", "fa", "-select")
    assert getuser(adm, "fa")[b"commands"] == b"-@all +@string"
    assert u("SELECT", "0") == noperm_cmd("select")
    adm("ACL", "SETUSER", "fa", "+select|0", "+@all", "-@all")
    assert getuser(adm, "fa")[b"commands"] == b"-@all"
    # After an all-commands rule, and with a category: listed after the categories.
    adm("ACL", "SETUSER", "fb", "+@all", "-select", "+select|0", "+select|0")
    assert getuser(adm, "fb")[b"commands"] == b"+@all -select +select|0"
    adm("ACL", "SETUSER", "fc", "+select|0", "+@keyspace")
    assert getuser(adm, "fc")[b"commands"] == b"-@all +@keyspace +select|0"
    # In a selector too.
    adm("ACL", "SETUSER", "fd", "on", "nopass", "+select|0", "(+select|1 ~*)")
    assert b"user fd on nopass resetchannels -@all +select|0 (~* resetchannels -@all +select|1)" in adm("ACL", "LIST")
    d = login("fd", "")
    assert d("SELECT", "1") == "OK"
    assert d("SELECT", "0") == "OK"
    assert d("SELECT", "2") == noperm_cmd("select")
    # Errors, as Redis's: an empty first argument, a denial (only subcommands), a first
    # argument of a subcommand, unknown commands.
    assert adm("ACL", "SETUSER", "fe", "+select|") == modifier("+select|", "Syntax error")
    assert adm("ACL", "SETUSER", "fe", "-select|0") == modifier("-select|0", "Unknown command or category name in ACL")
    assert adm("ACL", "SETUSER", "fe", "+select|0|1") == modifier("+select|0|1", "Unknown command or category name in ACL")
    assert adm("ACL", "SETUSER", "fe", "+nosuch|0") == modifier("+nosuch|0", "Unknown command or category name in ACL")
    assert adm("ACL", "SETUSER", "fe", "+config|set|x") == modifier("+config|set|x", "Allowing first-arg of a subcommand is not supported")
    assert b"fe" not in adm("ACL", "USERS")
