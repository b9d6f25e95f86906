#!/bin/sh
# Times tern's tokenizer and tiktoken's single-threaded encode_ordinary on the same file, in
# one run on this machine, in MB/s of input text.
#
#   bench/tokenizer/bench.sh [FILE] [ROUNDS]    (default: ../shared/data/brown.txt, 5 rounds)
#
# First the breakdown of tern's tokenizer (encode with and without its piece cache, the
# pre-tokenizer alone, PCRE2's regex alone, decode). Then the comparison: ROUNDS rounds, each
# timing tern then tiktoken for 3 runs (after a warm-up run), so that a change in the
# machine's load falls on both; each side's figure is the median of all its runs.
#
# bench_tokenizer is compiled here from the tokenizer's sources with the library's Release
# flags (-O3 -march=native), so the benchmark does not wait on the rest of libtern building;
# or set BENCH_TOKENIZER to a bench_tokenizer built elsewhere.
# tiktoken (pip) is built offline from the same vocab.json and merges.txt by tiktoken_ref.py.
#
# Then a tokenizer.json: the llama-tiny-a fixture's (Llama 3's Split regex, ignore_merges),
# tern against Hugging Face tokenizers (pip), single-threaded, encode(text,
# add_special_tokens=False) of the whole file, interleaved the same way (HF_ROUNDS rounds,
# default 3; tern 3 runs a round, HF one, which takes about 10 s on Brown). Each side's
# figure is the median of its runs; the ids are the same (test_tokenizer_hf checks Brown).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
FILE=${1:-$ROOT/../shared/data/brown.txt}
ROUNDS=${2:-5}
TOKENIZER=$ROOT/data/gpt2-tokenizer
HF_TOKENIZER_DIR=$ROOT/../shared/fixtures/llama-tiny-a
HF_ROUNDS=${HF_ROUNDS:-3}
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT

if [ -n "${BENCH_TOKENIZER:-}" ]; then # a bench_tokenizer built elsewhere
    cp "$BENCH_TOKENIZER" "$BUILD/bench_tokenizer"
else
    ${CC:-cc} -std=c11 -O3 -march=native -D_POSIX_C_SOURCE=200809L -I"$ROOT/include" \
        -I"$ROOT/src" "$ROOT"/src/tokenizer/*.c "$ROOT/src/core/error.c" "$HERE/bench_tokenizer.c" \
        $(pkg-config --cflags --libs libcjson libpcre2-8) -lm -o "$BUILD/bench_tokenizer"
fi

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "file: $FILE ($(wc -c <"$FILE") bytes)"
"$BUILD/bench_tokenizer" --tokenizer "$TOKENIZER" --runs 7 "$FILE"
if ! python3 -c "import tiktoken" 2>/dev/null; then
    echo "tiktoken: not installed (pip install tiktoken), no comparison"
else

echo "comparison, $ROUNDS rounds of 3 runs each:"
for round in $(seq "$ROUNDS"); do
    "$BUILD/bench_tokenizer" --tokenizer "$TOKENIZER" --runs 3 --encode-only "$FILE"
    python3 "$HERE/tiktoken_ref.py" --tokenizer "$TOKENIZER" bench "$FILE" --runs 3 --raw
done >"$BUILD/rounds"
# bench_tokenizer's lines give min/median/max of 3 runs; tiktoken_ref.py --raw lists each run.
awk '/^tern encode:/ { gsub(/[(),]/, " "); for (i = 1; i <= NF; i++) {
         if ($i == "median") t[nt++] = $(i + 1); if ($i == "min" || $i == "max") t[nt++] = $(i + 1) } }
     /^tiktoken run:/ { k[nk++] = $3 }
     function median(a, n,   i, j, x) { for (i = 1; i < n; i++) for (j = i; j > 0 && a[j-1] > a[j]; j--) {
         x = a[j]; a[j] = a[j-1]; a[j-1] = x } return n % 2 ? a[(n-1)/2] : (a[n/2-1] + a[n/2]) / 2 }
     END { mt = median(t, nt); mk = median(k, nk)
           printf "tern encode:               median %.2f MB/s over %d runs\n", mt, nt
           printf "tiktoken encode_ordinary:  median %.2f MB/s over %d runs\n", mk, nk
           printf "tern / tiktoken:           %.2fx\n", mt / mk }' "$BUILD/rounds"
fi

echo "tokenizer.json: $HF_TOKENIZER_DIR/tokenizer.json"
if ! python3 -c "import tokenizers" 2>/dev/null; then
    echo "tokenizers: not installed (pip install tokenizers), no comparison"
    exit 0
fi
echo "comparison with Hugging Face tokenizers $(python3 -c 'import tokenizers; print(tokenizers.__version__)'), $HF_ROUNDS rounds:"
for round in $(seq "$HF_ROUNDS"); do
    "$BUILD/bench_tokenizer" --tokenizer "$HF_TOKENIZER_DIR" --runs 3 --encode-only "$FILE"
    python3 "$HERE/hf_ref.py" --tokenizer "$HF_TOKENIZER_DIR/tokenizer.json" bench "$FILE" \
        --runs 1 --raw --no-warmup
done >"$BUILD/hf_rounds"
awk '/^tern encode:/ { gsub(/[(),]/, " "); for (i = 1; i <= NF; i++) {
         if ($i == "median") t[nt++] = $(i + 1); if ($i == "min" || $i == "max") t[nt++] = $(i + 1) } }
     /^hf encode run:/ { k[nk++] = $4 }
     function median(a, n,   i, j, x) { for (i = 1; i < n; i++) for (j = i; j > 0 && a[j-1] > a[j]; j--) {
         x = a[j]; a[j] = a[j-1]; a[j-1] = x } return n % 2 ? a[(n-1)/2] : (a[n/2-1] + a[n/2]) / 2 }
     END { mt = median(t, nt); mk = median(k, nk)
           printf "tern encode (tokenizer.json): median %.2f MB/s over %d runs\n", mt, nt
           printf "HF tokenizers encode:         median %.2f MB/s over %d runs\n", mk, nk
           printf "tern / HF tokenizers:         %.1fx\n", mt / mk }' "$BUILD/hf_rounds"
python3 "$HERE/hf_ref.py" --tokenizer "$HF_TOKENIZER_DIR/tokenizer.json" bench "$FILE" --runs 1 \
    --lines --no-warmup
