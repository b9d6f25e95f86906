#!/usr/bin/env bash
# Ceilings for issue 24's next decoding work, measured before building it: each probe is a
# patch in bench/h200/probes/ that leaves a piece of a decoding step out (the tokens come out
# wrong; only the timing means anything), built beside "base" (this tree with only
# bench-mean.patch, which prints the mean time a step as well as the median: with several
# steps a graph the tokens arrive in bursts and the median interval is 0). Then `tern bench
# generate` (bf16, prompt 16, PROBE_TOKENS new tokens (512)) alternated over the builds,
# PROBE_ROUNDS times (3), each on its model (gpt2-* on GPT-2 124M, llama-* on Llama-3.2-1B,
# base on both), and base once more with the early cache loads off (ac_early=0), which a
# graph of several steps loses on all its steps but the first.
#   gpt2-no-qkv, llama-no-qkv: no q|k|v product in a decoding step: the most the product
#     joined to the cached attention could save
#   gpt2-no-attention: the projection without its attention prologue: the attention's share
#   gpt2-steps8: eight steps a graph, one download a graph (positions advance between
#     graphs only): the host's and the graph start's share
#   gpt2-download16: the token downloaded on one step in 16: the download's share
#   OUT=$OUT bash scripts/h200/probes.sh          (carry .deb)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader)"
probes=${PROBES:-gpt2-no-qkv gpt2-no-attention gpt2-steps8 gpt2-download16 llama-no-qkv}
trees=/tmp/tern-probes
rm -rf $trees && mkdir -p $trees
start=$SECONDS
pids=()
for p in base $probes; do # a copy of the tree each, patched, built in parallel
    dir=$trees/$p
    mkdir -p "$dir"
    tar --exclude=./build-h200 --exclude=./.deb --exclude=./.fixtures --exclude=./.old --exclude=./.git -cf - . |
        tar -xf - -C "$dir"
    (
        cd "$dir" && patch -s -p1 < bench/h200/probes/bench-mean.patch &&
            { [ $p = base ] || patch -s -p1 < "bench/h200/probes/$p.patch"; } &&
            cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA_HANDLER=ON -DTERN_WITH_OPENCL=OFF &&
            cmake --build build -j 4 --target tern_cli
    ) > "$logs/build-$p.log" 2>&1 &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || { note "FAIL a build: $(grep -l -E 'error|Error|FAIL' "$logs"/build-*.log)"; exit 1; }; done
note "ok   builds ($((SECONDS - start)) s)"
gen=(bench generate --backend cuda --precision bf16 --prompt-tokens 16 --tokens "${PROBE_TOKENS:-512}" --warmup 2)
run() { # label, config, binary's probe, env...
    local label=$1 cfg=$2 p=$3 log init=()
    shift 3
    log="gen-${label//[=,]/-}-$cfg-$r.log"
    [ "$cfg" = gpt2 ] || init=(--init "$cfg")
    step "generate $cfg $label, round $r" 120 "$log" env TERN_CACHE_DIR=/tmp/kc-$p "$@" \
        "$trees/$p/build/tern" "${gen[@]}" "${init[@]}"
    note "  $cfg $label: $(grep -m1 '^probe:' "$logs/$log" | cut -c8-) | $(grep '^bench:' "$logs/$log" | sed 's/.*median/median/')"
}
for r in $(seq 1 "${PROBE_ROUNDS:-3}"); do
    for cfg in gpt2 llama-3.2-1b; do
        run base "$cfg" base
        run ac_early=0 "$cfg" base TERN_CUDA_TUNE=ac_early=0
        for p in $probes; do
            [[ $p == gpt2-* && $cfg == gpt2 ]] || [[ $p == llama-* && $cfg == llama-3.2-1b ]] || continue
            run "$p" "$cfg" "$p"
        done
    done
done
