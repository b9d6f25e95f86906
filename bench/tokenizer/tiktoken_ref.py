#!/usr/bin/env python3
"""tiktoken as the reference GPT-2 tokenizer, built offline from vocab.json and merges.txt.

  tiktoken_ref.py reference [--data brown.txt] [--out tests/tokenizer/brown_reference.txt]
      encodes the corpus with encode_ordinary and writes its id count and block hashes, which
      tests/tokenizer/test_tokenizer_brown.c compares against (CI has no tiktoken).
  tiktoken_ref.py cases [--out tests/tokenizer/extra_cases.json]
      writes texts aimed at the pre-tokenization rule (white space, contractions, scripts,
      Unicode spaces and numbers, long runs) with tiktoken's ids, for test_tokenizer_fixture.
  tiktoken_ref.py compare TERN [--texts N]
      encodes N random texts of about 500 KB (code points from every plane mixed with white
      space, contractions, scripts and numbers) with `TERN tokenize --no-special` and with
      tiktoken, and reports the first differing id of any that differ.
  tiktoken_ref.py ids FILE          prints FILE's ids, space-separated (encode_ordinary)
  tiktoken_ref.py bench FILE [--runs N] [--raw]
      times encode_ordinary on FILE, single-threaded; prints the median MB/s (--raw: each
      run's).

The Encoding: mergeable_ranks maps each token's bytes (vocab.json's keys, decoded through
GPT-2's byte alphabet) to its id, which for GPT-2 is its BPE rank (checked against merges.txt:
the token made by merge k has id 256 + k); <|endoftext|> is the one special token; pat_str is
GPT-2's pre-tokenization regex. Nothing is downloaded.
"""
import argparse
import json
import os
import statistics
import struct
import sys
import time

import tiktoken

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_TOKENIZER = os.path.join(ROOT, "data", "gpt2-tokenizer")
DEFAULT_DATA = os.path.join(ROOT, "..", "shared", "data", "brown.txt")
DEFAULT_REFERENCE = os.path.join(ROOT, "tests", "tokenizer", "brown_reference.txt")
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
BLOCK = 8192  # ids per hashed block


def byte_alphabet():
    """GPT-2's printable spelling of each byte: char -> byte."""
    self = [b for b in range(256) if 0x21 <= b <= 0x7E or 0xA1 <= b <= 0xAC or b >= 0xAE]
    others = [b for b in range(256) if b not in self]
    spelled = {chr(b): b for b in self}
    spelled.update({chr(0x100 + k): b for k, b in enumerate(others)})
    return spelled


