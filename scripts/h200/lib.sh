# Shared by the H200 scripts: the environment (env.sh), a summary file and a step runner.
# Source from the repository root after setting OUT. Each step's log lands in $OUT/logs;
# `finish` (run on exit) packs the logs into one archive and prints the summary.
source scripts/h200/env.sh
logs=$OUT/logs
mkdir -p "$logs"
summary=$OUT/summary.txt
touch "$summary"
note() { echo "$*" | tee -a "$summary"; }
step() { # name, timeout seconds, log file name, command...
    local name=$1 limit=$2 log=$logs/$3 start=$SECONDS
    shift 3
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
check_errors() { # the two fault checks of issue 8: an out-of-bounds kernel, out of memory
    TERN_GPU=cuda step "out-of-bounds DSL kernel returns an error" 60 fault.log $b/tests/kernel/test_kernel_fault
    if $b/tern bench train --backend cuda --batch 4096 --seq 1024 --steps 1 > "$logs/oom.log" 2>&1; then
        note "FAIL out of memory: a batch of 4096 x 1024 ran?"
    else
        note "ok   out of memory: exit $?: $(grep -c . "$logs/oom.log") lines, last: $(tail -1 "$logs/oom.log" | cut -c1-200)"
    fi
}
