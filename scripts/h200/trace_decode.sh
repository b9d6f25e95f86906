#!/usr/bin/env bash
# A decoded token's kernels on the GPU's own clock (bench/h200/kernel_trace.c, a CUPTI tracer
# injected into tern; no Nsight Systems on these machines), GPT-2 124M bf16 batch 1, with the
# untraced time beside it to show what the tracing costs (TRACE_CONFIGS: gpt2 and Llama
# shapes; TRACE_VARIANTS: TERN_CUDA_TUNE values, each untraced TRACE_ROUNDS times and traced,
# only the token's sums by kernel shown unless default; TRACE_IDS, TRACE_CONFIRM and
# TRACE_PEER below); then (TRACE_TRAIN=1) a 124M
# training step's busy time and kernels by name (TRACE_CONFIGS=" ": no decoding).
#   OUT=$OUT bash scripts/h200/trace_decode.sh          (carry .deb)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start 540
build_targets tern_cli ${TRACE_TESTS:-}
# TRACE_TESTS: test programs run on cuda first, tests/gpu's (test_gpu_gemv, test_gpu_attention)
# or tests/kernel's (test_kernel_pdl)
for t in ${TRACE_TESTS:-}; do
    dir=gpu
    [ "${t#test_kernel_}" != "$t" ] && dir=kernel
    TERN_GPU=cuda TERN_GPU_TEST_RUNTIMES=cuda step "$t on cuda" 300 $t.log $b/tests/$dir/$t
    note "  $(tail -1 "$logs/$t.log")"
done
cupti_h=$(find /usr/local /opt -name cupti.h 2> /dev/null | head -1)
cupti_so=$(find /usr/local /opt -name 'libcupti.so' 2> /dev/null | head -1)
note "cupti: $cupti_h $cupti_so"
step "kernel_trace.c" 60 ktrace-build.log gcc -O2 -shared -fPIC -I"$(dirname "$cupti_h")" \
    -o /tmp/libktrace.so bench/h200/kernel_trace.c -L"$(dirname "$cupti_so")" -lcupti -Wl,-rpath,"$(dirname "$cupti_so")"
