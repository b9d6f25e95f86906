#!/usr/bin/env bash
# The session's last H200 call, ordered by what matters most if time runs out: build; the
# tensor-core attention's correctness; the training step against PyTorch; the default model
# (models/brown-mini) trained on Brown; generation against Hugging Face; a per-op profile.
# Everything lands in $OUT (the model split into parts of at most 15 MB, the logs in one
# archive). Run from the repository root with .deb and .fixtures carried
# (scripts/h200/fetch-debs; .fixtures/data/brown-{train,val}.bin from `tern tokenize`).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
logs=$OUT/logs
mkdir -p "$logs"
source scripts/h200/env.sh
summary=$OUT/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
step() { # name, timeout, log, command...
    local name=$1 limit=$2 log=$logs/$3 start=$SECONDS
    shift 3
    if timeout "$limit" "$@" > "$log" 2>&1; then note "ok   $name ($((SECONDS - start)) s)"
    else note "FAIL $name ($((SECONDS - start)) s): $(tail -2 "$log" | tr '\n' ' ' | cut -c1-240)"; fi
}
finish() {
    grep -h -E '^(bench|baseline):|checks (passed|failed)|: loss|within' "$logs"/*.log >> "$summary" 2>/dev/null
    tar czf "$OUT/logs.tgz" -C "$OUT" logs && rm -rf "$logs"
    cat "$summary"
}
trap finish EXIT

b=build-h200
note "gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
start=$SECONDS
if ! { cmake -S . -B $b -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA_HANDLER=ON -DTERN_WITH_OPENCL=OFF &&
       cmake --build $b -j "$(nproc)"; } > "$logs/build.log" 2>&1; then
    note "FAIL build: $(grep -m3 error "$logs/build.log")"
    exit 1
fi
note "ok   build ($((SECONDS - start)) s)"
export TERN_CACHE_DIR=$PWD/$b/kernel-cache TERN_TEST_HANDLER=cuda
train=($b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 6 --warmup 2)

TERN_CUDA_ATTENTION=gemm step "fixture, cuda fp32, gemm attention" 60 fixture-gemm.log $b/tests/gpt2/test_gpt2_fixture
TERN_CUDA_ATTENTION=gemm step "tern train step, gemm attention" 60 tern-train-gemm.log "${train[@]}"
step "pytorch eager train step" 90 pt-train.log python3 bench/h200/pytorch_gpt2.py train

attention=flash
grep -q "all .* checks passed" "$logs/fixture-gemm.log" && attention=gemm
note "default model trained with $attention attention"
TERN_CUDA_ATTENTION=$attention step "train the default model" 150 model-train.log \
    $b/tern train --init mini --data .fixtures/data/brown-train.bin --val .fixtures/data/brown-val.bin \
    --val-every 50 --val-batches 16 --steps 500 --batch 32 --seq 256 --lr 1e-3 --warmup 50 \
    --schedule cosine --wd 0.1 --backend cuda --precision bf16 --save-every 100 --save-dtype bf16 \
    --out "$OUT/model"
if [ -f "$OUT/model/model.safetensors" ]; then
    (cd "$OUT/model" && split -b 15M -d model.safetensors model.safetensors.part- &&
     rm -f model.safetensors optimizer-*.safetensors vocab.json merges.txt)
    mv "$OUT"/model/* "$OUT/" && rmdir "$OUT/model"
fi

step "tern generate, bf16, graphs" 60 tern-gen.log $b/tern bench generate --backend cuda --precision bf16 --tokens 512
step "hf generate" 60 pt-gen.log python3 bench/h200/pytorch_gpt2.py generate --tokens 256
TERN_CUDA_ATTENTION=$attention TERN_CUDA_PROFILE=1 step "profile of a train step" 60 profile.log \
    $b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 1 --warmup 1
