#!/usr/bin/env bash
# A short call after merges: the cuda checks of the merged tree (the GPT-2 fixture fp32 and
# bf16 with its AdamW steps, the Llama fixture, `tern train` on the Llama fixture stopped and
# resumed), then batch-1 bf16 decoding at DECODE_CONFIG (llama-3.2-1b) against the
# hand-written CUDA-graph peer (bench/h200/llama_peers.py fast-graph), same call, with this
# tree's DECODE_VARIANTS (cuda options, TERN_CUDA_TUNE values) after it.
#   OUT=$OUT bash scripts/h200/merge_decode.sh          (carry .deb .fixtures)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
build_targets tern_cli test_llama_model test_gpt2_fixture
TERN_TEST_HANDLER=cuda step "fixture, cuda fp32" 120 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
TERN_TEST_HANDLER=cuda TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 120 fixture-bf16.log \
    $b/tests/gpt2/test_gpt2_fixture
TERN_TEST_HANDLER=cuda step "llama: llama-tiny-a on cuda (both head layouts)" 300 llama-model.log \
    $b/tests/llama/test_llama_model "" cuda both
check_llama_resume
grep -h -E 'checks (passed|failed)|check failed' "$logs"/*.log | head -20 >> "$summary" 2>/dev/null
cfg=${DECODE_CONFIG:-llama-3.2-1b}
gen=($b/tern bench generate --backend cuda --precision bf16 --prompt-tokens 16 --tokens 512 --warmup 2 --init "$cfg")
step "tern generate $cfg" 90 gen-default.log "${gen[@]}"
note "  tern: $(grep '^bench:' "$logs/gen-default.log" | tail -1)"
step "peer decode $cfg (fast-graph)" 120 peer.log \
    python3 bench/h200/llama_peers.py decode --config "$cfg" --impl fast-graph --batch 1 --prompt 16 --tokens 512
note "  $(grep '^peer:' "$logs/peer.log" | tail -1 | cut -c1-200)"
for v in ${DECODE_VARIANTS:-}; do
    step "tern generate $cfg, $v" 90 "gen-${v//[=,]/-}.log" env "TERN_CUDA_TUNE=$v" "${gen[@]}"
    note "  tern $v: $(grep '^bench:' "$logs/gen-${v//[=,]/-}.log" | tail -1)"
done
