#!/bin/sh
# `tern tokenize` end to end: encoding and decoding through stdin and stdout, special tokens,
# --out shards, and one-line errors with exit status 1 for bad input.
# Usage: test_tokenize_cli.sh path/to/tern   (env TERN_SHARED_DIR: the shared data folder)
set -u
TERN=$1
SHARED=${TERN_SHARED_DIR:-../shared}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
unset TERN_TOKENIZER_DIR
failures=0
checks=0

check() { # check NAME CONDITION...
    name=$1
    shift
    checks=$((checks + 1))
    if ! "$@"; then
        echo "FAILED: $name" >&2
        failures=$((failures + 1))
    fi
}

# fails NAME ARGS...: tern exits 1 with one line on stderr, starting "tern: error:", and
# nothing on stdout. stdin comes from $TMP/stdin.
fails() {
    what=$1
    shift
    "$TERN" "$@" <"$TMP/stdin" >"$TMP/out" 2>"$TMP/err"
    status=$?
    check "$what: exit status 1 (got $status)" test "$status" -eq 1
    check "$what: one line on stderr" test "$(wc -l <"$TMP/err")" -eq 1
    check "$what: 'tern: error:'" grep -q '^tern: error: ' "$TMP/err"
    check "$what: nothing on stdout" test ! -s "$TMP/out"
}

# Encoding: the fixture's ids; <|endoftext|> on and off.
check "encode" test "$(printf 'Hello, world!' | "$TERN" tokenize)" = "15496 11 995 0"
check "special" test "$(printf 'hello<|endoftext|>world' | "$TERN" tokenize)" = "31373 50256 6894"
check "no special" test "$(printf 'a<|endoftext|>' | "$TERN" tokenize --no-special)" = \
    "64 27 91 437 1659 5239 91 29"
check "empty input" test "$(printf '' | "$TERN" tokenize)" = ""
check "tokenizer from --model" test \
    "$(printf 'Hello' | "$TERN" tokenize --model "$SHARED/data/gpt2-tokenizer")" = "15496"
# A tokenizer.json (the llama-tiny-a fixture's, with HF's ids from its expected.json): BOS
# first, special tokens matched; --no-special adds none and matches none.
LLAMA=$SHARED/fixtures/llama-tiny-a
check "tokenizer.json from --model" test \
    "$(printf 'Hello, world!' | "$TERN" tokenize --model "$LLAMA")" = "0 477 309 80 13 881 2"
check "tokenizer.json special in text" test \
    "$(printf 'hello<|end_of_text|>world' | "$TERN" tokenize --model "$LLAMA")" = "0 259 309 80 1 88 2784"
check "tokenizer.json --no-special" test \
    "$(printf 'Hello, world!' | "$TERN" tokenize --model "$LLAMA" --no-special)" = "477 309 80 13 881 2"
check "tokenizer.json decode" test \
    "$(echo 0 477 309 80 13 881 2 | "$TERN" tokenize --model "$LLAMA" --decode)" = "<|begin_of_text|>Hello, world!"
check "model dir without tokenizer files" test \
    "$(printf 'Hello' | "$TERN" tokenize --model "$TMP")" = "15496"

# Decoding: exact bytes back, invalid UTF-8 and split characters included.
printf 'caf\303\251 \377\376 \342\202 x\r\n\360\237\230\200 <|endoftext|>' >"$TMP/bytes"
"$TERN" tokenize <"$TMP/bytes" >"$TMP/ids"
check "encode arbitrary bytes" test -s "$TMP/ids"
"$TERN" tokenize --decode <"$TMP/ids" >"$TMP/back"
check "round trip" cmp -s "$TMP/bytes" "$TMP/back"
check "decode, any white space" test "$(printf '15496\n\t11  995 0\n' | "$TERN" tokenize --decode)" = \
    "Hello, world!"

# --out: an llm.c shard (header of 256 int32: magic, version, count; then uint16 ids).
printf 'Hello, world!' | "$TERN" tokenize --out "$TMP/hello.bin" >"$TMP/out"
check "--out status" test $? -eq 0
check "--out message" grep -q "wrote 4 tokens" "$TMP/out"
check "shard size" test "$(wc -c <"$TMP/hello.bin")" -eq $((1024 + 2 * 4))
check "shard header" test "$(od -A n -t d4 -N 12 "$TMP/hello.bin" | tr -s ' ')" = " 20240520 1 4"
check "shard ids" test "$(od -A n -t u2 -j 1024 "$TMP/hello.bin" | tr -s ' ')" = " 15496 11 995 0"
check "no temporary files left" test "$(ls "$TMP" | grep -c tmp)" -eq 0

# Errors.
echo "15496 50257" >"$TMP/stdin"
fails "id past the vocabulary" tokenize --decode
echo "15496 -1" >"$TMP/stdin"
fails "negative id" tokenize --decode
echo "15496 eleven" >"$TMP/stdin"
fails "not an id" tokenize --decode
echo "99999999999999" >"$TMP/stdin"
fails "huge id" tokenize --decode
echo "text" >"$TMP/stdin"
fails "unknown option" tokenize --frobnicate
fails "--model without a value" tokenize --model
fails "--model that does not exist" tokenize --model "$TMP/nowhere"
fails "--out with --decode" tokenize --decode --out "$TMP/x.bin"
fails "--out in a missing folder" tokenize --out "$TMP/nowhere/x.bin"
check "no shard from a failed --out" test ! -e "$TMP/x.bin"
export TERN_TOKENIZER_DIR="$TMP/nowhere"
fails "missing tokenizer files" tokenize
unset TERN_TOKENIZER_DIR
mkdir "$TMP/garbled" "$TMP/half"
printf '{"a": 0' >"$TMP/garbled/vocab.json"
printf '#version: 0.2\n' >"$TMP/garbled/merges.txt"
fails "garbled vocab.json" tokenize --model "$TMP/garbled"
check "garbled vocab.json: names the file" grep -q "garbled/vocab.json: not valid JSON" "$TMP/err"
cp "$SHARED/data/gpt2-tokenizer/vocab.json" "$TMP/garbled/vocab.json"
printf '#version: 0.2\n\304\240 t\nnot-a-token x\n' >"$TMP/garbled/merges.txt"
fails "garbled merges.txt" tokenize --model "$TMP/garbled"
check "garbled merges.txt: names the line" grep -q "merges.txt: line 3" "$TMP/err"
cp "$SHARED/data/gpt2-tokenizer/vocab.json" "$TMP/half/vocab.json"
fails "vocab.json without merges.txt" tokenize --model "$TMP/half"

if [ "$failures" -ne 0 ]; then
    echo "test_tokenize_cli: $failures of $checks checks failed" >&2
    exit 1
fi
echo "test_tokenize_cli: all $checks checks passed"
