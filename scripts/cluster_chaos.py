"""Writer and checker for scripts/cluster_chaos.sh (not run by the test command).

  cluster_chaos.py write PORT STATE STOPFILE   write until STOPFILE exists, then save STATE
  cluster_chaos.py check PORT STATE            every acknowledged write must be readable

The writer sets counters ctr:{0..N-1} to increasing values, each SET followed by WAIT 1
on the same connection to the key's primary; a write counts as acknowledged only when SET
answered OK and WAIT reported one replica. STATE (JSON) keeps, per key, the last
acknowledged value and the last value sent; the checker requires acked <= read <= sent.
"""
import json, os, sys, time

import redis

N_KEYS = 500


def slot_map(port):
    """slot -> (host, port) from CLUSTER SLOTS of any node that answers."""
    last = None
    for _ in range(100):
        for p in [port] + list(PORTS):
            try:
                r = redis.Redis(port=p, socket_timeout=2, socket_connect_timeout=1)
                m = {}
                for start, end, primary, *_ in r.execute_command("CLUSTER", "SLOTS"):
                    for s in range(start, end + 1):
                        m[s] = int(primary[1])
                    PORTS.add(int(primary[1]))
                r.close()
                if len(m) == 16384:
                    return m
            except redis.RedisError as e:
                last = e
        time.sleep(0.1)
    raise SystemExit(f"no full slot map: {last}")


PORTS = set()


def load(path):
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {"acked": {}, "sent": {}, "value": 0, "acks": 0, "fails": 0}


def conn(cache, port):
    c = cache.get(port)
    if c is None:
        c = redis.Redis(port=port, socket_timeout=3, socket_connect_timeout=1, single_connection_client=True)
        cache[port] = c
    return c


def write(port, state_path, stop):
    st = load(state_path)
    m = slot_map(port)
    cache = {}
    i = 0
    while not os.path.exists(stop):
        key = f"ctr:{i % N_KEYS}"
        i += 1
        st["value"] += 1
        v = st["value"]
        st["sent"][key] = v
        p = m[redis.cluster.key_slot(key.encode())]
        try:
            c = conn(cache, p)
            ok = c.execute_command("SET", key, v)
            n = c.execute_command("WAIT", 1, 1000)
            if ok and n >= 1:
                st["acked"][key] = v
                st["acks"] += 1
            else:
                st["fails"] += 1
        except redis.RedisError:
            st["fails"] += 1
            c = cache.pop(p, None)
            if c is not None:
                try:
                    c.close()
                except Exception:
                    pass
            time.sleep(0.05)
            m = slot_map(port)
    with open(state_path, "w") as f:
        json.dump(st, f)
    print(f"writer: {st['acks']} acknowledged writes in all, {st['fails']} not acknowledged")


def check(port, state_path):
    st = load(state_path)
    rc = redis.RedisCluster(host="127.0.0.1", port=port, socket_timeout=5)
    lost = 0
    for key, a in st["acked"].items():
        got = rc.get(key)
        got = int(got) if got is not None else None
        if got is None or got < a or got > st["sent"][key]:
            lost += 1
            if lost <= 10:
                print(f"LOST {key}: acknowledged {a}, last sent {st['sent'][key]}, read {got}")
    rc.close()
    print(f"check: {len(st['acked'])} keys with acknowledged writes, {lost} lost")
    return 1 if lost else 0


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(int(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        sys.exit(check(int(sys.argv[2]), sys.argv[3]))
