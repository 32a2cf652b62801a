"""Exact, readable numbers in the summarizer's answers (issue 52).

Sums of decimal inputs are fixed point scaled to the most decimals seen: every sum is compared
as text with Python's `decimal` over the same inputs (a million of them, with one to four
decimals, negative refunds, an exponent form), in the hash fields and in SUMMARY.QUERY, and
kept through a restart from the log. Numbers print in plain notation (never `e+4`), HLL
estimates are integers (postgresql-hll's `round(hll_cardinality(...))`: half away from zero,
against HLL.CARD of the same keys), and RESP3 replies carry `,` doubles and `:` integers.
SUMMARY.UPDATE's INCRBYDECIMAL (what the ingest logs) is exact; INCRBYFLOAT keeps its double
sum, so logs written before it replay to the values they had.
"""

import collections
import decimal
import math
import os
import random
import shutil
import tempfile

import pytest
import redis

from helpers import RespClient, encode_command
from test_summarizer import Node

pytestmark = pytest.mark.abacus_only("the summarizer is Abacus's")

DAY = 86400
START = 1_700_000_000

RULES = '''
[feed.sales]
format = "csv"
columns = ["ts", "campaign", "user", "amount"]
time = { field = "ts", unit = "s" }

[[summary]]
name = "money"
feed = "sales"
dimensions = ["campaign"]
bucket = "1d"
metrics = { n = "count", spend = "sum(amount)", lo = "min(amount)", hi = "max(amount)", users = "hll(user)" }

[[summary]]
name = "total"
feed = "sales"
dimensions = []
bucket = "none"
metrics = { n = "count", spend = "sum(amount)" }
'''

# Amounts whose sum as doubles is 12075.619999999999: the exact sum is 12075.62.
FLOAT_TRAP = ["0.1", "0.2", "12000.3", "55.02", "19.99", "0.01"]


@pytest.fixture(scope="module")
def node():
    d = tempfile.mkdtemp(prefix="abacus-numbers-")
    with open(os.path.join(d, "rules.toml"), "w") as f:
        f.write(RULES)
    data = os.path.join(d, "data")
    os.makedirs(data)
    n = Node(data, "--summarizer-rules", os.path.join(d, "rules.toml"), "--appendfsync", "always", "--save", "").start()
    yield n
    n.stop()
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def sr(node):
    c = node.client()
    c.flushall()
    yield c
    c.close()


def plain(d):
    """A Decimal as SQL prints a DECIMAL: plain notation with its exponent's decimals."""
    return format(d, "f")


