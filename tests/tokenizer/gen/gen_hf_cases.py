#!/usr/bin/env python3
"""Writes tests/tokenizer/hf_cases.json: small tokenizer.json files of every kind tern reads,
built and serialized by Hugging Face `tokenizers`, with the ids HF gives for many hard texts.
test_tokenizer_hf.c loads each tokenizer and compares tern's ids with these exactly. Also
writes tests/tokenizer/gpt2_tokenizer_skeleton.json: HF's tokenizer.json for GPT-2 built from
../shared/data/gpt2-tokenizer, with its vocab and merges emptied (the test puts the files'
back in; the whole file would be 2 MB).

One byte-level BPE model (about 400 tokens) is trained here on the start of the Brown corpus
plus a few lines of other scripts; each tokenizer is that model with another pipeline:
ByteLevel (use_regex true/false, add_prefix_space), Split (Llama 3's and Qwen2's patterns,
every behaviour, invert, a String pattern), Digits, Sequence, the NFC normalizer,
TemplateProcessing (BOS, BOS+EOS), ignore_merges, added tokens with lstrip, rstrip,
normalized and special. For each text three encodings are recorded:
  ids          encode(text, add_special_tokens=False): special tokens in the text matched
  ids_default  encode(text): the post-processor's tokens too (AutoTokenizer's default)
  ids_plain    the same as ids with encode_special_tokens = True (special tokens as text)
(ids_default is left out where it is the tokenizer's "prefix" + ids + "suffix", HF's
ids_default of the empty text; ids_plain where it equals ids).

Usage (pip install tokenizers; nothing is downloaded):
  python3 tests/tokenizer/gen/gen_hf_cases.py
"""
import json
import os
import random
import unicodedata

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
ROOT = os.path.dirname(os.path.dirname(TESTS))
SHARED = os.path.join(ROOT, "..", "shared")

LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
          r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
         r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
GPT2 = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"

HARD_TEXTS = [
    "", " ", "   ", "\t", "\n", "\r\n", "a", "Hello, world!", "Hello world  ",
    "  leading and trailing  ", "tabs\tand\t\ttabs", "lines\n\nand\r\n\r\nmore\n",
    "   spaces before a word", "x \n y", " \n\n word", "end with spaces   ", "word\u00a0nbsp",
    "ideographic\u3000space", "line\u2028separator", "zero\u200bwidth", "\u0085next line",
    "don't you're I'll we've they'd DON'T YOU'RE I'LL", "'s 't 're 've 'm 'll 'd", "'S'T'RE",
    "ok'\u017f long s, '\u212a kelvin", "it's 1990's", "O'Neil's 2nd-best idea?!",
    "12345", "1234567890123", "3.14159 1,000,000", "x123456712345671234567",
    "\u0661\u0662\u0663 arabic-indic", "\u00b2\u00b3 superscripts \u00bd", "\u216b roman", "\uff11\uff12 fullwidth",
    "caf\u00e9 na\u00efve", "cafe\u0301 decomposed", "e\u0301\u0323 \u1e0b\u0323 reorder",
    "\u1100\u1161\u11a8 jamo", "\ud55c\uad6d\uc5b4", "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645", "\u0928\u092e\u0938\u094d\u0924\u0947",
    "\u0417\u0434\u0440\u0430\u0432\u0441\u0442\u0432\u0443\u0439, \u043c\u0438\u0440", "\u03b1\u03b2\u03b3 \u0391\u0392\u0393",
    "\U0001f600 \U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f1eb\U0001f1f7", "\U0001d400\U0001d401 math",
    "\ufffd\ufffd replacement", b"\xff\xfe bad".decode("utf-8", "replace"),
    b"\xed\xa0\x80 surrogate bytes".decode("utf-8", "replace"), b"\xc0\xaf latin".decode("latin-1"),
    "\u00ff\u00ff\u0100 zero", "\x01\x02\x7f controls", "<|endoftext|>", "a<|endoftext|>b",
    "<|endoftext|><|endoftext|>", "<|endoftext|", "<|begin_of_text|>hi<|end_of_text|>",
    " <|end_of_text|> ", "<|im_start|>user\nhi<|im_end|>", "x <mask> y", "x<mask>y",
    "  <mask>  ", "[R]   after", "before [R]", "a [R] [R]b", "hello world hello worldly",
    "cafe\u0301 au lait", "caf\u00e9 au lait", "<mask><mask>", "--- *** !!! ???", "a" * 100,
    " " * 70 + "x", "\n" * 20, "ab" * 40 + " end", "http://example.com/path?q=1&r=2",
    "def f(x):\n    return x ** 2  # comment\n", "\u00c5ngstr\u00f6m \u212bngstr\u00f6m",
]

