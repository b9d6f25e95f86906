"""Sums Nsight Compute's per-kernel durations (`ncu --metrics gpu__time_duration.sum --csv`)
by kernel name, cuBLASLt's GEMMs as one line, divided by a number of units (steps or tokens
the profile covered). With dram__bytes_read.sum in the metrics too, each line also gives the
bytes its kernels read from DRAM and the rate. Usage: python3 ncu_sum.py LOG UNITS"""
import collections
import csv
import sys

rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]
ki, vi = hdr.index("Kernel Name"), hdr.index("Metric Value")
mi = hdr.index("Metric Name") if "Metric Name" in hdr else None
tot, byt, cnt = collections.defaultdict(float), collections.defaultdict(float), collections.Counter()
for r in rows[1:]:
    try:
        v = float(r[vi].replace(",", ""))  # values carry thousands separators
    except ValueError:
        continue
    k = "cuBLASLt GEMMs" if ("nvjet" in r[ki] or "cublas" in r[ki].lower()) else r[ki][:48]
    metric = r[mi] if mi is not None else "gpu__time_duration.sum"
    if metric == "dram__bytes_read.sum":
        byt[k] += v
    elif metric == "gpu__time_duration.sum":
        tot[k] += v
        cnt[k] += 1
n = float(sys.argv[2])
print(f"  ncu total {sum(tot.values()) / n / 1e3:9.1f} us per unit")
for k, v in sorted(tot.items(), key=lambda x: -x[1])[:16]:
    rate = f" {byt[k] / n / 1e6:8.2f} MB {byt[k] / v:7.0f} GB/s" if k in byt and v > 0 else ""
    print(f"  ncu {v / n / 1e3:9.1f} us {cnt[k] / n:6.1f} x{rate} {k}")
