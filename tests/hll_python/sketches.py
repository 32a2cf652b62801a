"""Builds HLL sketches with python-hll (java-hll's Python port) for the differential test.

Reads a JSON list of cases from stdin: {"log2m", "regwidth", "expthresh", "sparseon",
"raw": [signed 64-bit hashed values], "union_with": index or null}; writes a JSON list of
{"hex": storage-specification bytes, "card": cardinality} to stdout. Run with the
virtualenv's python (tests/hll_python/requirements.txt).
"""

import json
import sys
import warnings

warnings.simplefilter("ignore")  # python-hll's numpy arithmetic warns on intended wrap-around

from python_hll.hll import HLL  # noqa: E402


def java_expthresh(count):
    """postgresql-hll's EXPTHRESH is a count (-1 auto, 0 off, else a power of two);
    java-hll's is 2^(value - 1) for values 1..18."""
    return count if count <= 0 else count.bit_length()


def build(case):
    h = HLL(case["log2m"], case["regwidth"], java_expthresh(case["expthresh"]), case["sparseon"])
    for v in case["raw"]:
        h.add_raw(v)
    return h


def main():
    cases = json.load(sys.stdin)
    built = [build(c) for c in cases]
    out = []
    for c, h in zip(cases, built):
        if c.get("union_with") is not None:
            h.union(built[c["union_with"]])
        data = bytes((b + 256) % 256 for b in h.to_bytes())
        out.append({"hex": data.hex(), "card": h.cardinality()})
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
