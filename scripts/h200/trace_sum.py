#!/usr/bin/env python3
"""A decoded token's kernels on the GPU's clock, from bench/h200/kernel_trace.c's CSV.

Splits the trace into steps at each kernel named STEP_START (default "embed", the first
kernel of a decoding step), keeps the last N steps of the most common length, and prints per
position in the step: the kernel's name, its median time from start to end, how much of its
predecessor it overlapped (its start before the predecessor's end) and the median gap from
the predecessor's end to its own end: the share of the token's critical path it adds. The
gaps sum to the token's time on the GPU.
    python3 scripts/h200/trace_sum.py trace.csv [N] [STEP_START]
With --totals FRACTION instead (training): over the last FRACTION of the trace's span, the
GPU's busy time (the union of the kernels' intervals) against the span, and the kernels'
summed times by name.
    python3 scripts/h200/trace_sum.py --totals 0.3 trace.csv
"""
import collections
import statistics
import sys


def read(path):
    rows = []
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split(",", 3)
            if len(parts) == 4 and parts[0].isdigit():
                rows.append((int(parts[0]), int(parts[1]), parts[3]))
    rows.sort()
    return rows


def totals(fraction, path):
    rows = read(path)
    lo = rows[-1][1] - (rows[-1][1] - rows[0][0]) * fraction
    rows = [r for r in rows if r[0] >= lo]
    busy, end = 0, None
    for st, en, _ in rows:
        if end is None or st > end:
            busy += en - st
            end = en
        elif en > end:
            busy += en - end
            end = en
    span = rows[-1][1] - rows[0][0]
    print(f"{len(rows)} kernels over {span / 1e6:.3f} ms: busy {busy / 1e6:.3f} ms ({100 * busy / span:.1f}%)")
    by = collections.defaultdict(lambda: [0, 0])
    for st, en, name in rows:
        by[name[:60]][0] += en - st
        by[name[:60]][1] += 1
    for name, (t, n) in sorted(by.items(), key=lambda kv: -kv[1][0])[:30]:
        print(f"    {t / 1e6:9.3f} ms {n:6d}  {name}")


def main():
    if sys.argv[1] == "--totals":
        totals(float(sys.argv[2]), sys.argv[3])
        return
    path = sys.argv[1]
    keep = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    first = sys.argv[3] if len(sys.argv) > 3 else "embed"
    rows = read(path)
    steps, cur = [], []
    for r in rows:  # a kernel named `first`, or `first` and its spec's suffix, opens a step
        if (r[2] == first or r[2].startswith(first + "_")) and cur:
            steps.append(cur)
            cur = []
        cur.append(r)
    if cur:
        steps.append(cur)
    if len(steps) < 3:
        sys.exit(f"trace_sum: {len(steps)} steps starting at '{first}' in {path}")
    length = collections.Counter(len(s) for s in steps).most_common(1)[0][0]
    chosen = [i for i, s in enumerate(steps) if len(s) == length and i > 0][-keep:]
    print(f"{len(rows)} kernels, {len(steps)} steps; the last {len(chosen)} of {length} kernels")
    dur = [[] for _ in range(length)]
    lead = [[] for _ in range(length)]
    gap = [[] for _ in range(length)]
    token = []
    for i in chosen:
        s, prev_end = steps[i], steps[i - 1][-1][1]
        token.append(s[-1][1] - prev_end)
        for j, (st, en, _) in enumerate(s):
            dur[j].append(en - st)
            lead[j].append(prev_end - st)
            gap[j].append(en - prev_end)
            prev_end = en
    med = lambda v: statistics.median(v) / 1000.0
    print(f"token on the GPU: median {med(token):.2f} us (from the end of the step before)")
    print(f"{'#':>3} {'kernel':<28} {'runs us':>8} {'overlap':>8} {'adds us':>8}")
    by_name = collections.defaultdict(float)
    for j in range(length):
        name = steps[chosen[0]][j][2][:28]
        by_name[name] += med(gap[j])
        print(f"{j:>3} {name:<28} {med(dur[j]):8.2f} {med(lead[j]):8.2f} {med(gap[j]):8.2f}")
    print("adds, by kernel name (a token):")
    for name, v in sorted(by_name.items(), key=lambda kv: -kv[1]):
        print(f"    {name:<28} {v:8.2f} us")


main()