# TRACE_IDS=1: `tern generate` of models/brown-mini (fp32, bf16, greedy) under each variant
# gives the default's ids (the variants change where a kernel's operands wait, not its sums)
if [ -n "${TRACE_IDS:-}" ] && [ -f models/brown-mini/model.safetensors ]; then
    for prec in fp32 bf16; do
        args=(generate --model models/brown-mini --prompt "The jury said" --tokens 100 --temperature 0
              --backend cuda --precision "$prec" --ids)
        $b/tern "${args[@]}" > "$logs/ids-$prec.txt" 2> "$logs/ids-$prec.err"
        for tune in ${TRACE_VARIANTS:-}; do
            out=$logs/ids-$prec-${tune//[=,\/]/-}.txt
            TERN_CUDA_TUNE=$tune $b/tern "${args[@]}" > "$out" 2>&1
            if [ -s "$logs/ids-$prec.txt" ] && cmp -s "$logs/ids-$prec.txt" "$out"; then
                note "ok   generate $prec under $tune: the default's ids ($(wc -w < "$out") words)"
            else
                note "FAIL generate $prec under $tune differs: $(head -c 200 "$out" | tr '\n' ' ')"
            fi
        done
    done
fi
gen=($b/tern bench generate --backend cuda --precision bf16 --prompt-tokens 16 --tokens 512 --warmup 2)
for cfg in ${TRACE_CONFIGS:-gpt2}; do
    init=()
    [ "$cfg" != gpt2 ] && init=(--init "$cfg")
    for tune in default ${TRACE_VARIANTS:-}; do
        env=()
        [ "$tune" != default ] && env=("TERN_CUDA_TUNE=$tune")
        tag="$cfg-${tune//[=,\/]/-}"
        for r in $(seq "${TRACE_ROUNDS:-1}"); do
            step "generate $cfg ($tune), untraced" 120 gen-$tag-$r.log env "${env[@]}" "${gen[@]}" "${init[@]}"
            note "  $(grep '^bench:' "$logs/gen-$tag-$r.log" | tail -1 | cut -c1-140)"
        done
        step "generate $cfg ($tune), traced" 120 gen-$tag-traced.log env "${env[@]}" KTRACE_OUT=/tmp/trace-$tag.csv \
            CUDA_INJECTION64_PATH=/tmp/libktrace.so "${gen[@]}" "${init[@]}"
        note "  $(grep '^bench:' "$logs/gen-$tag-traced.log" | tail -1 | cut -c1-140)"
        gzip -c /tmp/trace-$tag.csv > "$OUT/trace-$tag.csv.gz"
        step "trace_sum $cfg ($tune)" 60 sum-$tag.log python3 scripts/h200/trace_sum.py /tmp/trace-$tag.csv 300
        if [ "$tune" = default ] && [ -z "${TRACE_BRIEF:-}" ]; then cat "$logs/sum-$tag.log" >> "$summary"
        else sed -n '/^token on/p;/^adds, by kernel/,$p' "$logs/sum-$tag.log" >> "$summary"; fi
    done
done
# TRACE_CONFIRM=N: the variant with the lowest untraced time (gpt2) against the default, N
# rounds alternated (TRACE_CONFIRM_ALL=1: every variant)
if [ -n "${TRACE_CONFIRM:-}" ] && [ -n "${TRACE_VARIANTS:-}" ]; then
    best="" best_ms=99
    for tune in ${TRACE_VARIANTS}; do
        tag="gpt2-${tune//[=,\/]/-}"
        ms=$(cat "$logs"/gen-$tag-[0-9]*.log 2> /dev/null | grep -o 'mean [0-9.]* ms/token' | awk '{s += $2; n++} END {if (n) printf "%.4f", s / n}')
        [ -n "$ms" ] && awk -v a="$ms" -v b="$best_ms" 'BEGIN {exit !(a < b)}' && best=$tune best_ms=$ms
    done
    note "best variant: $best ($best_ms ms a token, the mean of its rounds)"
    confirm=("$best")
    [ -n "${TRACE_CONFIRM_ALL:-}" ] && confirm=(${TRACE_VARIANTS})  # every variant, not only the best
    for r in $(seq "$TRACE_CONFIRM"); do
        for tune in default "${confirm[@]}"; do
            env=()
            [ "$tune" != default ] && env=("TERN_CUDA_TUNE=$tune")
            step "confirm $tune, round $r" 120 confirm-$r-${tune//[=,\/]/-}.log env "${env[@]}" "${gen[@]}"
            note "  $tune: $(grep '^bench:' "$logs/confirm-$r-${tune//[=,\/]/-}.log" | grep -o 'mean [0-9.]* ms/token ([0-9]* tokens/s')"
        done
    done
fi
# TRACE_PEER=1: the best PyTorch decoder (bench/h200/llama_peers.py fast-pipe), GPT-2 batch 1
if [ -n "${TRACE_PEER:-}" ]; then
    step "peer fast-pipe gpt2 batch 1" 180 peer.log python3 bench/h200/llama_peers.py decode --config gpt2 \
        --impl fast-pipe --batch 1 --prompt 16 --tokens 512
    note "  $(grep '^peer:' "$logs/peer.log" | tail -1)"
fi
if [ -n "${TRACE_TRAIN:-}" ]; then
    # TRACE_TRAIN_ARGS: more arguments (e.g. "--init gpt2-xl" for 1.5B)
    train=($b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 6 ${TRACE_TRAIN_ARGS:-})
    step "train ${TRACE_TRAIN_ARGS:-124M}, untraced" 120 train.log "${train[@]}"
    note "  $(grep '^bench:' "$logs/train.log" | tail -1 | cut -c1-140)"
    step "train ${TRACE_TRAIN_ARGS:-124M}, traced" 120 train-traced.log env KTRACE_OUT=/tmp/trace-train.csv \
        CUDA_INJECTION64_PATH=/tmp/libktrace.so "${train[@]}"
    note "  $(grep '^bench:' "$logs/train-traced.log" | tail -1 | cut -c1-140)"
    gzip -c /tmp/trace-train.csv > "$OUT/trace-train.csv.gz"
    step "trace_sum train" 60 sum-train.log python3 scripts/h200/trace_sum.py --totals 0.25 /tmp/trace-train.csv
    cat "$logs/sum-train.log" >> "$summary"
fi
