#!/usr/bin/env python3
"""W5 event generator: deterministic (seeded) v1 CSV and v2 JSON-lines events and the rules
file of 6 summaries they feed.

Campaigns are Zipfian (s = 1.1 over 1,000 campaigns), user IDs are 64-bit integers drawn
from a pool (so distinct counts are meaningful), states are the 50 US states, event types
view/click/conversion (80/15/5), timestamps cover 30 days. Each v1 event fans out to 1 to 6
summaries: every event feeds `by_campaign_day` and `by_state_hour`, clicks also
`clicks_by_campaign`, conversions `conversions_by_state` and `spend_by_campaign`, and events
with cost > 5 `big_spenders`. A v2 event nests the same data and carries 0-3 items whose
SKUs fan out.

`redis-v1` and `redis-v2` write, as RESP for `redis-cli --pipe`, the commands a Redis user
would send for the same summaries (HINCRBY, HINCRBYFLOAT, PFADD, SADD; Redis has no
"keep the maximum" hash command, so `spend_by_campaign`'s `top` is left out there).

usage: w5gen.py v1|v2|rules|redis-v1|redis-v2 N SEED > file
"""
import bisect
import itertools
import json
import random
import sys

STATES = ("AL AK AZ AR CA CO CT DE FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ "
          "NM NY NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY").split()
START = 1_700_000_000
DAYS = 30

RULES = '''
[feed.v1]
format = "csv"
columns = ["ts", "campaign", "user", "state", "event", "cost"]
time = { field = "ts", unit = "s" }

[feed.v2]
format = "jsonl"
time = { path = "$.time", unit = "ms" }
fields = { campaign = "$.ad.campaign", user = "$.user.id", state = "$.user.state", event = "$.event", cost = "$.cost", sku = "$.items[*].sku" }

[[summary]]
name = "by_campaign_day"
feed = "v1"
dimensions = ["campaign"]
bucket = "1d"
metrics = { events = "count", spend = "sum(cost)", users = "hll(user)" }

[[summary]]
name = "by_state_hour"
feed = "v1"
dimensions = ["state"]
bucket = "1h"
metrics = { events = "count" }

[[summary]]
name = "clicks_by_campaign"
feed = "v1"
where = "event = 'click'"
dimensions = ["campaign", "state"]
bucket = "1d"
metrics = { clicks = "count", users = "distinct(user)" }

[[summary]]
name = "conversions_by_state"
feed = "v1"
where = "event = 'conversion'"
dimensions = ["state"]
bucket = "1d"
metrics = { conversions = "count", value = "sum(cost)" }

[[summary]]
name = "spend_by_campaign"
feed = "v1"
where = "event = 'conversion'"
dimensions = ["campaign"]
bucket = "none"
metrics = { spend = "sum(cost)", top = "max(cost)" }

[[summary]]
name = "big_spenders"
feed = "v1"
where = "cost > 5"
dimensions = ["campaign"]
bucket = "1d"
metrics = { n = "count", users = "hll(user)" }

[[summary]]
name = "v2_by_campaign_day"
feed = "v2"
dimensions = ["campaign"]
bucket = "1d"
metrics = { events = "count", spend = "sum(cost)", users = "hll(user)" }

[[summary]]
name = "v2_by_sku"
feed = "v2"
dimensions = ["sku"]
bucket = "1d"
metrics = { sold = "count", buyers = "distinct(user)" }
'''


def events(n, seed):
    rng = random.Random(seed)
    weights = [1 / (k ** 1.1) for k in range(1, 1001)]
    cum = list(itertools.accumulate(weights))
    users = [rng.getrandbits(63) for _ in range(max(1000, n // 20))]
    for i in range(n):
        c = bisect.bisect_left(cum, rng.random() * cum[-1]) + 1
        r = rng.random()
        event = "view" if r < 0.80 else ("click" if r < 0.95 else "conversion")
        cost = round(rng.random() * 10, 2) if event != "view" else 0
        yield (START + rng.randrange(DAYS * 86400), "c%d" % c, rng.choice(users), rng.choice(STATES), event, cost,
               ["sku%d" % rng.randrange(200) for _ in range(rng.randrange(4))])


def resp(*args):
    out = ["*%d\r\n" % len(args)]
    for a in args:
        a = str(a)
        out.append("$%d\r\n%s\r\n" % (len(a.encode()), a))
    return "".join(out)


def redis_v1(e):
    ts, c, u, st, ev, cost, _ = e
    day, hour = ts // 86400 * 86400, ts // 3600 * 3600
    out = []
    k = "by_campaign_day:%s:%d" % (c, day)
    out += [resp("HINCRBY", k, "events", 1), resp("HINCRBYFLOAT", k, "spend", cost), resp("PFADD", k + ":users", u)]
    out.append(resp("HINCRBY", "by_state_hour:%s:%d" % (st, hour), "events", 1))
    if ev == "click":
        k = "clicks_by_campaign:%s:%s:%d" % (c, st, day)
        out += [resp("HINCRBY", k, "clicks", 1), resp("SADD", k + ":users", u)]
    if ev == "conversion":
        k = "conversions_by_state:%s:%d" % (st, day)
        out += [resp("HINCRBY", k, "conversions", 1), resp("HINCRBYFLOAT", k, "value", cost)]
        out.append(resp("HINCRBYFLOAT", "spend_by_campaign:%s" % c, "spend", cost))
    if cost > 5:
        k = "big_spenders:%s:%d" % (c, day)
        out += [resp("HINCRBY", k, "n", 1), resp("PFADD", k + ":users", u)]
    return "".join(out)


def redis_v2(e):
    ts, c, u, st, ev, cost, skus = e
    day = ts // 86400 * 86400
    k = "v2_by_campaign_day:%s:%d" % (c, day)
    out = [resp("HINCRBY", k, "events", 1), resp("HINCRBYFLOAT", k, "spend", cost), resp("PFADD", k + ":users", u)]
    for s in skus:
        k = "v2_by_sku:%s:%d" % (s, day)
        out += [resp("HINCRBY", k, "sold", 1), resp("SADD", k + ":buyers", u)]
    return "".join(out)


def main():
    kind, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    out = sys.stdout
    if kind == "rules":
        out.write(RULES)
        return
    if kind in ("redis-v1", "redis-v2"):
        f = redis_v1 if kind == "redis-v1" else redis_v2
        for e in events(n, seed):
            out.write(f(e))
        return
    for ts, c, u, st, ev, cost, skus in events(n, seed):
        if kind == "v1":
            out.write("%d,%s,%d,%s,%s,%s\n" % (ts, c, u, st, ev, cost))
        else:
            out.write(json.dumps({"time": ts * 1000, "ad": {"campaign": c}, "user": {"id": u, "state": st},
                                  "event": ev, "cost": cost, "items": [{"sku": s} for s in skus]},
                                 separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
