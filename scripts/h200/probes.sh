#!/usr/bin/env bash
# Issue 24's next decoding work, measured before (or as) it is built, in one call:
#   1. Checks on cuda: `tern generate` of models/brown-mini (GPT-2, fp32 and bf16, greedy and
#      sampled) gives the same ids with several decoding steps a replayable section
#      (TERN_CUDA_TUNE=replay_steps=3, 8) as with one; test_ops_memory on cuda.
#   2. Timings, `tern bench generate` bf16, prompt 16, PROBE_TOKENS new tokens (512),
#      alternated PROBE_ROUNDS times (2), GPT-2 124M and Llama-3.2-1B (random weights):
#      - this tree with replay_steps 1 (the default), 4, 8 and 16 (Llama: 1, 4, 8; each
#        step after a section's first behind a fence: its first kernel waits for the step
#        before, and its attention keeps the early cache loads); and on GPT-2 ac_early=0
#        (those loads off);
#      - ceilings: builds of this tree with a patch of bench/h200/probes/ that leaves a piece
#        of a decoding step out (the tokens come out wrong; only the timing means anything):
#        gpt2-no-qkv, llama-no-qkv: no q|k|v product (the most the product joined to the
#        cached attention could save); gpt2-no-attention: the projection without its
#        attention prologue (the attention's share); download16: the tokens downloaded on
#        one step in 16 (the download's share of a token; on GPT-2).
#      With several steps a section the tokens come in bursts: bench generate then reports
#      the mean time a step ("in bursts, mean"), else the median.
#   OUT=$OUT bash scripts/h200/probes.sh          (carry .deb)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
source scripts/h200/lib.sh
note "gpu: $(nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader)"
probes=${PROBES:-gpt2-no-qkv gpt2-no-attention llama-no-qkv download16}
trees=/tmp/tern-probes
rm -rf $trees && mkdir -p $trees
start=$SECONDS
pids=()
for p in $probes; do # a copy of the tree each, patched, built beside this tree's build
    mkdir -p "$trees/$p"
    tar --exclude='./build*' --exclude=./.deb --exclude=./.fixtures --exclude=./.old --exclude=./.git -cf - . |
        tar -xf - -C "$trees/$p"
    (
        cd "$trees/$p" && patch -s -p1 < "bench/h200/probes/$p.patch" &&
            cmake -S . -B build-probe -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA_HANDLER=ON -DTERN_WITH_OPENCL=OFF &&
            cmake --build build-probe -j 3 --target tern_cli
    ) > "$logs/build-$p.log" 2>&1 &
    pids+=($!)
done
build_targets tern_cli test_ops_memory
for pid in "${pids[@]}"; do wait "$pid" || { note "FAIL a probe's build: $(grep -l -E ' error|FAIL|rejects' "$logs"/build-*.log)"; exit 1; }; done
note "ok   probe builds ($((SECONDS - start)) s)"

TERN_TEST_HANDLER=cuda step "ops: test_ops_memory on cuda" 120 ops-memory.log env -u TERN_SHARED_DIR $b/tests/ops/test_ops_memory
for prec in fp32 bf16; do
    for temp in 0 0.8; do
        args=(generate --model models/brown-mini --prompt "The jury said" --tokens 100 --temperature "$temp"
              --backend cuda --precision "$prec" --ids)
        $b/tern "${args[@]}" > "$logs/ids-1.txt" 2> "$logs/ids-1.err"
        for k in 3 8; do
            TERN_CUDA_TUNE=replay_steps=$k $b/tern "${args[@]}" > "$logs/ids-$k.txt" 2> "$logs/ids-$k.err"
            if [ -s "$logs/ids-1.txt" ] && cmp -s "$logs/ids-1.txt" "$logs/ids-$k.txt"; then
                note "ok   generate $prec temperature $temp: replay_steps=$k gives one a section's ids ($(wc -w < "$logs/ids-1.txt") words)"
            else
                note "FAIL generate $prec temperature $temp: replay_steps=$k differs: $(head -c 200 "$logs/ids-$k.txt" "$logs/ids-$k.err" | tr '\n' ' ')"
            fi
        done
    done
done

gen=(bench generate --backend cuda --precision bf16 --prompt-tokens 16 --tokens "${PROBE_TOKENS:-512}" --warmup 2)
run() { # label, config, binary, env...
    local label=$1 cfg=$2 bin=$3 log init=()
    shift 3
    log="gen-${label//[=,]/-}-$cfg-$r.log"
    [ "$cfg" = gpt2 ] || init=(--init "$cfg")
    step "generate $cfg $label, round $r" 120 "$log" env TERN_CACHE_DIR=/tmp/kc-${label//[=,]/-} "$@" \
        "$bin" "${gen[@]}" "${init[@]}"
    note "  $cfg $label: $(grep '^bench:' "$logs/$log" | sed 's/.*first token [0-9.]* ms, //')"
}
for r in $(seq 1 "${PROBE_ROUNDS:-2}"); do
    for cfg in gpt2 llama-3.2-1b; do
        # (Llama-3.2-1B: fewer variants, its runs are longer: the call's 10 minutes)
        run base "$cfg" $b/tern
        for k in 4 8 16; do
            [ "$cfg" != gpt2 ] && [ $k = 16 ] && continue
            run "replay_steps=$k" "$cfg" $b/tern TERN_CUDA_TUNE=replay_steps=$k
        done
        [ "$cfg" = gpt2 ] && run ac_early=0 "$cfg" $b/tern TERN_CUDA_TUNE=ac_early=0
        for p in $probes; do # GPT-2: its own and download16; Llama: its own
            case $cfg:$p in
            gpt2:gpt2-* | gpt2:download16 | llama-3.2-1b:llama-*) run "$p" "$cfg" "$trees/$p/build-probe/tern" ;;
            esac
        done
    done
done
