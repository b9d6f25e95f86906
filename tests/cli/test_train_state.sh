#!/usr/bin/env bash
# Training state a user can trust (issue 19), on the cpu handler with the tiny model:
#   resume    a resume restores the run's settings; a changed one is refused or applied
#   kill-first, kill-second
#             SIGKILL at each moment of the first (second) checkpoint leaves a folder that
#             loads and resumes
#   consistent a checkpoint whose files disagree, or hold non-finite values, is refused
#   signals   SIGINT/SIGTERM stop with a checkpoint, a second signal at once; the lock
#   files     FIFOs and devices refused, a full disk, a file-size limit, a read-only --out,
#             data truncated while training, stdout on a full device
#   messages  one printable line; a config or tokenizer that does not fit the weights
#   ranks     (MPI launcher as the third argument) ranks agree on a stop
# Kills and signals come at exact moments through the test-only hook $TERN_TEST_HOOK
# (cli/train_guard.h), never after sleeps.
# usage: test_train_state.sh TERN_BINARY SECTION (one of the above)   (TERN_SHARED_DIR set by ctest)
set -u
tern=$1
section=$2
shared=${TERN_SHARED_DIR:?}
work=$(mktemp -d /tmp/tern-state-XXXXXX)
cleanup() {
    [ -n "${mounted:-}" ] && umount "$mounted" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
export OMP_NUM_THREADS=1 TERN_BACKEND=cpu
unset TERN_TEST_HOOK
failures=0
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# stderr of a command that must fail: exit status 1, one line "tern: error: ...needle...".
expect_error() { # description, expected text, command...
    local what=$1 needle=$2; shift 2
    local err status
    err=$(timeout 60 "$@" 2>&1 >/dev/null); status=$?
    if [ $status -eq 1 ] && [ "$(printf '%s\n' "$err" | wc -l)" -eq 1 ] &&
       [[ "$err" == "tern: error: "*"$needle"* ]]; then
        pass "$what"
    else
        fail "$what: status $status, stderr: $err"
    fi
}

# A small token shard: 20000 tokens of the Brown corpus, and a second one of other tokens.
head -c 90000 "$shared/data/brown.txt" | "$tern" tokenize --out "$work/d.bin" --val "$work/v.bin" \
    --val-fraction 0.1 > /dev/null || { echo "FAIL: tokenize"; exit 1; }
tail -c 30000 "$shared/data/brown.txt" | "$tern" tokenize --out "$work/other.bin" > /dev/null
run=(--data "$work/d.bin" --batch 2 --seq 16 --lr 1e-3 --warmup 1 --schedule cosine --wd 0.1
     --grad-accum 2 --beta1 0.8 --beta2 0.9 --eps 1e-7 --clip 0.5 --seed 7)
# The step lines without their timings.
steps_of() { grep '^step' "$1" | sed 's/ | [0-9.]* ms | [0-9]* tok\/s$//'; }
# A folder's files and their checksums (to show that a refused resume changed nothing).
sums() { (cd "$1" && md5sum $(ls | grep -v '^train.lock$') 2>/dev/null); }
# Waits until process $1 is stopped (the stop-at hook); 0 if it is, 1 if it died.
wait_stopped() {
    for _ in $(seq 600); do
        local state
        state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
        [ "$state" = T ] && return 0
        sleep 0.1
    done
    return 1
}
step_of_model() { # the tern_step a checkpoint's model records
    grep -ao '"tern_step":"[0-9]*"' "$1/model.safetensors" | head -1 | tr -dc 0-9
}
# Overwrites 4 bytes (a float) of a safetensors file's data section with a NaN.
poison() { # file, byte offset within the data section
    local hlen
    hlen=$(od -An -t u8 -N8 "$1" | tr -d ' ')
    printf '\xff\xff\xff\x7f' | dd of="$1" bs=1 seek=$((8 + hlen + $2)) conv=notrunc status=none
}

case $section in
resume)
    "$tern" train --init tiny "${run[@]}" --steps 4 --out "$work/full" > "$work/full.log" 2>&1 ||
        fail "4 steps: $(tail -1 "$work/full.log")"
    "$tern" train --init tiny "${run[@]}" --steps 4 --stop-after 2 --out "$work/part" > /dev/null 2>&1 ||
        fail "2 of 4 steps"
    cp -r "$work/part" "$work/part0"
    # The README's resume: only --resume (and --data, --steps as before) -- every other
    # setting comes from the checkpoint, and the steps equal the uninterrupted run's.
    "$tern" train --resume "$work/part" --data "$work/d.bin" --steps 4 > "$work/resumed.log" 2>&1 ||
        fail "resume: $(tail -1 "$work/resumed.log")"
    if [ -n "$(steps_of "$work/full.log")" ] &&
       [ "$(steps_of "$work/full.log" | tail -2)" = "$(steps_of "$work/resumed.log")" ]; then
        pass "a resume given no settings continues exactly (steps 3-4 equal the uninterrupted run's)"
    else
        fail "resume differs:"; steps_of "$work/full.log"; steps_of "$work/resumed.log"
    fi
    grep -q '^resume: the run.s settings, unchanged' "$work/resumed.log" &&
        pass "the resume says the settings are the run's" || fail "resume: $(head -1 "$work/resumed.log")"
    # Every setting that shapes the run, changed on resume: refused, naming both values, and
    # the checkpoint untouched.
    before=$(sums "$work/part0")
    while IFS='|' read -r flag value want; do
        expect_error "resume with $flag $value is refused" "$want" \
            "$tern" train --resume "$work/part0" $flag $value
    done <<'EOF'
