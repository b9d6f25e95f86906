#!/usr/bin/env bash
# `tern train` on 2 ranks, end to end on the cpu handler with MPI: the same losses as one
# process with the same global batch (under mpirun and with --procs), only rank 0 prints, a
# checkpoint of 2 ranks resumes on 1, --zero1 trains and checkpoints as the run without it
# (and resumes across rank counts; for the Llama family too), and a rank that dies or fails
# stops the job with an error instead of a hang. usage: test_dist_cli.sh TERN_BINARY MPIEXEC (env from ctest)
set -u
tern=$1
mpiexec=$2
shared=${TERN_SHARED_DIR:?}
work=$(mktemp -d /tmp/tern-dist-XXXXXX)
trap 'rm -rf "$work"' EXIT
export TERN_BACKEND=cpu OMP_NUM_THREADS=1
failures=0
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

head -c 60000 "$shared/data/brown.txt" > "$work/train.txt"
common=(--init tiny --data "$work/train.txt" --seq 32 --lr 1e-3 --warmup 2 --schedule cosine
        --wd 0.1 --clip 1 --seed 5 --grad-accum 2)

# The losses of a log, one per line ("step 3/6 | loss 10.6940 | ...").
losses() { sed -n 's/^step [0-9]*\/[0-9]* | loss \([0-9.]*\) .*/\1/p' "$1"; }

# Whether two loss lists have the same length (> 0) and agree within $3. The runs differ in
# the order of float additions only (each rank sums its rows, then MPI sums the ranks):
# ~1e-7 relative, printed with 4 decimals, so a tolerance of 2e-4 allows a flipped last digit.
close() {
    local a b
    a=$(losses "$1") b=$(losses "$2")
    [ -n "$a" ] && [ "$(echo "$a" | wc -l)" = "$(echo "$b" | wc -l)" ] &&
        paste <(echo "$a") <(echo "$b") | awk -v tol="$3" '{d = $1 - $2; if (d < 0) d = -d; if (d > tol) bad = 1} END {exit bad}'
}

# ---- 2 ranks of batch 2 = 1 process of batch 4 ----
"$tern" train "${common[@]}" --batch 4 --steps 6 > "$work/one.log" 2>&1 || fail "one process: $(tail -1 "$work/one.log")"
timeout 120 "$mpiexec" -n 2 "$tern" train "${common[@]}" --batch 2 --steps 6 > "$work/two.log" 2>&1 ||
    fail "mpiexec -n 2: $(tail -3 "$work/two.log")"
if close "$work/one.log" "$work/two.log" 2e-4; then
    pass "2 ranks of batch 2 print the losses of 1 process of batch 4 (within 2e-4)"
else
    fail "losses differ:"; paste <(losses "$work/one.log") <(losses "$work/two.log")
fi
[ "$(grep -c '^step 1/6' "$work/two.log")" = 1 ] && grep -q '^ranks: 2 (MPI); global batch 4 x 32' "$work/two.log" &&
    pass "only rank 0 prints, and it names the ranks and the global batch" ||
    fail "rank output: $(head -5 "$work/two.log")"

# --procs as a user types it: none of Open MPI's permissions in the environment (CI runs as
# root, where Open MPI refuses to start unless tern allows it, and says so).
plain=(env -u OMPI_ALLOW_RUN_AS_ROOT -u OMPI_ALLOW_RUN_AS_ROOT_CONFIRM -u OMPI_MCA_rmaps_base_oversubscribe)
"${plain[@]}" timeout 120 "$tern" train "${common[@]}" --batch 2 --steps 6 --procs 2 > "$work/procs.log" 2>&1 ||
    fail "--procs 2: $(tail -3 "$work/procs.log")"
[ -n "$(losses "$work/procs.log")" ] && [ "$(losses "$work/procs.log")" = "$(losses "$work/two.log")" ] &&
    pass "--procs 2 trains as mpiexec -n 2 does" || fail "--procs 2 printed: $(tail -3 "$work/procs.log")"
