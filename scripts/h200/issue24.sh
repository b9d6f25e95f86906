#!/usr/bin/env bash
# Issue 24's "done when": its four items measured in one H200 call, with the checks passing
# in the same call. In order, each step skipped with a note once the call's time is spent
# (CALL_SECONDS, 570):
#   checks on cuda: the GPT-2 fixture in fp32 and bf16 (bf16: the layer norms recomputed
#     bit for bit too), cuda against cpu at 124M (B x T = 2 x 512), test_ops_attention;
#   1. GPT-2 124M training step, B=16 T=1024 bf16 (`tern bench train`, 20 steps after 5),
#      against the nanoGPT-style peer under torch.compile (gpu_torch_peers.py train --impl
#      nano, the issue's peer: carried in .fixtures/bench by fetch-debs), tern before and after;
#   2. GPT-2 1.5B (gpt2-xl), the same batch (8 steps after 3);
#   3. the peak GPU memory of both (nvidia-smi every 50 ms, the whole process), and the SM
#      clock and power while each ran (every 100 ms: a card slowing under load shows there);
#   4. decoding GPT-2 124M bf16 batch 1 (prompt 16, 512 tokens), tern before and after the
#      best PyTorch decoder we have (bench/h200/llama_peers.py --impl fast-pipe); then, with
#      ISSUE24_BATCHES (default "8 32"), batched decoding against the same peer at each batch.
# Targets: 1. <= 26 ms and >= 1.3x the peer; 2. <= 290 ms; 3. <= 8 GiB at 124M, <= 55 GiB at
# 1.5B (the defaults); 4. >= 5,000 tokens/s and >= 2.5x the peer. The ratios are the peer's
# time over tern's in the same call.
#   OUT=$OUT bash scripts/h200/issue24.sh          (carry .deb .fixtures; models/brown-mini's
#   weights moved out of the tree for the call, as fetch-debs says)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
call_start 570
build_tern
peers=.fixtures/bench/gpu_torch_peers.py
[ -f $peers ] || note "FAIL no $peers (scripts/h200/fetch-debs copies it): item 1 without its peer"

# ---- checks ----
export TERN_TEST_HANDLER=cuda
if [ -d .fixtures ]; then
    step "fixture, cuda fp32" 120 fixture-fp32.log $b/tests/gpt2/test_gpt2_fixture
    TERN_TEST_PRECISION=bf16 step "fixture, cuda bf16" 120 fixture-bf16.log $b/tests/gpt2/test_gpt2_fixture
fi
TERN_CROSS_CONFIG=gpt2 TERN_CROSS_B=2 TERN_CROSS_T=512 \
    step "cuda against cpu, GPT-2 124M, B x T = 2x512" 240 cross-2x512.log $b/tests/gpt2/test_cross_handler
step "ops: test_ops_attention on cuda" 200 ops-attention.log $b/tests/ops/test_ops_attention
unset TERN_TEST_HANDLER

# tern_train LABEL LOG ARGS...: a tern training run with its peak memory
tern_train() {
    local label=$1 log=$logs/$2
    shift 2
    if [ "$(call_left)" -lt 60 ]; then note "skip $label (the call's time is spent)"; return 0; fi
    peak_run "$log" $b/tern bench train --backend cuda --precision bf16 --batch 16 --seq 1024 "$@"
    note "$label: exit $PEAK_RC, peak $(gib "$PEAK_MIB"), $(grep '^bench:' "$log" | tail -1 | sed 's/.*: median/median/')"
    note "  $PEAK_CLOCKS"
}
# ---- 1: 124M against the nanoGPT-style peer; 2 and 3: 1.5B ----
tern_train "1. tern 124M" train-124m-1.log --steps 20 --warmup 5
[ -f $peers ] && step "1. peer nano 124M (torch.compile)" 300 peer-nano.log python3 $peers train --impl nano \
    --config gpt2 --batch 16 --seq 1024 --steps 20 --warmup 5 && note "  $(grep '^peer:' "$logs/peer-nano.log")"
tern_train "1. tern 124M again" train-124m-2.log --steps 20 --warmup 5
tern_train "2. tern 1.5B" train-xl.log --init gpt2-xl --steps 8 --warmup 3

# ---- 4: decoding against the best PyTorch decoder ----
generate() { # label, log, batch
    step "$1" 90 "$2" $b/tern bench generate --backend cuda --precision bf16 --batch "$3" --prompt-tokens 16 \
        --tokens 512 --warmup 2
    note "  $(grep '^bench:' "$logs/$2" | sed 's/.*first token [0-9.]* ms, //')"
}
peer_decode() { # label, log, batch
    step "$1" 180 "$2" python3 bench/h200/llama_peers.py decode --config gpt2 --impl fast-pipe --batch "$3" \
        --prompt 16 --tokens 512
    note "  $(grep '^peer:' "$logs/$2" | tail -1)"
}
generate "4. tern decode batch 1" gen-1-a.log 1
peer_decode "4. peer fast-pipe batch 1" peer-gen-1.log 1
generate "4. tern decode batch 1 again" gen-1-b.log 1
for B in ${ISSUE24_BATCHES-8 32}; do
    generate "4. tern decode batch $B" gen-$B.log "$B"
    peer_decode "4. peer fast-pipe batch $B" peer-gen-$B.log "$B"
done