PIECES = ["the", " ", "  ", "\n", "\t", "'s", "'LL", "42", "1234", "\u0663", "\u00e9", "e\u0301",
          "\u65e5\u672c", "\U0001f600", ",", ".", "!?", "\u00a0", "\u3000", "<mask>", "[R]",
          "<|endoftext|>", "<|end_of_text|>", "Hello", "WORLD", "na\u00efve", "\r\n", "\u0301",
          "\ud55c", "\u1100\u1161", "x", "_", "--", "\u0085"]


def random_texts(rng, n):
    out = []
    for _ in range(n):
        k = rng.randint(1, 10)
        out.append("".join(rng.choice(PIECES) for _ in range(k)))
    return out


def training_lines():
    with open(os.path.join(SHARED, "data", "brown.txt"), encoding="utf-8") as f:
        text = f.read(200_000)
    extra = ["caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber", "\u65e5\u672c\u8a9e \u65e5\u672c",
             "\u0417\u0434\u0440\u0430\u0432\u0441\u0442\u0432\u0443\u0439 \u043c\u0438\u0440",
             "12 123 1234 2024", "don't it's we'll"] * 50
    return text.splitlines() + extra


def train_model():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=420, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_lines(), trainer)
    return json.loads(tok.to_str())["model"]


def split(pattern, behavior="isolated", invert=False, string=False):
    pat = pattern if string else Regex(pattern)
    return pre_tokenizers.Split(pat, behavior=behavior, invert=invert)


def byte_level(prefix=False, regex=True):
    return pre_tokenizers.ByteLevel(add_prefix_space=prefix, use_regex=regex)


BOS = "<|begin_of_text|>"
EOS = "<|end_of_text|>"


def configs():
    """name -> (pre_tokenizer, normalizer, post_processor, ignore_merges, added tokens)."""
    bos_only = ("bos", None)
    bos_eos = ("bos", "eos")
    specials = [AddedToken(BOS, special=True, normalized=False),
                AddedToken(EOS, special=True, normalized=False)]
    gpt2_special = [AddedToken("<|endoftext|>", special=True, normalized=False)]
    flags = [AddedToken("<mask>", special=True, lstrip=True, normalized=False),
             AddedToken("[R]", special=False, rstrip=True, normalized=False),
             AddedToken("hello world", special=False, normalized=True),
             AddedToken("cafe\u0301", special=False, normalized=True),
             AddedToken("<|im_start|>", special=True, normalized=False),
             AddedToken("<|im_end|>", special=True, normalized=False)]
    return {
        "gpt2_bytelevel": (byte_level(), None, "bytelevel", False, gpt2_special),
        "bytelevel_prefix_space": (byte_level(prefix=True), None, None, False, gpt2_special),
        "bytelevel_no_regex": (byte_level(regex=False), None, None, False, gpt2_special),
        "bytelevel_prefix_no_regex": (byte_level(prefix=True, regex=False), None, None, True, []),
        "llama3": (pre_tokenizers.Sequence([split(LLAMA3), byte_level(regex=False)]), None,
                   bos_only, True, specials),
        "llama3_merges": (pre_tokenizers.Sequence([split(LLAMA3), byte_level(regex=False)]),
                          None, bos_eos, False, specials),
        "qwen2_nfc": (pre_tokenizers.Sequence([split(QWEN2), byte_level(regex=False)]),
                      normalizers.NFC(), "bytelevel", False, flags),
        "smollm2_digits": (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                    byte_level()]), None, None, False, flags),
        "digits_runs": (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=False),
                                                 byte_level(prefix=True)]), None, None, False, []),
        "split_gpt2_pattern": (pre_tokenizers.Sequence([split(GPT2), byte_level(regex=False)]),
                               normalizers.Sequence([normalizers.NFC()]), None, False, specials),
        "split_removed_invert": (pre_tokenizers.Sequence([
            split(r"\s+", "removed"), split(r"[aeiou]", "isolated", invert=True),
            byte_level(regex=False)]), None, None, False, flags),
        "split_merged": (pre_tokenizers.Sequence([
            split(r"[.,!?]", "merged_with_previous"), split(" ", "merged_with_next", string=True),
            split(r"\p{N}", "contiguous"), byte_level(regex=False)]), None, None, False, []),
        "split_merged_invert": (pre_tokenizers.Sequence([
            split(r"\p{L}+", "merged_with_previous", invert=True),
            split(r"\d", "merged_with_next", invert=True), byte_level(regex=False)]),
            None, None, False, []),
        "split_empty_matches": (pre_tokenizers.Sequence([split(r"x*", "isolated"),
                                                         byte_level(regex=False)]),
                                None, None, False, []),
    }