if [ "$(id -u)" = 0 ]; then
    grep -q '^tern: --procs: running as root, so Open MPI is allowed to' "$work/procs.log" &&
        pass "--procs as root allows Open MPI to run as root and says so" ||
        fail "--procs as root: $(head -3 "$work/procs.log")"
fi

# ---- a checkpoint of 2 ranks resumes on 1 rank with the same global batch ----
timeout 120 "$mpiexec" -n 2 "$tern" train "${common[@]}" --batch 2 --steps 3 --out "$work/ck" > "$work/ck.log" 2>&1 ||
    fail "2-rank run with --out: $(tail -3 "$work/ck.log")"
"$tern" train --resume "$work/ck" "${common[@]:2}" --batch 4 --steps 6 --out "$work/resumed" > "$work/resumed.log" 2>&1 ||
    fail "resume on 1 rank: $(tail -1 "$work/resumed.log")"
tail -3 "$work/one.log" > "$work/one-tail.log"
if close "$work/one-tail.log" "$work/resumed.log" 2e-4; then
    pass "steps 4-6 resumed on 1 rank equal the uninterrupted run's"
else
    fail "resumed losses:"; paste <(losses "$work/one-tail.log") <(losses "$work/resumed.log")
fi
if "$tern" train --resume "$work/ck" "${common[@]:2}" --batch 3 --steps 6 > "$work/badresume.log" 2>&1; then
    fail "a resume with another global batch ran"
else
    grep -q "global batch of 4 rows" "$work/badresume.log" && pass "a resume with another global batch is refused" ||
        fail "bad resume said: $(cat "$work/badresume.log")"
fi

# ---- the Llama family on 2 ranks (the llama-tiny-a fixture): the same losses, a checkpoint
# of 2 ranks resumed on 1 ----
fixture=$shared/fixtures/llama-tiny-a
lcommon=(--model "$fixture" --data "$fixture/data.bin" --seq 32 --lr 2e-3 --warmup 1 --wd 0.1 --clip 1 --seed 5)
"$tern" train "${lcommon[@]}" --batch 4 --steps 4 > "$work/llama-one.log" 2>&1 ||
    fail "Llama, one process: $(tail -1 "$work/llama-one.log")"
timeout 120 "$mpiexec" -n 2 "$tern" train "${lcommon[@]}" --batch 2 --steps 2 --out "$work/llama-ck" > "$work/llama-two.log" 2>&1 ||
    fail "Llama, mpiexec -n 2: $(tail -3 "$work/llama-two.log")"
cp -r "$work/llama-ck" "$work/llama-ck-step2" # the resume below continues in llama-ck
grep '^step' "$work/llama-one.log" | head -2 > "$work/llama-one-head.log"
grep '^step' "$work/llama-one.log" | tail -2 > "$work/llama-one-tail.log"
if close "$work/llama-one-head.log" "$work/llama-two.log" 2e-4; then
    pass "Llama: 2 ranks of batch 2 print the losses of 1 process of batch 4 (within 2e-4)"
else
    fail "Llama losses differ:"; paste <(losses "$work/llama-one.log") <(losses "$work/llama-two.log")
fi
"$tern" train --resume "$work/llama-ck" --batch 4 --steps 4 > "$work/llama-resumed.log" 2>&1 ||
    fail "Llama resume on 1 rank: $(tail -1 "$work/llama-resumed.log")"
if close "$work/llama-one-tail.log" "$work/llama-resumed.log" 2e-4; then
    pass "Llama: steps 3-4 resumed on 1 rank from a 2-rank checkpoint equal the uninterrupted run's"
else
    fail "Llama resumed losses:"; paste <(losses "$work/llama-one.log") <(losses "$work/llama-resumed.log")
fi

# ---- the Llama family with ZeRO-1: the same steps and checkpoint as without it (digit for
# digit and byte for byte, as GPT-2's below: the sharded step is the same operations on
# slices), in fp32 and in bf16 (the f32 master sharded too); resumed on the same ranks ----
timeout 120 "$mpiexec" -n 2 "$tern" train "${lcommon[@]}" --batch 2 --steps 2 --zero1 --out "$work/llama-zck" \
    > "$work/llama-zero.log" 2>&1 || fail "Llama, mpiexec -n 2 --zero1: $(tail -3 "$work/llama-zero.log")"