--batch|3|global batch of 2 rows
--seq|8|--seq 8 differs from the run's 16
--grad-accum|1|--grad-accum 1 differs from the run's 2
--lr|2e-3|--lr 0.002 differs from the run's 0.001
--schedule|constant|--schedule constant differs from the run's cosine
--warmup|2|--warmup 2 differs from the run's 1
--wd|0.2|--wd 0.2 differs from the run's 0.1
--beta1|0.85|--beta1 0.85 differs from the run's 0.8
--beta2|0.95|--beta2 0.95 differs from the run's 0.9
--eps|1e-8|--eps 1e-08 differs from the run's 1e-07
--clip|1|--clip 1 differs from the run's 0.5
--seed|8|--seed 8 differs from the run's 7
--precision|bf16|--precision bf16 differs from the run's fp32
--save-dtype|bf16|--save-dtype bf16 differs from the run's f32
--no-decay-1d||--no-decay-1d true differs from the run's false
EOF
    expect_error "resume with other data is refused" "holds other tokens" \
        "$tern" train --resume "$work/part0" --data "$work/other.bin"
    [ "$(sums "$work/part0")" = "$before" ] && pass "refused resumes leave the checkpoint as it was" ||
        fail "a refused resume changed the checkpoint"
    # The settings that may change: applied, and printed as changes.
    cp "$work/d.bin" "$work/moved.bin"
    "$tern" train --resume "$work/part0" --data "$work/moved.bin" --steps 5 --save-every 1 \
        --val "$work/v.bin" --val-every 1 --val-batches 1 --out "$work/elsewhere" --backend cpu \
        > "$work/changed.log" 2>&1 || fail "resume with changes: $(tail -1 "$work/changed.log")"
    line=$(grep '^resume:' "$work/changed.log")
    for want in "--steps 4 -> 5" "--save-every 0 -> 1" "--val-every 0 -> 1" "--val-batches 20 -> 1" "--val (none) -> "; do
        [[ "$line" == *"$want"* ]] || fail "changes line lacks '$want': $line"
    done
    [ "$(grep -c '^step' "$work/changed.log")" = 3 ] && [ "$(grep -c ' | val ' "$work/changed.log")" = 3 ] &&
        [ "$(grep -c '^checkpoint:' "$work/changed.log")" = 3 ] && [ "$(step_of_model "$work/elsewhere")" = 5 ] &&
        pass "changed settings applied (5 steps, validation and a checkpoint each step, into --out)" ||
        fail "changes not applied: $(cat "$work/changed.log")"
    grep -q '"steps":	"5"' "$work/elsewhere/run.json" && grep -q '"val_every":	"1"' "$work/elsewhere/run.json" &&
        pass "the new folder's run.json records the changed settings" || fail "run.json: $(cat "$work/elsewhere/run.json")"
    # The same data at another path is the run's data; --data may be left out (the saved path).
    "$tern" train --resume "$work/elsewhere" --steps 6 > "$work/again.log" 2>&1 &&
        grep -q '^step 6/6' "$work/again.log" && pass "a resume without --data reads the run's data" ||
        fail "resume without --data: $(tail -1 "$work/again.log")"
    # A fresh run may not overwrite another run's checkpoint.
    expect_error "a fresh run into a checkpoint folder is refused" "holds another run's checkpoint" \
        "$tern" train --init tiny "${run[@]}" --steps 1 --out "$work/full"
    # run.json read back is validated like any input.
    cp -r "$work/part0" "$work/badrun"
    sed -i 's/"lr":	"0.001"/"lr":	"-5"/' "$work/badrun/run.json"
    expect_error "a run.json with a bad value is refused" "--lr: -5 is out of range" \
        "$tern" train --resume "$work/badrun"
    sed -i 's/"lr":	"-5"/"lr":	"0.001", "lr": "0.001"/' "$work/badrun/run.json"
    expect_error "a run.json with a key twice is refused" 'key "lr" appears twice' \
        "$tern" train --resume "$work/badrun"
    ;;

