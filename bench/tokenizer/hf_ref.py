#!/usr/bin/env python3
"""Hugging Face `tokenizers` as the reference for a tokenizer.json (pip install tokenizers).

  hf_ref.py reference [--tokenizer JSON] [--data brown.txt] [--out FILE]
      encodes the corpus in one call (add_special_tokens=False) and writes the id count and
      FNV-1a 64 hashes of each block of 8192 ids (little-endian uint32), the format of
      tests/tokenizer/brown_reference.txt; the default writes
      tests/tokenizer/brown_llama_reference.txt for the llama-tiny-a fixture's tokenizer.
  hf_ref.py bench FILE [--tokenizer JSON] [--runs N] [--raw] [--lines] [--no-warmup]
      times Tokenizer.encode(text, add_special_tokens=False) on the whole file, single-
      threaded; prints the median MB/s (--raw: each run's). --lines times encode_batch over
      the file's lines instead (RAYON_NUM_THREADS=1: one thread), HF's usual way to feed text.
  hf_ref.py ids FILE [--tokenizer JSON]     prints FILE's ids, space-separated

Nothing is downloaded.
"""
import argparse
import os
import statistics
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # before tokenizers starts its thread pool
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
from tokenizers import Tokenizer  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_TOKENIZER = os.path.join(ROOT, "..", "shared", "fixtures", "llama-tiny-a", "tokenizer.json")
DEFAULT_DATA = os.path.join(ROOT, "..", "shared", "data", "brown.txt")
DEFAULT_REFERENCE = os.path.join(ROOT, "tests", "tokenizer", "brown_llama_reference.txt")
BLOCK = 8192


def fnv1a64(ids):
    h = 0xCBF29CE484222325
    for i in ids:
        for byte in int(i).to_bytes(4, "little"):
            h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8")


def cmd_reference(args):
    import tokenizers
    tok = Tokenizer.from_file(args.tokenizer)
    ids = tok.encode(read_text(args.data), add_special_tokens=False).ids
    lines = [
        f"# ids of the Brown corpus by Hugging Face tokenizers {tokenizers.__version__}, "
        f"encode(text, add_special_tokens=False)",
        f"# with {os.path.relpath(args.tokenizer, ROOT)}; written by bench/tokenizer/hf_ref.py "
        "reference: the id count, then",
        "# FNV-1a 64 of each block of 8192 ids (little-endian uint32; the last may be shorter).",
        f"count {len(ids)}",
        f"block {BLOCK}",
    ]
    lines += [f"{fnv1a64(ids[i:i + BLOCK]):016x}" for i in range(0, len(ids), BLOCK)]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {args.out}: {len(ids)} ids")


def cmd_bench(args):
    tok = Tokenizer.from_file(args.tokenizer)
    text = read_text(args.file)
    size = len(text.encode("utf-8"))
    lines = text.splitlines(keepends=True)
    if args.lines:
        def work():
            return sum(len(e.ids) for e in tok.encode_batch(lines, add_special_tokens=False))
    else:
        def work():
            return len(tok.encode(text, add_special_tokens=False).ids)
    if not args.no_warmup:
        work()
    rates = []
    for _ in range(args.runs):
        t = time.perf_counter()
        n = work()
        rates.append(size / (time.perf_counter() - t) / 1e6)
    name = "hf encode_batch(lines)" if args.lines else "hf encode"
    if args.raw:
        for r in rates:
            print(f"{name} run: {r:.2f} MB/s ({n} ids)")
    else:
        print(f"{name}: median {statistics.median(rates):.2f} MB/s over {args.runs} runs ({n} ids)")


def cmd_ids(args):
    tok = Tokenizer.from_file(args.tokenizer)
    print(" ".join(map(str, tok.encode(read_text(args.file), add_special_tokens=False).ids)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer", default=DEFAULT_TOKENIZER, help="a tokenizer.json")
    sub = parser.add_subparsers(dest="cmd", required=True)
    ref = sub.add_parser("reference")
    ref.add_argument("--data", default=DEFAULT_DATA)
    ref.add_argument("--out", default=DEFAULT_REFERENCE)
    bench = sub.add_parser("bench")
    bench.add_argument("file")
    bench.add_argument("--runs", type=int, default=7)
    bench.add_argument("--raw", action="store_true")
    bench.add_argument("--lines", action="store_true")
    bench.add_argument("--no-warmup", action="store_true")
    ids = sub.add_parser("ids")
    ids.add_argument("file")
    args = parser.parse_args()
    {"reference": cmd_reference, "bench": cmd_bench, "ids": cmd_ids}[args.cmd](args)


if __name__ == "__main__":
    main()
