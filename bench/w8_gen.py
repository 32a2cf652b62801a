"""W8's events (bench/w8.sh): USERS users with 20 events each on average (5 to 35),
impressions, clicks and visits from 8 channels over 30 days, 3% of the users converting
(a purchase with an amount, after their other events), as explicit-ID XADDs.

    python3 bench/w8_gen.py USERS SEED RESP_OUT CSV_OUT

writes the XADDs as a RESP stream (for `redis-cli --pipe`) and the same events as CSV
(user, ms, seq, channel, event, amount) for DuckDB's reference computation. Prints the
number of events.
"""

import random
import sys

CHANNELS = [b"google", b"facebook", b"email", b"direct", b"tiktok", b"bing", b"affiliate", b"display"]
KINDS = [b"impression", b"impression", b"click", b"visit"]
T0 = 1_700_000_000_000
DAY = 86_400_000


def bulk(b):
    return b"$%d\r\n%s\r\n" % (len(b), b)


def main():
    users, seed, resp_path, csv_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    rng = random.Random(seed)
    n = 0
    with open(resp_path, "wb", buffering=1 << 20) as resp, open(csv_path, "wb", buffering=1 << 20) as csv:
        csv.write(b"user,ms,seq,channel,event,amount\n")
        for u in range(users):
            key = b"user:%d" % u
            t = T0 + rng.randrange(DAY)
            events = rng.randint(5, 35)
            buyer = rng.random() < 0.03
            for i in range(events):
                t += rng.randrange(1000, 30 * DAY // 35)
                if buyer and i == events - 1:
                    amount = b"%d.%02d" % (rng.randrange(5, 500), rng.randrange(100))
                    fields = [b"event", b"purchase", b"amount", amount]
                    row = b"%d,%d,0,,purchase,%s\n" % (u, t, amount)
                else:
                    ch, kind = rng.choice(CHANNELS), rng.choice(KINDS)
                    fields = [b"source", ch, b"event", kind]
                    row = b"%d,%d,0,%s,%s,\n" % (u, t, ch, kind)
                args = [b"XADD", key, b"%d-0" % t] + fields
                resp.write(b"*%d\r\n" % len(args) + b"".join(bulk(a) for a in args))
                csv.write(row)
                n += 1
    print(n)


if __name__ == "__main__":
    main()
