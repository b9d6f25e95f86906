#!/usr/bin/env bash
# `tern bench train` and `tern bench generate` on the Llama family (cpu handler, the tiny
# shape, a few steps): the commands run and print their lines in the format the H200 and
# CPU scripts parse (bench/h200, scripts/h200/llama_speed.sh). The figures' values are not
# checked: timings belong to the benchmarks, not the tests. usage: test_bench_llama.sh
# TERN_BINARY   (TERN_SHARED_DIR set by ctest: the fixture llama-tiny-a as a model folder)
set -u
tern=$1
fixture=${TERN_SHARED_DIR:?}/fixtures/llama-tiny-a
export OMP_NUM_THREADS=2 TERN_BACKEND=cpu
failures=0
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
num='[0-9]+(\.[0-9]+)?'
# has OUTPUT REGEX: some line of OUTPUT matches the extended regular expression
has() { echo "$1" | grep -Eq "$2"; }

out=$("$tern" bench train --init llama-tiny --batch 2 --seq 16 --steps 2 --warmup 1 2>&1)
if [ $? -eq 0 ] && has "$out" '^backend: cpu \(' &&
   has "$out" '^model: llama, 2 layers, 4 heads \(2 key/value\), 64 channels, context 128, 354624 parameters; fp32$' &&
   [ "$(echo "$out" | grep -Ec "^step (-1|0|1): $num ms, loss $num$")" = 3 ] &&
   has "$out" "^bench: train cpu fp32 B=2 T=16: median $num ms/step, $num tokens/s, $num TFLOP/s$"; then
    pass "bench train --init llama-tiny prints its steps and summary"
else
    fail "bench train --init llama-tiny printed: $out"
fi

gen_line="^bench: generate cpu %s batch=%s prompt=4: prefill\+first token $num ms, median $num ms/%s \($num tokens/s, $num GB/s of weights; mean $num ms\)$"
out=$("$tern" bench generate --init llama-tiny --prompt-tokens 4 --tokens 8 --warmup 1 2>&1)
if [ $? -eq 0 ] && has "$out" "$(printf "$gen_line" fp32 1 token)"; then
    pass "bench generate --init llama-tiny prints its summary"
else
    fail "bench generate --init llama-tiny printed: $out"
fi

# several steps a section (the handler's replay_steps): the tokens come in bursts, and the
# step's time is the mean
out=$("$tern" bench generate --init llama-tiny --backend cpu:replay_steps=4 --prompt-tokens 4 --tokens 9 --warmup 0 2>&1)
if [ $? -eq 0 ] && has "$out" "^bench: generate cpu fp32 batch=1 prompt=4: prefill\+first token $num ms, in bursts, mean $num ms/token \($num tokens/s, $num GB/s of weights\)$"; then
    pass "bench generate with 4 steps a section reports the mean step"
else
    fail "bench generate --backend cpu:replay_steps=4 printed: $out"
fi

out=$("$tern" bench generate --init llama-tiny --batch 3 --prompt-tokens 4 --tokens 8 --warmup 0 2>&1)
if [ $? -eq 0 ] && has "$out" "$(printf "$gen_line" fp32 3 step)"; then
    pass "bench generate --batch 3 decodes three prompts together"
else
    fail "bench generate --batch 3 printed: $out"
fi
out=$("$tern" bench generate --init tiny --batch 2 --prompt-tokens 4 --tokens 8 --warmup 0 2>&1)
if [ $? -eq 0 ] && has "$out" "^bench: generate cpu fp32 batch=2 prompt=4: .* ms/step"; then
    pass "bench generate --batch 2 on GPT-2 (the same line)"
else
    fail "bench generate --init tiny --batch 2 printed: $out"
fi

# a folder: the family comes from its config.json; bf16 compute
out=$("$tern" bench generate --model "$fixture" --precision bf16 --prompt-tokens 4 --tokens 8 --warmup 0 2>&1)
if [ $? -eq 0 ] && has "$out" '^model: llama, .* bf16$' && has "$out" "$(printf "$gen_line" bf16 1 token)"; then
    pass "bench generate --model (a Llama folder) in bf16"
else
    fail "bench generate --model $fixture printed: $out"
fi
out=$("$tern" bench train --model "$fixture" --precision bf16 --batch 1 --seq 8 --steps 1 --warmup 0 2>&1)
if [ $? -eq 0 ] && has "$out" "^bench: train cpu bf16 B=1 T=8: median $num ms/step"; then
    pass "bench train --model (a Llama folder) in bf16"
else
    fail "bench train --model $fixture printed: $out"
fi

# what the family does not have, and a sequence past its context: one line, exit 1
expect_error() { # name, expected message part, command...
    local name=$1 want=$2
    shift 2
    local got
    got=$("$@" 2>&1)
    local rc=$?
    if [ $rc -eq 1 ] && [ "$(echo "$got" | grep -c '^tern: error: ')" = 1 ] && [[ "$got" == *"$want"* ]]; then
        pass "$name"
    else
        fail "$name: exit $rc, printed: $got"
    fi
}
expect_error "--recompute refused for the Llama family" "--recompute is GPT-2's" \
    "$tern" bench train --init llama-tiny --recompute gelu
expect_error "--logit-rows refused for the Llama family" "--logit-rows is GPT-2's" \
    "$tern" bench train --init llama-tiny --logit-rows 64
expect_error "--seq past the context refused" "exceeds the model's context of 128" \
    "$tern" bench train --init llama-tiny --seq 129
expect_error "generation past the context refused" "" \
    "$tern" bench generate --init llama-tiny --prompt-tokens 100 --tokens 64
expect_error "an unknown shape is one line naming it" "unknown model configuration 'smollm2-1b'" \
    "$tern" bench train --init smollm2-1b

[ $failures -eq 0 ] && echo "all bench checks passed" || echo "$failures bench checks failed"
[ $failures -eq 0 ]