[ -n "$(losses "$work/llama-zero.log")" ] && [ "$(losses "$work/llama-zero.log")" = "$(losses "$work/llama-two.log")" ] &&
    grep -q '^ZeRO-1: optimizer state sharded over 2 ranks' "$work/llama-zero.log" &&
    pass "Llama: --zero1 on 2 ranks prints the losses of 2 ranks without it, digit for digit" ||
    fail "Llama --zero1 printed: $(head -6 "$work/llama-zero.log")"
cmp -s "$work/llama-ck-step2/optimizer-2.safetensors" "$work/llama-zck/optimizer-2.safetensors" &&
    cmp -s "$work/llama-ck-step2/model.safetensors" "$work/llama-zck/model.safetensors" &&
    pass "Llama: a --zero1 checkpoint is the checkpoint of the same run without it, byte for byte" ||
    fail "Llama: the --zero1 checkpoint differs from the one without it"
timeout 120 "$mpiexec" -n 2 "$tern" train --resume "$work/llama-zck" --batch 2 --steps 4 --zero1 \
    > "$work/llama-zresumed.log" 2>&1 || fail "Llama: resume with --zero1 on 2 ranks: $(tail -3 "$work/llama-zresumed.log")"
if close "$work/llama-one-tail.log" "$work/llama-zresumed.log" 2e-4; then
    pass "Llama: a --zero1 checkpoint resumed with --zero1 on the same 2 ranks continues as the uninterrupted run"
else
    fail "Llama resumed --zero1 losses:"; paste <(losses "$work/llama-one.log") <(losses "$work/llama-zresumed.log")
fi
# bf16 with --no-decay-1d: AdamW runs tensor by tensor, so tensors cut at the parts' ends too.
for z in "" --zero1; do
    timeout 120 "$mpiexec" -n 2 "$tern" train "${lcommon[@]}" --batch 2 --steps 2 --precision bf16 --no-decay-1d $z \
        --out "$work/llama-bf16$z" > "$work/llama-bf16$z.log" 2>&1 || fail "Llama bf16 $z: $(tail -3 "$work/llama-bf16$z.log")"
done
[ -n "$(losses "$work/llama-bf16.log")" ] && [ "$(losses "$work/llama-bf16.log")" = "$(losses "$work/llama-bf16--zero1.log")" ] &&
    cmp -s "$work/llama-bf16/model.safetensors" "$work/llama-bf16--zero1/model.safetensors" &&
    cmp -s "$work/llama-bf16/optimizer-2.safetensors" "$work/llama-bf16--zero1/optimizer-2.safetensors" &&
    pass "Llama bf16, 1-D tensors not decayed: --zero1 prints the same losses and writes the same checkpoint" ||
    fail "Llama bf16 with --zero1 differs: $(tail -2 "$work/llama-bf16--zero1.log")"

# ---- ZeRO-1: the same steps with the optimizer state sharded; whole checkpoints ----
timeout 120 "$mpiexec" -n 2 "$tern" train "${common[@]}" --batch 2 --steps 6 --zero1 > "$work/zero.log" 2>&1 ||
    fail "mpiexec -n 2 --zero1: $(tail -3 "$work/zero.log")"
[ -n "$(losses "$work/zero.log")" ] && [ "$(losses "$work/zero.log")" = "$(losses "$work/two.log")" ] &&
    grep -q '^ZeRO-1: optimizer state sharded over 2 ranks' "$work/zero.log" &&
    pass "--zero1 on 2 ranks prints the losses of 2 ranks without it, digit for digit" ||
    fail "--zero1 printed: $(head -6 "$work/zero.log")"
# The same checkpoint, byte for byte, with and without ZeRO-1 (fp32 here, bf16 below).
timeout 120 "$mpiexec" -n 2 "$tern" train "${common[@]}" --batch 2 --steps 3 --zero1 --out "$work/zck" > "$work/zck.log" 2>&1 ||
    fail "2-rank --zero1 run with --out: $(tail -3 "$work/zck.log")"