kill-first|kill-second)
    # The uninterrupted run, then one run killed at each moment of its first (or second)
    # checkpoint (--save-every 1): every folder that holds a model loads, and resumes into
    # the same steps; one killed before its first model is refused as a checkpoint, and a
    # new run may start there.
    "$tern" train --init tiny "${run[@]}" --steps 3 --save-every 1 --out "$work/full" > "$work/full.log" 2>&1 ||
        fail "3 steps: $(tail -1 "$work/full.log")"
    if [ $section = kill-first ]; then
        points="run.json@1 tokenizer@1 optimizer@1 losses.tsv@1 model.safetensors@1 loss.svg@1 cleanup@1"
    else
        points="run.json@2 tokenizer@2 optimizer@2 losses.tsv@2 model.safetensors@2 loss.svg@2 cleanup@2"
    fi
    for point in $points; do
        dir=$work/k-$point
        { TERN_TEST_HOOK=kill-after=$point "$tern" train --init tiny "${run[@]}" --steps 3 --save-every 1 \
            --out "$dir" > "$work/k.log" 2>&1; status=$?; } 2>/dev/null  # (no "Killed" notice)
        [ $status -eq 137 ] || { fail "kill after $point: status $status ($(tail -1 "$work/k.log"))"; continue; }
        if [ ! -f "$dir/model.safetensors" ]; then
            expect_error "killed after $point (before the first model): resume says there is no model" \
                "model.safetensors" "$tern" train --resume "$dir"
            "$tern" train --init tiny "${run[@]}" --steps 1 --out "$dir" > /dev/null 2>&1 &&
                pass "killed after $point: a new run may use the folder" || fail "killed after $point: the folder cannot be reused"
            continue
        fi
        [ -f "$dir/config.json" ] || fail "killed after $point: a model without config.json"
        at=$(step_of_model "$dir")
        "$tern" eval --model "$dir" --data "$work/v.bin" --batch 1 --seq 16 --batches 1 > /dev/null 2>&1 ||
            fail "killed after $point: the model does not load"
        printf 'garbage' > "$dir/model.safetensors.tmp.99999"   # what a kill mid-write leaves
        printf 'garbage' > "$dir/optimizer-9.safetensors.tmp.5.1"
        "$tern" train --resume "$dir" > "$work/kr.log" 2>&1 || { fail "killed after $point: resume: $(tail -1 "$work/kr.log")"; continue; }
        if [ "$(steps_of "$work/full.log" | tail -n +$((at + 1)))" = "$(steps_of "$work/kr.log")" ] &&
           [ "$(tail -n +2 "$dir/losses.tsv" | cut -f1 | tr '\n' ' ')" = "1 2 3 " ] &&
           [ -z "$(ls "$dir" | grep '\.tmp\.')" ] && [ "$(ls "$dir" | grep -c '^optimizer-')" = 1 ]; then
            pass "killed after $point (model at step $at): loads, resumes into the same steps, whole history, no temporary files"
        else
            fail "killed after $point: resumed $(steps_of "$work/kr.log" | tr '\n' ';') history $(cut -f1 "$dir/losses.tsv" | tr '\n' ' ') files $(ls "$dir" | tr '\n' ' ')"
        fi
    done
    ;;