def gen_amount(rng, campaign):
    """An amount as a feed writes it, and its exact value: c0 always has two decimals (money),
    the others one to four, some negative (refunds), some in exponent form."""
    cents = rng.randrange(-2_000, 5_000_000)
    if campaign == "c0":
        text = "%s%d.%02d" % ("-" if cents < 0 else "", abs(cents) // 100, abs(cents) % 100)
    else:
        places = rng.randrange(1, 5)
        text = "%s%d.%0*d" % ("-" if cents < 0 else "", abs(cents) // 10**places, places, abs(cents) % 10**places)
        if rng.random() < 0.01:
            text = "%de-%d" % (cents, places)
    return text, decimal.Decimal(text)


def ingest(c, lines, chunk=100_000):
    for i in range(0, len(lines), chunk):
        c.execute_command("SUMMARY.INGEST", "sales", "\n".join(lines[i:i + chunk]))


def rows(reply):
    return [{k.decode(): v for k, v in zip(r[::2], r[1::2])} for r in reply]


def test_a_million_decimal_sums_are_exact(sr, node):
    rng = random.Random(52)
    lines = []
    sums = collections.defaultdict(decimal.Decimal)
    scale = collections.defaultdict(int)
    lo, hi = {}, {}
    by_campaign = collections.defaultdict(decimal.Decimal)
    campaign_scale = collections.defaultdict(int)
    for i in range(1_000_000):
        ts = START + rng.randrange(3 * DAY)
        campaign = "c%d" % rng.randrange(8)
        text, value = gen_amount(rng, campaign)
        lines.append("%d,%s,u%d,%s" % (ts, campaign, rng.randrange(5000), text))
        key = "money:%s:%d" % (campaign, ts - ts % DAY)
        sums[key] += value
        scale[key] = max(scale[key], -value.as_tuple().exponent)
        campaign_scale[campaign] = max(campaign_scale[campaign], -value.as_tuple().exponent)
        by_campaign[campaign] += value
        lo[key] = min(lo.get(key, value), value)
        hi[key] = max(hi.get(key, value), value)
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        ingest(sr, lines)
        assert len(list(sr.scan_iter(match="money:*", _type="hash"))) == len(sums)
        for key, total in sums.items():
            h = sr.hgetall(key)
            want = plain(total.quantize(decimal.Decimal(1).scaleb(-scale[key])))
            assert h[b"spend"].decode() == want, key
            assert decimal.Decimal(h[b"lo"].decode()) == lo[key] and decimal.Decimal(h[b"hi"].decode()) == hi[key], key
        got = rows(sr.execute_command("SUMMARY.QUERY", "money", "GROUPBY", "campaign"))
        assert [r["campaign"].decode() for r in got] == sorted(by_campaign)
        for r in got:
            c = r["campaign"].decode()
            assert r["spend"].decode() == plain(by_campaign[c].quantize(decimal.Decimal(1).scaleb(-campaign_scale[c])))
            assert b"e" not in r["spend"] and b"e" not in r["lo"] and b"e" not in r["hi"]
        (everything,) = rows(sr.execute_command("SUMMARY.QUERY", "total"))
        assert everything["n"] == 1_000_000
        assert everything["spend"].decode() == plain(sum(by_campaign.values()).quantize(decimal.Decimal("0.0001")))
        # Exact through a restart from the log (kill -9: nothing but the log to replay).
        before = {k: sr.hgetall(k) for k in sums}
        node.kill()
        node.start()
        c = node.client()
        assert {k: c.hgetall(k) for k in sums} == before
        c.close()


def test_readme_example_reads_as_money(sr):
    lines = ["%d,c1,u%d,%s" % (START + i, i, a) for i, a in enumerate(FLOAT_TRAP)]
    assert sum(float(a) for a in FLOAT_TRAP) != 12075.62  # what doubles would have answered
    sr.execute_command("SUMMARY.INGEST", "sales", "\n".join(lines))
    (row,) = rows(sr.execute_command("SUMMARY.QUERY", "money", "GROUPBY", "campaign"))
    assert row["spend"] == b"12075.62" and row["lo"] == b"0.01" and row["hi"] == b"12000.3"
    assert row["n"] == 6 and row["users"] == 6
    # A second batch adds exactly to the stored text.
    sr.execute_command("SUMMARY.INGEST", "sales", "%d,c1,u9,0.005" % START)
    assert sr.hget("money:c1:%d" % (START - START % DAY), "spend") == b"12075.625"


def test_hll_estimates_are_rounded_integers(sr):
    rng = random.Random(7)
    lines = ["%d,c%d,%d,1" % (START + rng.randrange(3 * DAY), rng.randrange(4), rng.getrandbits(40)) for _ in range(20_000)]
    ingest(sr, lines)
    got = rows(sr.execute_command("SUMMARY.QUERY", "money", "GROUPBY", "campaign"))
    assert len(got) == 4
    fractional = 0
    for r in got:
        keys = list(sr.scan_iter(match="money:%s:*:users" % r["campaign"].decode()))
        text = sr.execute_command("HLL.CARD", *keys)
        # Plain notation, the shortest digits: 4990.123456789 and not 4.990123456789e+3.
        assert b"e" not in text and text.decode() in (repr(float(text)), "%d" % float(text))
        card = float(text)
        fractional += card != math.floor(card)
        assert isinstance(r["users"], int) and r["users"] == math.floor(card + 0.5)
    assert fractional  # the rounding was exercised


class RawDoubles(RespClient):
    """A RESP client that also keeps every RESP3 double's text as sent."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.doubles = []

    def _readline(self):
        line = super()._readline()
        if line[:1] == b",":
            self.doubles.append(line[1:])
        return line


def test_resp3_replies_are_typed(sr, node):
    lines = ["%d,c1,u%d,%s" % (START + i, i, a) for i, a in enumerate(FLOAT_TRAP)]
    sr.execute_command("SUMMARY.INGEST", "sales", "\n".join(lines))
    c = RawDoubles(node.p.host, node.p.port)
    c.send(encode_command("HELLO", "3") + encode_command("SUMMARY.QUERY", "money", "GROUPBY", "campaign"))
    c.read_reply()
    (row,) = c.read_reply()
    row = {k.decode(): v for k, v in row.items()}
    assert row["n"] == 6 and row["users"] == 6 and isinstance(row["users"], int)
    assert isinstance(row["spend"], float) and row["spend"] == 12075.62
    assert sorted(c.doubles) == sorted([b"12075.62", b"0.01", b"12000.3"])


def test_summary_update_incrbydecimal(sr):
    u = lambda *a: sr.execute_command("SUMMARY.UPDATE", "h", *a)
    u("a", "INCRBYDECIMAL", "0.1")
    u("a", "INCRBYDECIMAL", "0.2")
    u("f", "INCRBYFLOAT", "0.1")
    u("f", "INCRBYFLOAT", "0.2")
    u("w", "INCRBYDECIMAL", "1.50", "x", "INCRBYDECIMAL", "1.5")
    u("w", "INCRBYDECIMAL", "2", "x", "INCRBYDECIMAL", "2.25")
    u("e", "INCRBYDECIMAL", "2.5e3")
    u("tiny", "INCRBYDECIMAL", "1e-40")
    u("big", "INCRBYDECIMAL", "99999999999999999999999999999999999999")
    u("big", "INCRBYDECIMAL", "1")
    h = {k.decode(): v.decode() for k, v in sr.hgetall("h").items()}
    # Exact decimals; INCRBYFLOAT's double sum as before; beyond 38 digits a double, printed
    # in plain notation.
    assert h == {"a": "0.3", "f": "0.30000000000000004", "w": "3.50", "x": "3.75", "e": "2500",
                 "tiny": "0." + "0" * 39 + "1", "big": "1" + "0" * 38}
    # MIN/MAX compare exactly and keep the value as given.
    u("m", "MIN", "10.10")
    u("m", "MIN", "10.1")
    assert sr.hget("h", "m") == b"10.10"
    u("m", "MIN", "10.099999999999999999999")
    assert sr.hget("h", "m") == b"10.099999999999999999999"
    for bad, msg in [(["a", "INCRBYDECIMAL", "x"], "not a valid float"), (["a", "INCRBYDECIMAL", "inf"], "not a valid float")]:
        with pytest.raises(redis.ResponseError, match=msg):
            u(*bad)
    sr.hset("h", "t", "text")
    with pytest.raises(redis.ResponseError, match="not a float"):
        u("t", "INCRBYDECIMAL", "1")
    assert sr.hget("h", "a") == b"0.3"
