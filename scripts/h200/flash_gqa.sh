#!/usr/bin/env bash
# Grouped key/value heads on cuda's tensor-core flash kernels (issue 22, item 6's
# prerequisite). Correctness: the flash kernels themselves on the GPU at SmolLM2-135M's and
# Llama-3.2-1B's heads against the float64 reference (test_flash_kernels with TERN_GPU=cuda),
# the cuda handler's Llama checks (llama-tiny-a bf16 gradients go through the grouped flash
# kernels at hs 16; the two references of tests/llama/refs), cuda against cpu at the
# SmolLM2-135M shape, the GPU core's grouped kernels and the op suites on cuda, and GPT-2
# (whose kernels are byte-identical to before: it must pass unchanged). Speed: the bf16
# training step at SmolLM2-135M (B=16, T=1024) and Llama-3.2-1B (B=4, T=1024) with the
# grouped heads on the flash kernels (A, the default) and on the GPU core's kernels (B,
# TERN_CUDA_TUNE=flash_grouped=0, a key deleted after run 66 measured it: the speed part now needs
# the tree of 2771174), alternated in one call, then one profiled step of each
# (per-operation times, graphs off). PART=check or PART=speed runs one half (each fits one
# 10-minute call; the second call reuses the first's build).
#   OUT=$OUT PART=check bash scripts/h200/flash_gqa.sh          (carry .deb .fixtures)
#   OUT=$OUT PART=speed bash scripts/h200/flash_gqa.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader)"
build_tern
PART=${PART:-all}
if [ "$PART" != speed ]; then
TERN_GPU=cuda step "flash kernels on cuda (SmolLM2, Llama-3.2-1B, GPT-2 heads)" 300 flash-kernels.log \
    $b/tests/attention_kernels/test_flash_kernels
TERN_GPU_TEST_RUNTIMES=cuda step "gpu core: test_gpu_gqa on cuda" 300 gpu-gqa.log $b/tests/gpu/test_gpu_gqa
export TERN_TEST_HANDLER=cuda
for t in llama attention; do
    step "ops: test_ops_$t on cuda" 300 ops-$t.log $b/tests/ops/test_ops_$t
done
step "llama: llama-tiny-a on cuda (both head layouts)" 300 llama-model.log $b/tests/llama/test_llama_model "" cuda both
for ref in qwen2-tiny-b llama3-tiny-c; do
    step "llama: $ref on cuda" 300 llama-$ref.log $b/tests/llama/test_llama_model tests/llama/refs/$ref cuda gqa
done
TERN_CROSS_CONFIG=smollm2-135m TERN_CROSS_B=2 TERN_CROSS_T=512 \
    step "llama: cuda against cpu, SmolLM2-135M, B x T = 2x512" 600 llama-cross.log $b/tests/llama/test_llama_cross
step "fixture, cuda bf16" 120 fixture-bf16.log env TERN_TEST_PRECISION=bf16 $b/tests/gpt2/test_gpt2_fixture
TERN_CROSS_CONFIG=gpt2 TERN_CROSS_B=2 TERN_CROSS_T=512 \
    step "cuda against cpu, GPT-2 124M, B x T = 2x512" 240 cross-2x512.log $b/tests/gpt2/test_cross_handler
unset TERN_TEST_HANDLER
grep -h -E 'checks (passed|failed)|check failed' "$logs"/*.log | head -60 >> "$summary" 2>/dev/null
fi
[ "$PART" = check ] && exit 0

# Training data: random tokens below SmolLM2's and Llama 3's vocabularies (49152, 128256 are
# both above it) in llm.c's shard layout (speed does not depend on them).
data=$b/random-llama.bin
python3 - "$data" <<'EOF'
import random, struct, sys
n = 1 << 20
rng = random.Random(1)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, n, *([0] * 253)))
    f.write(struct.pack("<%dH" % n, *(rng.randrange(49152) for _ in range(n))))
EOF
# The mean step time of steps 4..N (the first three compile kernels, tune products and
# record graphs).
mean_ms() { sed -n 's/^step \([0-9]*\)\/[0-9]* |.*| \([0-9.]*\) ms |.*/\1 \2/p' "$1" |
    awk '$1 > 3 {s += $2; n++} END {if (n) printf "%.2f ms (mean of %d steps)", s / n, n; else print "no steps"}'; }
for cfg in "smollm2-135m 16" "llama-3.2-1b 4"; do
    set -- $cfg
    train=($b/tern train --init "$1" --data "$data" --batch "$2" --seq 1024 --backend cuda --precision bf16)
    for r in $(seq 1 "${AB_ROUNDS:-2}"); do
        for side in 1 0; do
            step "train $1 B=$2 T=1024, flash_grouped=$side, round $r" 150 "train-$1-$side-$r.log" \
                env TERN_CUDA_TUNE=flash_grouped=$side "${train[@]}" --steps 12
            note "  flash_grouped=$side: $(mean_ms "$logs/train-$1-$side-$r.log")"
        done
    done
    for side in 1 0; do
        step "profile $1 flash_grouped=$side" 150 "prof-$1-$side.log" \
            env TERN_CUDA_TUNE=flash_grouped=$side,profile=1,graphs=0 "${train[@]}" --steps 3
        note "  flash_grouped=$side: $(grep -E '^ *attention' "$logs/prof-$1-$side.log" | tr -s ' ' | tr '\n' ';')"
    done
done