consistent)
    "$tern" train --init tiny "${run[@]}" --steps 2 --save-every 1 --out "$work/ck" > /dev/null 2>&1 || fail "2 steps"
    "$tern" train --init tiny "${run[@]}" --steps 1 --out "$work/ck1" > /dev/null 2>&1 || fail "1 step"
    # optimizer state of another step under this step's name
    cp -r "$work/ck" "$work/mix" && cp "$work/ck1/optimizer-1.safetensors" "$work/mix/optimizer-2.safetensors"
    before=$(sums "$work/mix")
    expect_error "an optimizer state of another step is refused" "is at step 1 but model.safetensors at step 2" \
        "$tern" train --resume "$work/mix" --steps 3
    [ "$(sums "$work/mix")" = "$before" ] && pass "... and nothing is overwritten" || fail "the refused folder changed"
    cp -r "$work/ck" "$work/noopt" && rm "$work/noopt/optimizer-2.safetensors"
    expect_error "a missing optimizer state is refused" "optimizer-2.safetensors is missing" \
        "$tern" train --resume "$work/noopt" --steps 3
    cp -r "$work/ck" "$work/nanw" && poison "$work/nanw/model.safetensors" 64
    before=$(sums "$work/nanw")
    expect_error "non-finite weights are refused" "not finite" "$tern" train --resume "$work/nanw" --steps 3
    [ "$(sums "$work/nanw")" = "$before" ] && pass "... and nothing is overwritten" || fail "the refused folder changed"
    cp -r "$work/ck" "$work/nanm" && poison "$work/nanm/optimizer-2.safetensors" 64
    expect_error "non-finite moments are refused" "must be finite" "$tern" train --resume "$work/nanm" --steps 3
    # A step that makes the weights non-finite (the hook: its learning rate is FLT_MAX) stops
    # the run at its checkpoint; the last good checkpoint stays.
    TERN_TEST_HOOK=diverge-at=2 "$tern" train --init tiny "${run[@]}" --steps 3 --save-every 1 --out "$work/div" \
        > /dev/null 2> "$work/div.err"
    status=$?
    [ $status -eq 1 ] && [ "$(wc -l < "$work/div.err")" = 1 ] &&
        grep -q 'step 2: not saving .*: the weights at step 2 are not finite' "$work/div.err" &&
        grep -q 'keeps its checkpoint of step 1' "$work/div.err" && [ "$(step_of_model "$work/div")" = 1 ] &&
        [ -z "$(ls "$work/div" | grep -e '\.tmp\.' -e optimizer-2)" ] &&
        pass "a step that makes the weights non-finite stops the run; the checkpoint of step 1 stays" ||
        fail "non-finite step: status $status, $(cat "$work/div.err"), model at $(step_of_model "$work/div")"
    "$tern" train --resume "$work/div" > "$work/div.log" 2>&1 && grep -q '^step 3/3' "$work/div.log" &&
        pass "... and that checkpoint resumes" || fail "after the non-finite step: $(tail -1 "$work/div.log")"
    # losses.tsv read back strictly: a bad line is an error naming it.
    cp -r "$work/ck" "$work/badloss" && printf 'step\tloss\tval_loss\n1\t5.0\t-\n1\tnan\t-\n' > "$work/badloss/losses.tsv"
    expect_error "a bad losses.tsv is refused" "losses.tsv: line 3" "$tern" train --resume "$work/badloss" --steps 3
    # A long history is read in one pass (a quadratic reader would take hours here).
    cp -r "$work/ck" "$work/longloss"
    { printf 'step\tloss\tval_loss\n'; seq 1 400000 | sed 's/$/\t3.5\t-/'; } > "$work/longloss/losses.tsv"
    timeout 60 "$tern" train --resume "$work/longloss" --steps 3 > "$work/long.log" 2>&1 &&
        [ "$(tail -n +2 "$work/longloss/losses.tsv" | cut -f1 | tr '\n' ' ')" = "1 2 3 " ] &&
        pass "a 400000-line history is read and cut to the checkpoint's steps" ||
        fail "long history: $(tail -1 "$work/long.log")"
    ;;

