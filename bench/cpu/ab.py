#!/usr/bin/env python3
"""Alternating A/B timing on a shared machine: each sample of each variant is taken only after
the CPUs were at least IDLE percent idle over GATE seconds (/proc/stat), and the variants
alternate in every round, so a change in the machine's load falls on all of them alike.

usage: bench/cpu/ab.py [--rounds N] [--regex RE] [--idle PCT] [--gate S] LABEL=CMD ...
Each CMD runs through the shell; the first group of RE (default: the `median X ms/token` of
`tern bench generate`) in its output is the sample. Prints every sample with the load average
and, per variant, the best, median and worst of the samples."""
import argparse
import re
import statistics
import subprocess
import sys
import time


def cpu_times():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return idle, sum(fields)


def wait_quiet(pct, gate, timeout=600):
    start = time.time()
    while True:
        i0, t0 = cpu_times()
        time.sleep(gate)
        i1, t1 = cpu_times()
        idle = 100.0 * (i1 - i0) / max(1, t1 - t0)
        if idle >= pct or time.time() - start > timeout:
            return idle


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--regex", default=r"median ([0-9.]+) ms/token")
    ap.add_argument("--idle", type=float, default=93.0)
    ap.add_argument("--gate", type=float, default=2.0)
    ap.add_argument("variants", nargs="+")
    a = ap.parse_args()
    variants = [v.split("=", 1) for v in a.variants]
    samples = {label: [] for label, _ in variants}
    rx = re.compile(a.regex)
    for r in range(a.rounds):
        for label, cmd in variants:
            idle = wait_quiet(a.idle, a.gate)
            out = subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout
            m = rx.search(out)
            if not m:
                print(f"{label}: no match in output:\n{out}", file=sys.stderr)
                sys.exit(1)
            x = float(m.group(1))
            samples[label].append(x)
            with open("/proc/loadavg") as f:
                load = f.read().split()[0]
            print(f"round {r + 1} {label:24s} {x:9.3f}  (idle {idle:.0f}% before, load {load})", flush=True)
    for label, xs in samples.items():
        print(f"{label:24s} best {min(xs):8.3f}  median {statistics.median(xs):8.3f}  worst {max(xs):8.3f}  "
              f"({', '.join(f'{x:.3f}' for x in xs)})")


if __name__ == "__main__":
    main()
