#!/usr/bin/env python3
"""How long a run's all-reduces took, by how long their link had idled.

Reads the per-rank Chrome traces of one `loom run --trace T` (T.rank0.json,
T.rank1.json, ...), takes every all-reduce that all ranks made, times it from
its last party's arrival to its last party's return, and groups the calls by
the time since the previous all-reduce ended (the link's idle time; other
communication is not counted). On a token-bucket-shaped link (loom launch
--net_rate) calls after idle find the bucket refilled.

Usage: allreduce_idle.py TRACE.rank0.json TRACE.rank1.json [...]
"""
import json
import sys


def events(path):
    with open(path) as f:
        data = json.load(f)
    trace = data["traceEvents"] if isinstance(data, dict) else data
    return {(e["args"]["job"], e["args"]["instruction"]): e
            for e in trace if e.get("ph") == "X" and e.get("name") == "allreduce"}


def main(paths):
    if len(paths) < 2:
        sys.exit(__doc__)
    ranks = [events(p) for p in paths]
    calls = []
    for key in ranks[0]:
        if all(key in r for r in ranks):
            start = max(r[key]["ts"] for r in ranks)
            end = max(r[key]["ts"] + r[key]["dur"] for r in ranks)
            calls.append((start, end))
    calls.sort()
    bins = [("idle < 0.2 ms", 0.2), ("0.2-1 ms", 1), ("1-2 ms", 2), ("2 ms or more", float("inf"))]
    groups = {name: [] for name, _ in bins}
    previous_end = None
    for start, end in calls:
        idle_ms = float("inf") if previous_end is None else (start - previous_end) / 1e3
        previous_end = end
        name = next(n for n, upper in bins if idle_ms < upper or upper == float("inf"))
        groups[name].append((end - start) / 1e3)
    print("idle before the call   calls  mean ms  p25 ms  median ms  p75 ms  p90 ms")
    for name, _ in bins:
        d = sorted(groups[name])
        if not d:
            continue
        n = len(d)
        print("%-20s %7d %8.2f %7.2f %10.2f %7.2f %7.2f" % (
            name, n, sum(d) / n, d[n // 4], d[n // 2], d[3 * n // 4], d[int(0.9 * (n - 1))]))


if __name__ == "__main__":
    main(sys.argv[1:])
