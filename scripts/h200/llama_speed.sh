#!/usr/bin/env bash
# The Llama family's speed on the H200 against PyTorch, in one call (issue 22, item 6): the
# cuda build of the tern program; a check that the hand-written PyTorch peer computes the
# same model as transformers (float32, Llama-3.2-1B: grouped heads and llama3 rope
# scaling); then two rounds, each tern then its peers (bench/h200/llama_peers.py):
#   - batch-1 bf16 decoding at the SmolLM2-135M and Llama-3.2-1B shapes, prompt 16, 512 new
#     tokens (tern bench generate; HF generate with a static cache and its compile, and a
#     hand-written static-KV step in one hand-captured CUDA graph);
#   - the training step at the SmolLM2-135M shape, B=16, T=1024, bf16 (tern bench train;
#     transformers' model under torch.compile).
# LLAMA_BATCHES="1 8" also decodes 8 prompts together (tern bench generate --batch 8, the
# peers' --batch 8): each batch adds a block a shape and round, past ~8 minutes at two.
# Round 2 runs only the hand-captured graph among the decoders (round 1 shows which peer is
# fastest; LLAMA_PEERS2=hf-static,fast-graph runs both again). Ends with a table of the
# ratios peer time / tern time, per round (above 1: tern is faster).
# Run from the repository root with .deb carried (scripts/h200/fetch-debs):
#   OUT=$OUT bash scripts/h200/llama_speed.sh
# A block of steps that would end past LLAMA_BUDGET seconds (default 540; by an estimate of
# its length) is skipped, so the call ends under the 10-minute limit whatever
# torch.compile's warm-up costs; the table is printed even when the call is cut.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader)"
budget=${LLAMA_BUDGET:-540}
within() { # name, estimated seconds: true when the block should end within the budget
    if [ $((SECONDS + $2)) -lt "$budget" ]; then return 0; fi
    note "skip $1 (at $SECONDS s, ~$2 s more would pass the ${budget} s budget)"
    return 1
}
# the table: each round's tern line against its peers' lines
table() { python3 - "$logs" >> "$summary" <<'EOF'
import glob, os, re, sys
logs = sys.argv[1]
def lines(pattern, prefix):
    out = []
    for f in sorted(glob.glob(os.path.join(logs, pattern))):
        out += [l.strip() for l in open(f, errors="replace") if l.startswith(prefix)]
    return out
ms_token = lambda l: float(re.search(r"median ([0-9.]+) ms/(token|step)", l).group(1))
ms_step = lambda l: float(re.search(r"median ([0-9.]+) ms/step", l).group(1))
print("\nratios: peer time / tern time (above 1: tern faster); tern figure, peer figure")
batches = sorted({int(re.search(r"-b([0-9]+)\.log$", f).group(1)) for f in glob.glob(os.path.join(logs, "r*-gen-*-b*.log"))})
for r in (1, 2):
    for cfg in ("smollm2-135m", "llama-3.2-1b"):
        for B in batches:
            t = lines(f"r{r}-tern-gen-{cfg}-b{B}.log", "bench:")
            for p in lines(f"r{r}-peer-gen-{cfg}-b{B}.log", "peer:"):
                if not t: break
                name = re.search(r"peer: decode (.*) " + re.escape(cfg), p).group(1)
                print(f"  round {r} decode {cfg:13s} B={B} {ms_token(p) / ms_token(t[-1]):5.2f}x  tern {ms_token(t[-1]):.3f} "
                      f"ms/step, {name} {ms_token(p):.3f} ms/step")
    t, p = lines(f"r{r}-tern-train.log", "bench:"), lines(f"r{r}-peer-train.log", "peer:")
    if t and p:
        print(f"  round {r} train  smollm2-135m B=16 T=1024 {ms_step(p[-1]) / ms_step(t[-1]):5.2f}x  "
              f"tern {ms_step(t[-1]):.2f} ms/step, hf+torch.compile {ms_step(p[-1]):.2f} ms/step")
EOF
}
trap 'table; grep -h -E "^(bench|peer):" "$logs"/r*.log >> "$summary" 2>/dev/null; finish' EXIT

# only the program (build_tern builds every test too); the flags of build_tern
start=$SECONDS
{ cmake -S . -B $b -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA_HANDLER=ON -DTERN_WITH_OPENCL=OFF &&
  cmake --build $b -j "$(nproc)" --target tern_cli; } > "$logs/build.log" 2>&1 ||
    { note "FAIL build: $(grep -m3 -E 'error|Error' "$logs/build.log")"; exit 1; }
note "ok   build ($((SECONDS - start)) s)"
export TERN_CACHE_DIR=$PWD/$b/kernel-cache
note "torch: $(python3 -c 'import torch, transformers; print(torch.__version__, "transformers", transformers.__version__)' 2>&1 | tail -1)"

step "peer check: hand-written Llama-3.2-1B = transformers (fp32)" 120 check.log \
    python3 bench/h200/llama_peers.py check --config llama-3.2-1b
grep -h '^peer-check' "$logs/check.log" >> "$summary"

gen=($b/tern bench generate --backend cuda --precision bf16 --prompt-tokens 16 --tokens 512 --warmup 2)
train=($b/tern bench train --backend cuda --precision bf16 --init smollm2-135m --batch 16 --seq 1024 --steps 10 --warmup 3)
for r in 1 2; do
    if [ $r = 1 ]; then peers=${LLAMA_PEERS1:-hf-static,fast-graph}; else peers=${LLAMA_PEERS2:-fast-graph}; fi
    for cfg in smollm2-135m llama-3.2-1b; do
        for B in ${LLAMA_BATCHES:-1}; do
            within "round $r $cfg decode B=$B" $((r == 1 ? 150 : 80)) || continue
            step "round $r: tern generate $cfg B=$B" 120 "r$r-tern-gen-$cfg-b$B.log" "${gen[@]}" --init "$cfg" --batch "$B"
            step "round $r: peers decode $cfg B=$B ($peers)" 300 "r$r-peer-gen-$cfg-b$B.log" \
                python3 bench/h200/llama_peers.py decode --config "$cfg" --impl "$peers" --batch "$B" --prompt 16 --tokens 512
        done
    done
    within "round $r train" $((r == 1 ? 150 : 90)) || continue
    step "round $r: tern train smollm2-135m" 120 "r$r-tern-train.log" "${train[@]}"
    step "round $r: peer train smollm2-135m (hf + torch.compile)" 300 "r$r-peer-train.log" \
        python3 bench/h200/llama_peers.py train --config smollm2-135m --impl hf --batch 16 --seq 1024 --steps 10 --warmup 3
done