cmp -s "$work/ck/optimizer-3.safetensors" "$work/zck/optimizer-3.safetensors" &&
    cmp -s "$work/ck/model.safetensors" "$work/zck/model.safetensors" &&
    pass "a --zero1 checkpoint is the checkpoint of the same run without it, byte for byte" ||
    fail "the --zero1 checkpoint differs from the one without it"
"$tern" train --resume "$work/zck" "${common[@]:2}" --batch 4 --steps 6 --out "$work/zresumed" > "$work/zresumed.log" 2>&1 ||
    fail "resume of a --zero1 checkpoint on 1 rank: $(tail -1 "$work/zresumed.log")"
if close "$work/one-tail.log" "$work/zresumed.log" 2e-4; then
    pass "a --zero1 checkpoint resumed on 1 rank continues as the uninterrupted run"
else
    fail "resumed --zero1 losses:"; paste <(losses "$work/one-tail.log") <(losses "$work/zresumed.log")
fi
"$tern" train "${common[@]}" --batch 4 --steps 3 --out "$work/ck1" > "$work/ck1.log" 2>&1 || fail "1-rank run with --out: $(tail -1 "$work/ck1.log")"
timeout 120 "$mpiexec" -n 2 "$tern" train --resume "$work/ck1" "${common[@]:2}" --batch 2 --steps 6 --zero1 \
    --out "$work/zresumed2" > "$work/zresumed2.log" 2>&1 || fail "resume with --zero1 on 2 ranks: $(tail -3 "$work/zresumed2.log")"
if close "$work/one-tail.log" "$work/zresumed2.log" 2e-4; then
    pass "a 1-rank checkpoint resumed with --zero1 on 2 ranks continues as the uninterrupted run"
else
    fail "1-rank checkpoint resumed with --zero1:"; paste <(losses "$work/one-tail.log") <(losses "$work/zresumed2.log")
fi
# bf16: the f32 master weights are sharded too, and gathered into the checkpoint.
for z in "" --zero1; do
    timeout 120 "$mpiexec" -n 2 "$tern" train "${common[@]}" --batch 2 --steps 2 --precision bf16 $z \
        --out "$work/bf16$z" > "$work/bf16$z.log" 2>&1 || fail "bf16 $z: $(tail -3 "$work/bf16$z.log")"
done
[ -n "$(losses "$work/bf16.log")" ] && [ "$(losses "$work/bf16.log")" = "$(losses "$work/bf16--zero1.log")" ] &&
    cmp -s "$work/bf16/model.safetensors" "$work/bf16--zero1/model.safetensors" &&
    cmp -s "$work/bf16/optimizer-2.safetensors" "$work/bf16--zero1/optimizer-2.safetensors" &&
    pass "bf16: --zero1 prints the same losses and writes the same checkpoint" ||
    fail "bf16 with --zero1 differs: $(tail -2 "$work/bf16--zero1.log")"
out=$("$tern" train "${common[@]}" --batch 2 --steps 2 --zero1 2>&1)
[ $? -eq 1 ] && [ "$(echo "$out" | wc -l)" = 1 ] && [[ "$out" == "tern: error: train: --zero1 shards the optimizer state across ranks"* ]] &&
    pass "--zero1 on 1 rank: one line, status 1" || fail "--zero1 on 1 rank: $out"
out=$(TERN_DIST_WORLD=2 TERN_DIST_RANK=1 timeout 60 "$tern" train "${common[@]}" --batch 2 --steps 2 --zero1 2>&1)
[ $? -eq 1 ] && [ "$(echo "$out" | wc -l)" = 1 ] && [[ "$out" == "tern: error: rank 1 of 2: "*"MPI"* ]] &&
    pass "--zero1 on cpu ranks without MPI: one line, status 1" || fail "--zero1 without MPI: $out"

