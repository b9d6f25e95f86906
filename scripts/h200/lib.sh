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