signals)
    # SIGINT while a run is paused after step 2 (the hook): the step is done, a checkpoint
    # written, and the message says where.
    for sig in INT TERM; do
        TERN_TEST_HOOK=stop-at=2 "$tern" train --init tiny "${run[@]}" --steps 50 --out "$work/s-$sig" \
            > "$work/s.log" 2> "$work/s.err" &
        pid=$!
        wait_stopped $pid || fail "SIG$sig: the run did not pause"
        kill -$sig $pid; kill -CONT $pid
        wait $pid; status=$?
        want=$([ $sig = INT ] && echo 130 || echo 143)
        if [ $status -eq "$want" ] && grep -q "^tern: stopped by SIG$sig after step 2: the checkpoint is in $work/s-$sig" "$work/s.err" &&
           [ "$(step_of_model "$work/s-$sig")" = 2 ]; then
            pass "SIG$sig: the run stops after its step with a checkpoint, and says where"
        else
            fail "SIG$sig: status $status, stderr $(cat "$work/s.err")"
        fi
    done
    "$tern" train --resume "$work/s-INT" --stop-after 3 > "$work/s.log" 2>&1 && grep -q '^step 3/50' "$work/s.log" &&
        pass "the interrupted run resumes" || fail "resume after SIGINT: $(tail -1 "$work/s.log")"
    # Two signals: the second stops the process at once.
    TERN_TEST_HOOK=stop-at=2 "$tern" train --init tiny "${run[@]}" --steps 50 --save-every 1 --out "$work/s2" \
        > /dev/null 2> "$work/s2.err" &
    pid=$!
    wait_stopped $pid || fail "two signals: the run did not pause"
    kill -INT $pid; kill -TERM $pid; kill -CONT $pid
    wait $pid; status=$?
    # (the kernel delivers the two in either order; the process dies by the second)
    [ $status -eq 130 -o $status -eq 143 ] && grep -q 'second signal: stopping at once' "$work/s2.err" &&
        ! grep -q 'stopped by' "$work/s2.err" &&
        "$tern" eval --model "$work/s2" --data "$work/v.bin" --batch 1 --seq 16 --batches 1 > /dev/null 2>&1 &&
        pass "a second signal stops at once; the folder keeps a whole checkpoint" ||
        fail "two signals: status $status, $(cat "$work/s2.err")"
    # Without --out: stopped, nothing saved, said so.
    TERN_TEST_HOOK=stop-at=1 "$tern" train --init tiny "${run[@]}" --steps 50 > /dev/null 2> "$work/s3.err" &
    pid=$!
    wait_stopped $pid && kill -INT $pid && kill -CONT $pid
    wait $pid; status=$?
    [ $status -eq 130 ] && grep -q 'stopped by SIGINT after step 1; nothing saved (no --out)' "$work/s3.err" &&
        pass "SIGINT without --out stops and says nothing was saved" || fail "no --out: $status $(cat "$work/s3.err")"
    # The lock: a second trainer on a folder in use is refused, naming the holder's pid.
    TERN_TEST_HOOK=stop-at=2 "$tern" train --init tiny "${run[@]}" --steps 50 --save-every 1 --out "$work/lk" \
        > /dev/null 2>&1 &
    pid=$!
    wait_stopped $pid || fail "lock: the run did not pause"
    expect_error "a second trainer on the same --out is refused" "being written by another tern train (pid $pid holds" \
        "$tern" train --resume "$work/lk" --steps 3
    expect_error "a resume from a folder being written is refused" "being written by a tern train (pid $pid holds" \
        "$tern" train --resume "$work/lk" --steps 3 --out "$work/lk2"
    kill -KILL $pid; wait $pid 2>/dev/null
    "$tern" train --resume "$work/lk" --steps 2 > "$work/lk.log" 2>&1 && grep -q '^step 2/2' "$work/lk.log" &&
        pass "the lock of a dead trainer does not block the next" || fail "after the holder died: $(tail -1 "$work/lk.log")"
    ;;

