# Shared by the H200 scripts: the environment (env.sh), a summary file and a step runner.
# Source from the repository root after setting OUT. Each step's log lands in $OUT/logs;
# `finish` (run on exit) packs the logs into one archive and prints the summary.
source scripts/h200/env.sh
logs=$OUT/logs
mkdir -p "$logs"
summary=$OUT/summary.txt
touch "$summary"
note() { echo "$*" | tee -a "$summary"; }
# CALL_END (epoch seconds), when set: the device call's end; a step gets at most the time left
# and is skipped, with a note, when under 15 s are.
call_left() { echo $((${CALL_END:-0} - $(date +%s))); }
call_start() { # default seconds: the call's end (CALL_END, from CALL_SECONDS or the default)
    # and the GPU in the summary's first line
    export CALL_END=${CALL_END:-$(($(date +%s) + ${CALL_SECONDS:-$1}))}
    note "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader)"
}
step() { # name, timeout seconds, log file name, command...
    local name=$1 limit=$2 log=$logs/$3 start=$SECONDS
    shift 3
    if [ -n "${CALL_END:-}" ]; then
        local left
        left=$(call_left)
        if [ "$left" -lt 15 ]; then note "skip $name (the call's time is spent)"; return 0; fi
        [ "$limit" -gt "$left" ] && limit=$left
    fi
    if timeout "$limit" "$@" > "$log" 2>&1; then note "ok   $name ($((SECONDS - start)) s)"
    else note "FAIL $name ($((SECONDS - start)) s, exit $?): $(tail -2 "$log" | tr '\n' ' ' | cut -c1-300)"; fi
}
finish() {
    tar czf "$OUT/logs-$(date +%H%M%S).tgz" -C "$OUT" logs && rm -rf "$logs"
    cat "$summary"
}
trap finish EXIT
trap 'exit 143' TERM INT
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
b=build-h200
build_tern() { # the Release build with the cuda handler, without OpenCL (no CLBlast there)
    local start=$SECONDS
    if [ -x $b/tern ] && [ -z "${TERN_REBUILD:-}" ]; then
        cmake --build $b -j "$(nproc)" > "$logs/build.log" 2>&1
    else
        { cmake -S . -B $b -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA_HANDLER=ON -DTERN_WITH_OPENCL=OFF &&
          cmake --build $b -j "$(nproc)"; } > "$logs/build.log" 2>&1
    fi || { note "FAIL build: $(grep -m3 -E 'error|Error' "$logs/build.log")"; exit 1; }
    note "ok   build ($((SECONDS - start)) s)"
    export TERN_CACHE_DIR=$PWD/$b/kernel-cache
}
peak_run() { # log path, command...: runs it, sampling its process's used GPU memory (nvidia-smi,
    # every 50 ms; CUDA context, libraries' workspaces and every allocation included) into
    # the .smi file beside the log, and the card's SM clock and power every 100 ms into the
    # .clk file; sets PEAK_RC (its exit status), PEAK_MIB (its peak) and PEAK_CLOCKS (the SM
    # clock's least and median, the most power drawn: a card slowing under load shows there)
    local log=$1 smi=${1%.log}.smi clk=${1%.log}.clk pid cpid
    shift
    nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader,nounits -lms 100 > "$clk" 2> /dev/null &
    cpid=$!
    "$@" > "$log" 2>&1 &
    pid=$!
    : > "$smi"
    while kill -0 $pid 2> /dev/null; do
        nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits >> "$smi" 2> /dev/null
        sleep 0.05
    done
    wait $pid
    PEAK_RC=$?
    kill $cpid 2> /dev/null
    wait $cpid 2> /dev/null
    PEAK_MIB=$(awk -F', *' -v p=$pid '$1 == p && $2 > m { m = $2 } END { print m + 0 }' "$smi")
    # the samples while the card was busy (power above half its largest), so start-up and
    # compilation do not count
    PEAK_CLOCKS=$(awk -F', *' '$2 + 0 > 0 { c[NR] = $1; p[NR] = $2; if ($2 > pm) pm = $2 }
        END { for (i in c) if (p[i] > pm / 2) print c[i], pm }' "$clk" | sort -n |
        awk 'NF { v[++n] = $1; pm = $2 }
             END { if (!n) { print "no clock samples"; exit }
                   printf "SM clock %d-%d MHz (median %d), power up to %.0f W", v[1], v[n], v[int((n + 1) / 2)], pm }')
}
build_with_old() { # A's build (build_tern) beside B's tern_cli, B the tree carried as
    # .old/old.tar.gz (`git archive`), unpacked in $base: exits on either's failure
    base=/tmp/tern-ab-old
    rm -rf $base && mkdir -p $base && tar -xzf .old/old.tar.gz -C $base
    local start=$SECONDS bpid
    ( cmake -S $base -B $base/build-h200 -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA_HANDLER=ON -DTERN_WITH_OPENCL=OFF &&
      cmake --build $base/build-h200 -j 6 --target tern_cli ) > "$logs/ab-build.log" 2>&1 &
    bpid=$!
    build_tern
    wait $bpid || { note "FAIL B build: $(grep -m3 -E 'error|Error' "$logs/ab-build.log")"; exit 1; }
    note "ok   B build ($((SECONDS - start)) s)"
}
gib() { awk -v m="$1" 'BEGIN { printf "%.2f GiB", m / 1024 }'; }
build_targets() { # the same Release build, only the named targets (tern_cli, tests)
    local start=$SECONDS
    { cmake -S . -B $b -DCMAKE_BUILD_TYPE=Release -DTERN_CUDA_HANDLER=ON -DTERN_WITH_OPENCL=OFF &&
      cmake --build $b -j "$(nproc)" --target "$@"; } > "$logs/build.log" 2>&1 ||
        { note "FAIL build: $(grep -m3 -E 'error|Error' "$logs/build.log")"; exit 1; }
    note "ok   build ($((SECONDS - start)) s)"
    export TERN_CACHE_DIR=$PWD/$b/kernel-cache
}
check_errors() { # the two fault checks of issue 8: an out-of-bounds kernel, out of memory
    TERN_GPU=cuda step "out-of-bounds DSL kernel returns an error" 60 fault.log $b/tests/kernel/test_kernel_fault
    if $b/tern bench train --backend cuda --batch 4096 --seq 1024 --steps 1 > "$logs/oom.log" 2>&1; then
        note "FAIL out of memory: a batch of 4096 x 1024 ran?"
    else
        note "ok   out of memory: exit $?: $(grep -c . "$logs/oom.log") lines, last: $(tail -1 "$logs/oom.log" | cut -c1-200)"
    fi
}
check_llama_resume() { # tern train on llama-tiny-a on cuda, bf16: 4 steps against 2, a stop and a --resume
    local fx=.fixtures/fixtures/llama-tiny-a
    [ -d $fx ] || fx=../shared/fixtures/llama-tiny-a
    local run=(--model $fx --data $fx/data.bin --batch 4 --seq 64 --lr 1e-3 --backend cuda --precision bf16)
    step "llama: train 4 steps on cuda" 60 llama-whole.log $b/tern train "${run[@]}" --steps 4
    step "llama: train --stop-after 2, then --resume" 60 llama-part.log sh -c \
        "$b/tern train ${run[*]} --steps 4 --stop-after 2 --out /tmp/llama-ck && $b/tern train --resume /tmp/llama-ck"
    local whole part
    whole=$(sed -n 's/^\(step [0-9]*\/4 | loss [0-9.]*\) .*/\1/p' "$logs/llama-whole.log")
    part=$(sed -n 's/^\(step [0-9]*\/4 | loss [0-9.]*\) .*/\1/p' "$logs/llama-part.log")
    if [ -n "$whole" ] && [ "$whole" = "$part" ]; then
        note "llama resume on cuda: the stopped and resumed run's 4 losses equal the whole run's"
    else
        note "FAIL llama resume on cuda: $(echo "$whole" | tr '\n' ';') vs $(echo "$part" | tr '\n' ';')"
    fi
}
ab_gpt2() { # rounds, B's tern: GPT-2 124M's training step and batch-1 decoding, this tree (A) and B alternated
    local rounds=$1 old=$2 r side bin
    local train=(bench train --backend cuda --precision bf16 --batch 16 --seq 1024 --steps 20 --warmup 5)
    local gen=(bench generate --backend cuda --precision bf16 --tokens 512 --warmup 2)
    for r in $(seq 1 "$rounds"); do
        for side in A B; do
            bin=$b/tern
            [ $side = B ] && bin=$old
            step "train $side, round $r" 90 "ab-train-$side-$r.log" env TERN_CACHE_DIR=/tmp/kc-$side "$bin" "${train[@]}"
            note "  $side: $(grep '^bench:' "$logs/ab-train-$side-$r.log" | tail -1)"
            step "generate $side, round $r" 60 "ab-gen-$side-$r.log" env TERN_CACHE_DIR=/tmp/kc-$side "$bin" "${gen[@]}"
            note "  $side: $(grep '^bench:' "$logs/ab-gen-$side-$r.log" | tail -1)"
        done
    done
}
