#!/usr/bin/env python3
"""Per kernel, the mean over the measured step's launches (the second half of the CSV's
launches: the first half is the warm-up step) of Nsight Compute's duration, DRAM bytes read
and written and L2 bytes, from `ncu --csv --metrics gpu__time_duration.sum,
dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum` (flash_traffic.sh).
    python3 scripts/h200/ncu_bytes.py LOG"""
import collections
import csv
import sys

SCALE = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9,
         "ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}  # bytes; microseconds


def main(path):
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f) if len(r) > 10]
    if not rows:
        sys.exit(f"ncu_bytes: no CSV rows in {path}")
    head = rows[0]
    kernel, metric = head.index("Kernel Name"), head.index("Metric Name")
    value, unit = head.index("Metric Value"), head.index("Metric Unit")
    seen = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in rows[1:]:
        if r[unit] not in SCALE:
            sys.exit(f"ncu_bytes: unknown unit {r[unit]!r}")
        seen[r[kernel].split("(")[0]][r[metric]].append(float(r[value].replace(",", "")) * SCALE[r[unit]])

    def mean(xs):
        xs = xs[len(xs) // 2:]
        return sum(xs) / len(xs)

    for name, m in seen.items():
        us = mean(m["gpu__time_duration.sum"])
        rd, wr = mean(m["dram__bytes_read.sum"]), mean(m["dram__bytes_write.sum"])
        l2 = mean(m["lts__t_bytes.sum"])
        print(f"  {name:20s} {us:8.1f} us  DRAM read {rd / 1e6:7.1f} MB, write {wr / 1e6:7.1f} MB"
              f" ({(rd + wr) / us / 1e6:.2f} TB/s)  L2 {l2 / 1e6:7.1f} MB")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