files)
    mkfifo "$work/fifo"
    mkdir -p "$work/m"
    "$tern" train --init tiny "${run[@]}" --steps 1 --out "$work/m" > /dev/null 2>&1 || fail "1 step"
    expect_error "--data FIFO (train)" "pipe (FIFO)" "$tern" train --init tiny --data "$work/fifo" --steps 1
    expect_error "--val FIFO" "pipe (FIFO)" "$tern" train --init tiny --data "$work/d.bin" --val "$work/fifo" --steps 1 --val-every 1
    expect_error "--data FIFO (eval)" "pipe (FIFO)" "$tern" eval --model "$work/m" --data "$work/fifo"
    expect_error "--data a device" "device" "$tern" eval --model "$work/m" --data /dev/zero
    if command -v python3 > /dev/null; then
        python3 -c 'import socket,sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$work/sock"
        expect_error "--data a socket" "" "$tern" eval --model "$work/m" --data "$work/sock"
    fi
    for f in config.json model.safetensors vocab.json merges.txt losses.tsv run.json optimizer-1.safetensors; do
        rm -rf "$work/mf" && cp -r "$work/m" "$work/mf" && rm "$work/mf/$f" && mkfifo "$work/mf/$f"
        expect_error "$f a FIFO (resume)" "" "$tern" train --resume "$work/mf" --steps 2
        case $f in config.json|model.safetensors)
            expect_error "$f a FIFO (generate)" "pipe (FIFO)" "$tern" generate --model "$work/mf" --prompt x;; esac
    done
    mkdir -p "$work/tokfifo" && mkfifo "$work/tokfifo/vocab.json" "$work/tokfifo/merges.txt"
    expect_error "tokenizer files FIFOs (TERN_TOKENIZER_DIR)" "pipe (FIFO)" \
        env TERN_TOKENIZER_DIR="$work/tokfifo" "$tern" tokenize < /dev/null
    # --out checked before the first step.
    touch "$work/afile"
    err=$("$tern" train --init tiny "${run[@]}" --steps 1 --out "$work/afile" 2>&1)
    [[ "$err" == "tern: error: --out $work/afile exists and is not a folder" ]] &&
        pass "--out naming a file is an error before training" || fail "--out file: $err"
    # A file-size limit: the write fails (EFBIG, not SIGXFSZ), naming the file; no partial file.
    (ulimit -f 20000; "$tern" train --init tiny "${run[@]}" --steps 1 --out "$work/fsz" > /dev/null 2> "$work/fsz.err")
    status=$?
    [ $status -eq 1 ] && grep -q 'optimizer-1.safetensors.*File too large' "$work/fsz.err" &&
        [ -z "$(ls "$work/fsz" | grep -e '\.tmp\.' -e '^optimizer')" ] &&
        pass "a file-size limit is an error naming the file, leaving no partial file" ||
        fail "file-size limit: status $status, $(cat "$work/fsz.err"), files $(ls "$work/fsz")"
    # A full file system: the first checkpoint fits, the second does not; the first stays.
    mnt=$work/tmpfs; mkdir -p "$mnt"
    if mount -t tmpfs -o size=44m tmpfs "$mnt" 2>/dev/null; then
        mounted=$mnt
        "$tern" train --init tiny "${run[@]}" --steps 2 --save-every 1 --out "$mnt/run" > /dev/null 2> "$work/full.err"
        status=$?
        [ $status -eq 1 ] && grep -q 'optimizer-2.safetensors.*No space left on device' "$work/full.err" &&
            grep -q 'keeps its checkpoint of step 1' "$work/full.err" && [ -z "$(ls "$mnt/run" | grep '\.tmp\.')" ] &&
            [ "$(step_of_model "$mnt/run")" = 1 ] &&
            pass "a full disk is an error naming the file; the last checkpoint stays whole" ||
            fail "full disk: status $status, $(cat "$work/full.err"), files $(ls "$mnt/run")"
        "$tern" eval --model "$mnt/run" --data "$work/v.bin" --batch 1 --seq 16 --batches 1 > /dev/null 2>&1 ||
            fail "full disk: the kept checkpoint does not load"
        rm -rf "$mnt/run"
        mount -o remount,ro "$mnt"
        err=$("$tern" train --init tiny "${run[@]}" --steps 1 --out "$mnt/ro" 2>&1)
        [[ "$err" == "tern: error: cannot create folder $mnt/ro"*"Read-only file system" ]] &&
            pass "a read-only --out is an error before training" || fail "read-only: $err"
        umount "$mnt"; mounted=
    else
        echo "skipped: full and read-only tmpfs (mounting a tmpfs is not permitted here)"
    fi
    # A data file truncated while the run reads it: the run goes on (its tokens are in memory).
    cp "$work/d.bin" "$work/trunc.bin"
    TERN_TEST_HOOK=stop-at=1 "$tern" train --init tiny --data "$work/trunc.bin" --batch 2 --seq 16 --steps 4 \
        > "$work/trunc.log" 2>&1 &
    pid=$!
    wait_stopped $pid || fail "truncate: the run did not pause"
    truncate -s 1030 "$work/trunc.bin"; kill -CONT $pid
    wait $pid && grep -q '^step 4/4' "$work/trunc.log" && pass "a data file truncated during training: no SIGBUS" ||
        fail "truncated data: $(tail -1 "$work/trunc.log")"
    # stdout on a full device
    for cmd in "generate --model $work/m --prompt hello --tokens 4 --temperature 0" \
               "eval --model $work/m --data $work/v.bin --batch 1 --seq 16 --batches 2"; do
        err=$("$tern" $cmd 2>&1 > /dev/full); status=$?
        [ $status -eq 1 ] && [[ "$err" == "tern: error: writing the output (stdout): No space left on device" ]] &&
            pass "${cmd%% *} to a full device is an error" || fail "${cmd%% *} to /dev/full: $status $err"
    done
    ;;