def build_encoding(tokenizer_dir):
    alphabet = byte_alphabet()
    with open(os.path.join(tokenizer_dir, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    special = {"<|endoftext|>": vocab.pop("<|endoftext|>")}
    ranks = {bytes(alphabet[ch] for ch in token): i for token, i in vocab.items()}
    with open(os.path.join(tokenizer_dir, "merges.txt"), encoding="utf-8") as f:
        rules = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#version")]
    for k, rule in enumerate(rules):
        left, right = rule.split(" ")
        if vocab[left + right] != 256 + k:
            sys.exit(f"merges.txt line {k + 2}: the token's id is not 256 + its rank")
    return tiktoken.Encoding(name="gpt2-local", pat_str=GPT2_PATTERN, mergeable_ranks=ranks,
                             special_tokens=special)


def fnv1a64(ids):
    """FNV-1a (64-bit) over the ids as little-endian uint32."""
    h = 0xCBF29CE484222325
    for byte in struct.pack(f"<{len(ids)}I", *ids):
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def cmd_reference(args):
    enc = build_encoding(args.tokenizer)
    with open(args.data, encoding="utf-8") as f:
        text = f.read()
    ids = enc.encode_ordinary(text)
    lines = [
        "# GPT-2 ids of the Brown corpus (../shared/data/brown.txt) by tiktoken "
        f"{tiktoken.__version__}'s encode_ordinary,",
        "# written by bench/tokenizer/tiktoken_ref.py reference: the id count, then FNV-1a 64 of",
        f"# each block of {BLOCK} ids (little-endian uint32; the last block may be shorter).",
        f"count {len(ids)}",
        f"block {BLOCK}",
    ]
    lines += [f"{fnv1a64(ids[i:i + BLOCK]):016x}" for i in range(0, len(ids), BLOCK)]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(ids)} ids, {(len(ids) + BLOCK - 1) // BLOCK} blocks -> {args.out}")


# Texts for `cases`: each aims at one corner of the pre-tokenization rule or the BPE.
CASES = [
    # white space: runs, the space kept for the next word, other white-space characters
    "a\n\n\nb", "x  \ty", "end\n  ", "  \n", "\t\tword", " \t word", "a \n b", "\r\n\r\n",
    "word   ", "\n" * 70 + "x", "a\u00a0b", "a\u3000b", "\u3000\u3000word", "a\u2028b",
    "a\u0085b", "x \u3000 y", "a\u200bb", "a\u180eb", "a\x1cb\x1fc", "\x01\x02\x7f",
    # contractions: only these, lower case, ASCII apostrophe
    "'s 't 're 've 'm 'll 'd", "'S 'T 'RE 'Ll", "''s", "'ll've'd", "x'sy", "'", "'r", "l'",
    " 's", "!'s", "it\u2019s", "rock 'n' roll",
    # numbers: Nd, Nl, No, and their runs
    "2024-01-01", "x1y2z3", " 123abc", "\u0661\u0662\u0663 \u0664\u0665",
    "\u216b \u2177", "\u00b2\u00b3 \u00bd", "\U0001d7d8\U0001d7d9", "3.14e-10",
    # letters of many scripts; combining marks are not letters
    "na\u00efve caf\u00e9", "e\u0301t\u0301e", "\u65e5\u672c\u8a9e\u306e\u6587\u7ae0",
    "\ud55c\uad6d\uc5b4", "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",
    "\u0420\u0443\u0441\u0441\u043a\u0438\u0439 \u0442\u0435\u043a\u0441\u0442",
    "\u05e2\u05d1\u05e8\u05d9\u05ea", "\u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    "\u0939\u093f\u0928\u094d\u0926\u0940", "\u0e44\u0e17\u0e22",
    "\u1c89\u1c8a x", "\U00010570\U00010571", "\U00010d50\U00010d40 y",
    # symbols and emoji
    "$$$ 100%", "(a+b)*c", "...", "--flag=value", "C++ & C#", "\U0001f44d\U0001f3fd ok",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f1eb\U0001f1f7",
    # special tokens among text
    "<|endoftext|>x<|endoftext|>", "<|endoftext|", " <|endoftext|> ",
    # words and long pieces (the BPE's heap path starts past 64 bytes)
    "CamelCaseWord ALLCAPS snake_case_name", "a" * 200, "abcdefghij" * 20, " " + "x" * 100,
    "\u00e9" * 50, "!" * 90,
]


def cmd_cases(args):
    enc = build_encoding(args.tokenizer)
    cases = [{"text": t, "ids": enc.encode(t, allowed_special="all")} for t in CASES]
    with open(args.out, "w", encoding="utf-8") as f:  # one case a line
        f.write("[\n" + ",\n".join(json.dumps(c, ensure_ascii=True) for c in cases) + "\n]\n")
    print(f"{len(cases)} cases -> {args.out}")


COMPARE_FRAGMENTS = [
    " ", "  ", "\t", "\n", "\r\n", "\n\n", "\x0b", "\x0c", "\x1c", "\x85", "\xa0", "\u3000",
    "\u2028", "\u180e", "\u200b", "a", "Z", "word", " the", "0", "42", " 7", "'", "'s", "'t",
    "'re", "'ve", "'m", "'ll", "'d", "'S", "!", "?!", ".", ",", "-", "\u0301", "\u00e9",
    "\u65e5\u672c", "\u0663", "\u216b", "\u00bd", "\U0001f600", "\u1c89", "\U00010d40",
]


def random_text(rng, parts):
    def code_point():
        while True:
            top = rng.choice([0x7F, 0x7FF, 0xFFFF, 0x10FFFF])
            c = rng.randint(1, top)
            if not 0xD800 <= c < 0xE000:
                return chr(c)
    return "".join(rng.choice(COMPARE_FRAGMENTS) if rng.random() < 0.6 else code_point()
                   for _ in range(parts))


def cmd_compare(args):
    import random
    import subprocess
    enc = build_encoding(args.tokenizer)
    bad = 0
    for seed in range(args.texts):
        text = random_text(random.Random(seed), 200000)
        want = enc.encode_ordinary(text)
        out = subprocess.run([args.tern, "tokenize", "--no-special", "--model", args.tokenizer],
                             input=text.encode("utf-8"), capture_output=True, check=True).stdout
        got = [int(x) for x in out.split()]
        if got == want:
            print(f"text {seed}: {len(text.encode('utf-8'))} bytes, {len(want)} ids, identical")
            continue
        bad += 1
        i = next((k for k, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
        print(f"text {seed}: differs at id {i}: tiktoken {want[i:i + 5]}, tern {got[i:i + 5]}, "
              f"near {enc.decode(want[max(0, i - 5):i + 5])!r}")
    sys.exit(1 if bad else 0)


def cmd_ids(args):
    enc = build_encoding(args.tokenizer)
    with open(args.file, encoding="utf-8") as f:
        print(" ".join(map(str, enc.encode_ordinary(f.read()))))


def cmd_bench(args):
    enc = build_encoding(args.tokenizer)
    with open(args.file, encoding="utf-8") as f:
        text = f.read()
    size = len(text.encode("utf-8"))
    enc.encode_ordinary(text)  # warm up
    rates = []
    for _ in range(args.runs):
        start = time.perf_counter()
        ids = enc.encode_ordinary(text)
        rates.append(size / (time.perf_counter() - start) / 1e6)
    if args.raw:
        for rate in rates:
            print(f"tiktoken run: {rate:.2f} MB/s")
        return
    print(f"tiktoken {tiktoken.__version__} encode_ordinary: {size} bytes -> {len(ids)} ids, "
          f"median {statistics.median(rates):.2f} MB/s over {args.runs} runs "
          f"(min {min(rates):.2f}, max {max(rates):.2f})")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tokenizer", default=DEFAULT_TOKENIZER,
                        help="folder with vocab.json and merges.txt")
    sub = parser.add_subparsers(dest="command", required=True)
    ref = sub.add_parser("reference")
    ref.add_argument("--data", default=DEFAULT_DATA)
    ref.add_argument("--out", default=DEFAULT_REFERENCE)
    ref.set_defaults(run=cmd_reference)
    cases = sub.add_parser("cases")
    cases.add_argument("--out", default=os.path.join(ROOT, "tests", "tokenizer",
                                                     "extra_cases.json"))
    cases.set_defaults(run=cmd_cases)
    compare = sub.add_parser("compare")
    compare.add_argument("tern", help="the tern program")
    compare.add_argument("--texts", type=int, default=4)
    compare.set_defaults(run=cmd_compare)
    ids = sub.add_parser("ids")
    ids.add_argument("file")
    ids.set_defaults(run=cmd_ids)
    bench = sub.add_parser("bench")
    bench.add_argument("file")
    bench.add_argument("--runs", type=int, default=7)
    bench.add_argument("--raw", action="store_true", help="print each run's MB/s")
    bench.set_defaults(run=cmd_bench)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
