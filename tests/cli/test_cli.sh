#!/usr/bin/env bash
# The tern program end to end on the cpu handler (and generation on interp, the GPU core):
# generation against the fixture, training and an exact resume, evaluation, and one-line
# errors for bad input. usage: test_cli.sh TERN_BINARY   (TERN_SHARED_DIR set by ctest)
set -u
tern=$1
shared=${TERN_SHARED_DIR:?}
fixture=$shared/fixtures/gpt2-tiny-a
work=$(mktemp -d /tmp/tern-cli-XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=2 TERN_BACKEND=cpu
failures=0
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# A model directory made of the fixture's config and weights.
model=$work/model
mkdir -p "$model"
cp "$fixture/config.json" "$fixture/model.safetensors" "$model/"

# ---- generate: greedy ids equal the fixture's (Hugging Face's) continuation ----
want="257 1178 12 9521 12 9521 12 9521 12 9521 12 9521 12 13500 6037 12"
out=$("$tern" generate --model "$model" --prompt "The capital of France is" --tokens 16 \
      --temperature 0 --ids 2>&1)
if [[ "$(echo "$out" | sed -n 1p)" == "backend: cpu ("*")" ]] && [ "$(echo "$out" | sed -n 2p)" = "$want" ]; then
    pass "generate --ids matches the fixture's greedy continuation"
else
    fail "generate --ids printed: $out"
fi
# the GPU handlers' code path on the DSL's interpreter: the same greedy continuation
out=$("$tern" generate --model "$model" --prompt "The capital of France is" --tokens 16 \
      --temperature 0 --ids --backend interp 2>&1)
if [[ "$(echo "$out" | sed -n 1p)" == "backend: interp ("*")" ]] && [ "$(echo "$out" | sed -n 2p)" = "$want" ]; then
    pass "generate --backend interp (the GPU core on the interpreter) matches the fixture"
else
    fail "generate --backend interp printed: $out"
fi
text=$("$tern" generate --model "$model" --prompt "The capital of France is" --tokens 8 --temperature 0 | sed -n 2p)
[ "$text" = "The capital of France is a few-range-range-range" ] && pass "generate prints the text" ||
    fail "generate text: '$text'"
a=$("$tern" generate --model "$model" --prompt "The jury" --tokens 12 --temperature 0.9 --top-k 50 --seed 7 --ids | sed -n 2p)
b=$("$tern" generate --model "$model" --prompt "The jury" --tokens 12 --temperature 0.9 --top-k 50 --seed 7 --ids | sed -n 2p)
c=$("$tern" generate --model "$model" --prompt "The jury" --tokens 12 --temperature 0.9 --top-k 50 --seed 8 --ids | sed -n 2p)
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" != "$c" ] && pass "sampling is reproducible from its seed" ||
    fail "sampling: seed 7 gave '$a' then '$b'; seed 8 gave '$c'"

# ---- train, resume exactly, eval ----
head -c 200000 "$shared/data/brown.txt" > "$work/train.txt"
tail -c 50000 "$shared/data/brown.txt" > "$work/val.txt"
common=(--data "$work/train.txt" --batch 2 --seq 32 --lr 1e-3 --warmup 1 --schedule cosine --wd 0.1
        --grad-accum 2 --val "$work/val.txt" --val-every 3 --val-batches 2)
"$tern" train --init tiny "${common[@]}" --steps 6 --out "$work/full" > "$work/full.log" 2>&1 ||
    fail "train (6 steps) failed: $(tail -2 "$work/full.log")"
# the interrupted run: the same 6-step schedule, stopped after step 3 (past the warm-up, so
# its learning rates differ from a 3-step run's and a schedule mix-up would show)
"$tern" train --init tiny "${common[@]}" --steps 6 --stop-after 3 --out "$work/part" > "$work/part.log" 2>&1 ||
    fail "train (6 steps, stopped after 3) failed: $(tail -2 "$work/part.log")"
# (resumed recomputing the GELU and layer norms in the backward pass: less memory, the same
# maths, so the same steps)
"$tern" train --resume "$work/part" "${common[@]}" --steps 6 --recompute gelu,layernorm > "$work/resumed.log" 2>&1 ||
    fail "resume failed: $(tail -2 "$work/resumed.log")"
# Everything but the timings must be identical: step, loss, val loss, lr, gradient norm.
strip() { grep '^step' "$1" | sed 's/ | [0-9.]* ms | [0-9]* tok\/s$//'; }
if [ -n "$(strip "$work/full.log")" ] &&
   [ "$(strip "$work/full.log" | tail -3)" = "$(strip "$work/resumed.log")" ]; then
    pass "a resumed run's steps 4-6 (with --recompute) equal the uninterrupted run's exactly"
else
    fail "resume differs:"; strip "$work/full.log" | tail -3; strip "$work/resumed.log"
fi
for f in config.json model.safetensors vocab.json merges.txt optimizer-6.safetensors losses.tsv loss.svg; do
    [ -s "$work/full/$f" ] || fail "checkpoint lacks $f"
done
[ "$(ls "$work/full" | grep -c '^optimizer-')" = 1 ] && pass "one optimizer state is kept" ||
    fail "stale optimizer states: $(ls "$work/full")"
grep -q '<polyline' "$work/full/loss.svg" && [ "$(grep -c . "$work/full/losses.tsv")" = 7 ] &&
    pass "loss history and plot written" || fail "loss history or plot"
"$tern" eval --model "$work/full" --data "$work/val.txt" --batch 2 --seq 32 --batches 3 > "$work/eval.log" 2>&1 &&
    grep -q '^mean loss over 3 batches' "$work/eval.log" && [ "$(grep -c '^batch' "$work/eval.log")" = 3 ] &&
    pass "eval prints each batch and the mean" || fail "eval: $(cat "$work/eval.log")"

# (transformers loading a checkpoint: test_hf_load.sh, a test of its own that ctest shows as
# skipped where torch and transformers are not installed.)
# (Kills at every moment of a checkpoint, signals, locks and odd files: test_train_state.sh.)

# ---- bad input: one line on stderr, 'tern: error: ...', exit status 1 ----
expect_error() { # description, expected text, command...
    local what=$1 needle=$2; shift 2
    local err status
    err=$("$@" 2>&1 >/dev/null); status=$?
    if [ $status -eq 1 ] && [ "$(echo "$err" | wc -l)" -eq 1 ] && [[ "$err" == "tern: error: "*"$needle"* ]]; then
        pass "$what"
    else
        fail "$what: status $status, stderr: $err"
    fi
}
printf 'not a shard' > "$work/garbage.bin"
printf '{"n_layer": 2, "n_head": 3, "n_embd": 64, "n_positions": 128, "vocab_size": 50257}' > "$work/bad-config.json"
mkdir -p "$work/badmodel" && cp "$work/bad-config.json" "$work/badmodel/config.json" && cp "$model/model.safetensors" "$work/badmodel/"
mkdir -p "$work/truncated" && cp "$model/config.json" "$work/truncated/" && head -c 100000 "$model/model.safetensors" > "$work/truncated/model.safetensors"
expect_error "unknown command" "unknown command" "$tern" frobnicate
expect_error "unknown option" "unknown option" "$tern" generate --model "$model" --prompt x --bogus
expect_error "missing --model" "--model" "$tern" generate --prompt x
expect_error "missing option value" "needs a value" "$tern" generate --model "$model" --prompt
expect_error "non-numeric tokens" "not an integer" "$tern" generate --model "$model" --prompt x --tokens ten
expect_error "negative tokens" "out of range" "$tern" generate --model "$model" --prompt x --tokens -3
expect_error "huge top-k" "out of range" "$tern" generate --model "$model" --prompt x --top-k 99999999999
expect_error "negative temperature" "out of range" "$tern" generate --model "$model" --prompt x --temperature -1
expect_error "unknown backend" "unknown backend" "$tern" generate --model "$model" --prompt x --backend tpu
expect_error "unknown handler option" "cpu: options: unknown option 'bogus' (known: replay_steps)" "$tern" generate --model "$model" --prompt x --backend cpu:bogus=1
expect_error "--device on a handler without devices" "unknown option 'device'" "$tern" generate --model "$model" --prompt x --device 1
expect_error "bad handler option value" "interp: options: option 'lnb_rows': 0 is out of range [1, 64]" "$tern" generate --model "$model" --prompt x --backend interp:lnb_rows=0
if "$tern" info | grep -q "^  opencl  built in; device"; then
    expect_error "unknown option in the handler's variable" "opencl: TERN_OPENCL_TUNE: unknown option 'nope'" \
        env TERN_OPENCL_TUNE=nope=1 "$tern" generate --model "$model" --prompt x --backend opencl
fi
expect_error "unknown precision" "precision" "$tern" generate --model "$model" --prompt x --precision fp8
expect_error "missing model dir" "model directory" "$tern" generate --model "$work/nowhere" --prompt x
expect_error "heads not dividing channels" "n_head" "$tern" generate --model "$work/badmodel" --prompt x
expect_error "truncated weights" "model.safetensors" "$tern" generate --model "$work/truncated" --prompt x
expect_error "prompt plus tokens past the context" "context" "$tern" generate --model "$model" --prompt x --tokens 500
expect_error "sequence longer than the context" "context" "$tern" eval --model "$model" --data "$work/val.txt" --seq 4096
expect_error "garbage shard-or-text data" "" "$tern" eval --model "$model" --data /dev/null
expect_error "zero steps" "out of range" "$tern" train --init tiny --data "$work/train.txt" --steps 0
expect_error "unknown init config" "tiniest" "$tern" train --init tiniest --data "$work/train.txt" --steps 1
expect_error "unwritable output" "" "$tern" train --init tiny --data "$work/train.txt" --steps 1 --batch 1 --seq 8 --out /proc/tern-cannot-write
expect_error "resume of nothing" "" "$tern" train --resume "$work/nowhere" --data "$work/train.txt" --steps 1

echo "cli: $failures failures"
[ $failures -eq 0 ]