def build(model, name, cfg):
    pre, norm, post, ignore_merges, added = cfg
    m = dict(model, ignore_merges=ignore_merges)
    tok = Tokenizer.from_str(json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [],
        "normalizer": None, "pre_tokenizer": None, "post_processor": None,
        "decoder": None, "model": m}))
    tok.pre_tokenizer = pre
    if norm is not None:
        tok.normalizer = norm
    tok.decoder = decoders.ByteLevel()
    special = [t for t in added if t.special]
    tok.add_special_tokens(special)
    tok.add_tokens([t for t in added if not t.special])
    if post == "bytelevel":
        tok.post_processor = processors.ByteLevel(trim_offsets=True)
    elif post is not None:
        bos_id, eos_id = tok.token_to_id(BOS), tok.token_to_id(EOS)
        single = f"{BOS}:0 $A:0" + (f" {EOS}:0" if post[1] else "")
        toks = [(BOS, bos_id)] + ([(EOS, eos_id)] if post[1] else [])
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=single, pair=f"{single} $B:1", special_tokens=toks)])
    return tok


def check_nfc_tables():
    """HF's NFC of each code point alone against Python's unicodedata (gen_nfc_tables.py)."""
    nfc = normalizers.NFC()
    cps = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000 and c != 10]
    got = nfc.normalize_str("\n".join(map(chr, cps))).split("\n")
    bad = [c for c, g in zip(cps, got) if g != unicodedata.normalize("NFC", chr(c))]
    print(f"NFC: HF and unicodedata {unicodedata.unidata_version} differ on {len(bad)} code points")


def gpt2_skeleton():
    d = os.path.join(SHARED, "data", "gpt2-tokenizer")
    bpe = models.BPE.from_file(os.path.join(d, "vocab.json"), os.path.join(d, "merges.txt"))
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=False)])
    j = json.loads(tok.to_str())
    with open(os.path.join(d, "vocab.json"), encoding="utf-8") as f:
        assert j["model"]["vocab"] == json.load(f), "HF changed GPT-2's vocabulary"
    j["model"]["vocab"] = {}
    j["model"]["merges"] = []
    path = os.path.join(TESTS, "gpt2_tokenizer_skeleton.json")
    with open(path, "w") as f:
        json.dump(j, f, indent=1)
        f.write("\n")
    print(f"wrote {path}")


def main():
    rng = random.Random(21)
    model = train_model()
    texts = HARD_TEXTS + random_texts(rng, 24)
    out = {"generator": f"tests/tokenizer/gen/gen_hf_cases.py, tokenizers {tokenizers.__version__}",
           "texts": texts, "model": model, "tokenizers": []}
    for name, cfg in configs().items():
        tok = build(model, name, cfg)
        j = json.loads(tok.to_str())
        # the shared model, put back by the test: only ignore_merges differs
        j["model"] = {"ignore_merges": j["model"]["ignore_merges"]}
        # What the post-processor puts around every text: HF's ids for the empty text.
        around = tok.encode("").ids
        prefix = around[:1] if around and around[0] == tok.token_to_id(BOS) else []
        results = []
        for t in texts:
            tok.encode_special_tokens = False
            ids = tok.encode(t, add_special_tokens=False).ids
            default = tok.encode(t).ids
            tok.encode_special_tokens = True
            plain = tok.encode(t, add_special_tokens=False).ids
            # to keep the file small, ids_default only where it is not prefix + ids + suffix,
            # ids_plain only where it is not ids
            r = {"ids": ids}
            if default != around[:len(prefix)] + ids + around[len(prefix):]:
                r["ids_default"] = default
            if plain != ids:
                r["ids_plain"] = plain
            results.append(r)
        out["tokenizers"].append({"name": name, "tokenizer": j, "prefix": prefix,
                                  "suffix": around[len(prefix):], "results": results})
    path = os.path.join(TESTS, "hf_cases.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"), ensure_ascii=True)
        f.write("\n")
    print(f"wrote {path}: {len(out['tokenizers'])} tokenizers x {len(texts)} texts, "
          f"{os.path.getsize(path)} bytes")
    gpt2_skeleton()
    check_nfc_tables()


if __name__ == "__main__":
    main()
