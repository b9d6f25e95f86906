"""Summaries of one Nsight Compute report (flash_stalls.sh).
  python3 sass_stalls.py source CSV   (ncu --page source --csv --print-source sass): the stall
      samples by instruction kind (the opcode before its first '.') and the 30 SASS lines with
      the most samples, each with its share and its columns' largest stall reasons.
  python3 sass_stalls.py raw CSV      (ncu --page raw --csv): the metrics whose names speak of
      the tensor pipe, barriers, stall reasons or issue, as name = value."""
import collections
import csv
import sys


def number(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None


def source(path):
    rows = list(csv.reader(open(path, errors="replace")))
    head = next((i for i, r in enumerate(rows) if any("Source" in c for c in r)), None)
    if head is None:
        print("  sass: no header found; first line:", rows[0][:8] if rows else "(empty)")
        return
    hdr = rows[head]
    src = next(i for i, c in enumerate(hdr) if c.strip() == "Source" or c.startswith("Source"))
    total = next((i for i, c in enumerate(hdr) if c.startswith("Warp Stall Sampling (All")), None)
    if total is None:
        print("  sass: no stall-sampling column; columns:", "; ".join(hdr)[:600])
        return
    reasons = [i for i, c in enumerate(hdr) if c.startswith("stall_") or "Stall" in c and i != total]
    lines = []
    for r in rows[head + 1:]:
        if len(r) <= total:
            continue
        v = number(r[total])
        if v is not None:
            lines.append((v, r))
    allv = sum(v for v, _ in lines) or 1.0
    kinds = collections.Counter()
    for v, r in lines:
        op = r[src].strip().split(" ")
        op = [w for w in op if w and not w.startswith("@")]
        kinds[(op[0].split(".")[0] if op else "?")] += v
    print(f"  sass: {len(lines)} lines, {allv:.0f} samples; by kind:",
          ", ".join(f"{k} {100 * v / allv:.1f}%" for k, v in kinds.most_common(14)))
    for v, r in sorted(lines, key=lambda x: -x[0])[:30]:
        why = sorted(((number(r[i]) or 0, hdr[i]) for i in reasons if i < len(r)), reverse=True)[:3]
        why = ", ".join(f"{n.replace('Warp Stall Sampling', '').strip()} {x:.0f}" for x, n in why if x > 0)
        print(f"  {100 * v / allv:5.1f}% {r[src].strip()[:70]:70s} {why}")


def raw(path):
    rows = list(csv.reader(open(path, errors="replace")))
    if len(rows) < 3:
        print("  raw: too few rows")
        return
    hdr, vals = rows[0], rows[-1]
    keys = ("tensor", "hmma", "gmma", "barrier", "stall", "issue", "warps_issue_stalled", "inst_executed.avg")
    for name, val in zip(hdr, vals):
        if any(k in name for k in keys) and ("pct" in name or "ratio" in name or "avg" in name):
            print(f"  raw {name} = {val}")


if __name__ == "__main__":
    {"source": source, "raw": raw}[sys.argv[1]](sys.argv[2])