# ---- a rank killed mid-run: the job ends with an error, no rank is left waiting ----
# Starts the job in the background, waits for its second step, kills one rank with SIGKILL,
# and gives the rest 60 s to stop.
kill_rank() { # log, command...
    local log=$1
    shift
    "$@" > "$log" 2>&1 &
    local job=$! ranks="" i
    for i in $(seq 600); do grep -q '^step 2/' "$log" && break; sleep 0.1; done
    ranks=$(pgrep -f -- "--data $work/kill.txt") # the launcher(s) and the ranks
    local victim=$(for p in $ranks; do [ "$p" != "$job" ] && grep -q "^train" <(tr '\0' '\n' < /proc/$p/cmdline 2>/dev/null | sed -n 2p) && echo $p; done | tail -1)
    [ -n "$victim" ] && kill -9 "$victim"
    for i in $(seq 600); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
    if kill -0 $job 2>/dev/null; then
        kill -9 $job; echo "HUNG"
    fi
    wait $job
    echo "status $?"
    sleep 0.5
    pgrep -f -- "--data $work/kill.txt" >/dev/null && echo "LEFT"
}
cp "$work/train.txt" "$work/kill.txt"
long=(--init tiny --data "$work/kill.txt" --seq 32 --batch 2 --steps 100000)
out=$(kill_rank "$work/kill-mpi.log" "$mpiexec" -n 2 "$tern" train "${long[@]}")
if [[ "$out" == "status "[1-9]* ]]; then
    pass "mpiexec: a killed rank ends the job with an error ($(echo $out))"
else
    fail "mpiexec, a rank killed: $out; $(tail -2 "$work/kill-mpi.log")"
fi
out=$(kill_rank "$work/kill-procs.log" "${plain[@]}" "$tern" train "${long[@]}" --procs 2)
if [ "$out" = "status 1" ] && tail -1 "$work/kill-procs.log" | grep -q "^tern: error: the MPI job of 2 ranks failed"; then
    pass "--procs: a killed rank ends the job with one error line"
else
    fail "--procs, a rank killed: $out; $(tail -2 "$work/kill-procs.log")"
fi

# ---- a rank that fails stops the others (rank 0 cannot write its checkpoint at step 1,
# while rank 1 waits in step 2's gradient sum) ----
timeout 120 "$mpiexec" -n 2 "$tern" train "${common[@]}" --batch 2 --steps 4 --save-every 1 \
    --out /proc/tern-cannot-write > "$work/fail.log" 2>&1
status=$?
if [ $status -ne 0 ] && [ $status -ne 124 ] && grep -q "^tern: error: rank 0 of 2: " "$work/fail.log"; then
    pass "a failing rank reports one line naming it and stops the job (status $status)"
else
    fail "a failing rank: status $status; $(grep -m2 error "$work/fail.log")"
fi

# ---- one-line errors ----
out=$(TERN_DIST_WORLD=2 TERN_DIST_RANK=1 timeout 60 "$tern" train "${common[@]}" --batch 2 --steps 2 2>&1)
status=$?
if [ $status -eq 1 ] && [ "$(echo "$out" | wc -l)" = 1 ] && [[ "$out" == "tern: error: rank 1 of 2: "*"MPI"* ]]; then
    pass "cpu ranks without MPI: one line, status 1"
else
    fail "cpu ranks without MPI: status $status: $out"
fi
out=$(TERN_DIST_WORLD=2 TERN_DIST_RANK=0 "$tern" train "${common[@]}" --batch 2 --steps 2 --procs 2 2>&1)
[ $? -eq 1 ] && [[ "$out" == "tern: error: train: --procs inside a job"* ]] && pass "--procs inside a job is refused" ||
    fail "--procs inside a job: $out"
out=$(TERN_DIST_WORLD=2 TERN_DIST_RANK=2 "$tern" train "${common[@]}" --batch 2 --steps 2 2>&1)
[ $? -eq 1 ] && [[ "$out" == "tern: error: starting the communicator: TERN_DIST_RANK must be"* ]] &&
    pass "a rank outside the world is refused" || fail "rank 2 of 2: $out"

echo "test_dist_cli: $failures failure(s)"
[ $failures -eq 0 ]