messages)
    mkdir -p "$work/m"
    "$tern" train --init tiny "${run[@]}" --steps 1 --out "$work/m" > /dev/null 2>&1 || fail "1 step"
    bad=$work/$'bad\nname\e[31m'
    err=$("$tern" eval --model "$work/m" --data "$bad" 2>&1)
    [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && [[ "$err" == *'bad\nname\x1b[31m'* ]] &&
        pass "a path with a newline and an escape sequence is echoed escaped, on one line" || fail "escaped path: $err"
    expect_error "an option with a newline, on one line" 'unknown option' "$tern" train --init tiny $'--bo\ngus'
    expect_error "an unknown command with a newline, on one line" 'unknown command' "$tern" $'fro\nb'
    # A config naming fewer layers than the weights hold
    mkdir -p "$work/fewer" && cp "$work/m/"* "$work/fewer/"
    sed -i 's/"n_layer": *2/"n_layer": 1/' "$work/fewer/config.json"
    grep -q '"n_layer": *1' "$work/fewer/config.json" || fail "could not edit the config"
    expect_error "a config with fewer layers than the weights" "holds 2 layers but config.json names 1" \
        "$tern" generate --model "$work/fewer" --prompt x
    # A tokenizer with fewer ids than the model emits: an error before any output.
    # (the 256 byte tokens, written by python3 where it is installed)
    mkdir -p "$work/smalltok" && cp "$work/m/config.json" "$work/m/model.safetensors" "$work/smalltok/"
    if python3 - "$work/m/vocab.json" "$work/smalltok/vocab.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
json.dump({t: i for t, i in v.items() if i < 256}, open(sys.argv[2], "w"))
PY
    then
        printf '#version: 0.2\n' > "$work/smalltok/merges.txt"
        out=$("$tern" generate --model "$work/smalltok" --prompt x --tokens 4 2> "$work/st.err")
        status=$?
        [ $status -eq 1 ] && [ -z "$out" ] && grep -q 'the model emits 50257 ids but the tokenizer has 256' "$work/st.err" &&
            pass "a tokenizer with fewer ids than the model is an error before any output" ||
            fail "small tokenizer: status $status, stdout '$out', $(cat "$work/st.err")"
    else
        echo "skipped: a tokenizer with fewer ids (python3 not installed)"
    fi
    ;;
ranks)
    # Two MPI ranks paused after step 2; only rank 1 gets SIGINT: both stop after that step
    # (the ranks agree), rank 0 writes the checkpoint and says where.
    mpiexec=${3:?the MPI launcher}
    TERN_TEST_HOOK=stop-at=2 timeout 120 "$mpiexec" -n 2 "$tern" train --init tiny "${run[@]}" --steps 50 \
        --out "$work/r" > "$work/r.log" 2>&1 &
    mpid=$!
    ranks=()
    for _ in $(seq 600); do
        ranks=()
        for p in $(pgrep -f -- "--out $work/r"); do
            [ "$(cat /proc/$p/comm 2>/dev/null)" = tern ] && [ "$(awk '{print $3}' /proc/$p/stat)" = T ] && ranks+=("$p")
        done
        [ ${#ranks[@]} = 2 ] && break
        sleep 0.1
    done
    [ ${#ranks[@]} = 2 ] || fail "ranks: ${#ranks[@]} paused ranks"
    for p in "${ranks[@]}"; do
        tr '\0' '\n' < /proc/$p/environ | grep -qx 'OMPI_COMM_WORLD_RANK=1' && kill -INT $p
    done
    for p in "${ranks[@]}"; do kill -CONT $p; done
    wait $mpid
    if grep -q "^tern: stopped by SIGINT after step 2: the checkpoint is in $work/r" "$work/r.log" &&
       [ "$(step_of_model "$work/r")" = 2 ] && [ "$(grep -c '^step 3/' "$work/r.log")" = 0 ]; then
        pass "SIGINT to one rank: every rank stops after the same step, with a checkpoint"
    else
        fail "ranks: $(tail -3 "$work/r.log")"
    fi
    "$tern" train --resume "$work/r" --stop-after 3 > "$work/r1.log" 2>&1 &&
        grep -q '^resume: the run.s settings, changed: ranks 2 (--batch 2) -> 1 (--batch 4)' "$work/r1.log" &&
        grep -q '^step 3/50' "$work/r1.log" && pass "... and it resumes on one rank, the global batch kept" ||
        fail "resume on one rank: $(head -2 "$work/r1.log") $(tail -1 "$work/r1.log")"
    ;;
*)
    echo "unknown section $section"; exit 2;;
esac

echo "train state ($section): $failures failures"
[ $failures -eq 0 ]
