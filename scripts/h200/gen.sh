#!/usr/bin/env bash
# Decoding on the H200: tokens/s of `tern bench generate` (bf16, graphs) with the decode
# step's variants, each the cuda handler's options (TERN_CUDA_TUNE): programmatic dependent
# launch off (pdl=0), the GEMV kernels' column threads (gemv_tc), cuBLASLt instead of them
# (gemv=0), and the cached attention's splits (ac_splits). GEN_VARIANTS lists others (a comma
# joins two options: gemv_tc=8,ac_splits=4). GEN_CHECK=1 first runs the fixture on cuda
# (fp32, bf16: its greedy continuations go through the decode kernels); GEN_HF=1 ends with
# Hugging Face generate, for a ratio from the same run.
#   OUT=$OUT bash scripts/h200/gen.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
build_tern
if [ -n "${GEN_CHECK:-}" ]; then
    TERN_TEST_HANDLER=cuda step "fixture, cuda fp32" 120 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
    TERN_TEST_HANDLER=cuda TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 120 fixture-bf16.log \
        $b/tests/gpt2/test_gpt2_fixture
    TERN_GPU_TEST_RUNTIMES=cuda step "gpu core: test_gpu_gemv on cuda" 200 gemv.log $b/tests/gpu/test_gpu_gemv
fi
gen=($b/tern bench generate --backend cuda --precision bf16 --tokens 512 --warmup 2)
for v in ${GEN_VARIANTS:-default pdl=0 gemv_tc=1 gemv_tc=2 gemv_tc=4 gemv_tc=8 ac_splits=1 ac_splits=4 default}; do
    if [ "$v" = default ]; then env=(); else env=("TERN_CUDA_TUNE=$v"); fi
    step "generate, $v" 60 "gen-${v//=/-}.log" env "${env[@]}" "${gen[@]}"
    note "  $(grep '^bench:' "$logs/gen-${v//=/-}.log" | tail -1)"
done
if [ -n "${GEN_HF:-}" ]; then
    step "hf: generate" 240 pt-gen.log python3 bench/h200/pytorch_gpt2.py generate --tokens 128
    grep -h '^baseline:' "$logs/pt-gen.log" >> "$summary"
fi
grep -h -E "checks (passed|failed)" "$logs"/*.log >> "$summary" 2>/dev/null
