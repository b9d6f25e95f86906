#!/usr/bin/env bash
# The tern program on a Llama-family folder (the fixture llama-tiny-a: transformers'
# save_pretrained output with its tokenizer.json), on the cpu handler: the family is picked
# from config.json, and generate, eval, train and info agree with the fixture's float64
# references (expected.json, made by PyTorch + transformers). usage: test_llama_cli.sh
# TERN_BINARY   (TERN_SHARED_DIR set by ctest; python3 reads expected.json)
set -u
tern=$1
shared=${TERN_SHARED_DIR:?}
fixture=$shared/fixtures/llama-tiny-a
work=$(mktemp -d /tmp/tern-llama-cli-XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=2 TERN_BACKEND=cpu
failures=0
pass() { echo "ok: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
expect() { python3 -c "import json,sys; e=json.load(open('$fixture/expected.json')); print($1)"; }

# ---- generate: greedy ids and text equal transformers' continuation ----
want=$(expect "' '.join(map(str, e['greedy'][0]['new_ids']))")
prompt=$(expect "e['greedy'][0]['prompt']")
out=$("$tern" generate --model "$fixture" --prompt "$prompt" --tokens 32 --temperature 0 --ids --no-stop 2>&1)
if [[ "$(echo "$out" | sed -n 1p)" == "backend: cpu ("*")" ]] && [ "$(echo "$out" | sed -n 2p)" = "$want" ]; then
    pass "generate --ids on a Llama folder matches the fixture's greedy continuation"
else
    fail "generate --ids printed: $out (want $want)"
fi
"$tern" generate --model "$fixture" --prompt "$prompt" --tokens 32 --temperature 0 --no-stop > "$work/text" 2>&1
want_text=$(expect "e['greedy'][0]['prompt'] + e['greedy'][0]['text']")
got_text=$(tail -n +2 "$work/text")
[ "$got_text" = "$want_text" ] && pass "generate prints the continuation's text (tokenizer.json)" ||
    fail "generate text: '$got_text', want '$want_text'"
a=$("$tern" generate --model "$fixture" --prompt "The jury" --tokens 12 --temperature 0.9 --top-k 50 --seed 7 --ids --no-stop | sed -n 2p)
b=$("$tern" generate --model "$fixture" --prompt "The jury" --tokens 12 --temperature 0.9 --top-k 50 --seed 7 --ids --no-stop | sed -n 2p)
c=$("$tern" generate --model "$fixture" --prompt "The jury" --tokens 12 --temperature 0.9 --top-k 50 --seed 8 --ids --no-stop | sed -n 2p)
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" != "$c" ] && [ "$(echo "$a" | wc -w)" = 12 ] &&
    pass "sampling is reproducible from its seed" || fail "sampling: seed 7 gave '$a' then '$b'; seed 8 gave '$c'"

# ---- eval: the mean loss of llm.c batches 0, 1, 2 of data.bin ----
"$tern" eval --model "$fixture" --data "$fixture/data.bin" --batch 4 --seq 64 --batches 3 > "$work/eval" 2>&1 ||
    fail "eval failed: $(tail -2 "$work/eval")"
python3 - "$work/eval" "$fixture/expected.json" <<'EOF' && pass "eval's batch losses match the fixture's (1e-4 relative)" || fail "eval: $(cat "$work/eval")"
import json, re, sys
got = [float(m) for m in re.findall(r"^batch \d+: loss ([0-9.]+)$", open(sys.argv[1]).read(), re.M)]
want = json.load(open(sys.argv[2]))["cli"]["eval_losses"]
sys.exit(0 if len(got) == len(want) and all(abs(g - w) <= 1e-4 * w for g, w in zip(got, want)) else 1)
EOF

# ---- train: three AdamW steps on batches 0, 1, 2, as transformers took them ----
"$tern" train --model "$fixture" --data "$fixture/data.bin" --batch 4 --seq 64 --steps 3 --lr 1e-3 \
    --beta1 0.9 --beta2 0.95 --eps 1e-8 --wd 0.1 --clip 0 --out "$work/trained" > "$work/train" 2>&1 ||
    fail "train failed: $(tail -2 "$work/train")"
# the step lines print 4 decimals: within 1e-4 of the reference (rounding 5e-5, then the f32 path)
python3 - "$work/train" "$fixture/expected.json" <<'EOF' && pass "train's step losses match the fixture's three AdamW steps" || fail "train: $(cat "$work/train")"
import json, re, sys
got = [float(m) for m in re.findall(r"^step \d+/3 \| loss ([0-9.]+)", open(sys.argv[1]).read(), re.M)]
want = json.load(open(sys.argv[2]))["cli"]["train_losses"]
sys.exit(0 if len(got) == 3 and all(abs(g - w) <= 1e-4 for g, w in zip(got, want)) else 1)
EOF
# the checkpoint is a Llama folder again: tern opens it, with the tokenizer copied along
for f in config.json model.safetensors tokenizer.json; do
    [ -f "$work/trained/$f" ] || fail "the checkpoint has no $f"
done
out=$("$tern" generate --model "$work/trained" --prompt "$prompt" --tokens 4 --temperature 0 --ids --no-stop 2>&1)
[ "$(echo "$out" | sed -n 2p | wc -w)" = 4 ] && pass "the trained checkpoint generates" || fail "generate from the checkpoint: $out"

# ---- training state: a run stopped and resumed takes the uninterrupted run's steps ----
run=(--model "$fixture" --data "$fixture/data.bin" --batch 2 --seq 32 --lr 2e-3 --warmup 2 --schedule cosine
     --wd 0.1 --clip 1 --seed 3)
# step lines without their timing ("step 3/4 | loss 8.1234 | lr ... | norm ...")
steps() { sed -n 's/^\(step [0-9]*\/[0-9]* | loss [0-9.]* | lr [^|]*| norm [0-9.]*\) .*/\1/p' "$1"; }
"$tern" train "${run[@]}" --steps 4 > "$work/whole" 2>&1 || fail "train 4 steps: $(tail -2 "$work/whole")"
"$tern" train "${run[@]}" --steps 4 --stop-after 2 --out "$work/part" > "$work/first" 2>&1 ||
    fail "train --stop-after 2: $(tail -2 "$work/first")"
for f in config.json model.safetensors optimizer-2.safetensors run.json losses.tsv tokenizer.json; do
    [ -f "$work/part/$f" ] || fail "the checkpoint of --stop-after 2 has no $f"
done
"$tern" train --resume "$work/part" > "$work/second" 2>&1 || fail "resume: $(tail -2 "$work/second")"
if [ "$(steps "$work/whole" | wc -l)" = 4 ] && [ "$(steps "$work/first"; steps "$work/second")" = "$(steps "$work/whole")" ]; then
    pass "a Llama run stopped after step 2 and resumed prints the uninterrupted run's steps exactly"
else
    fail "resume: whole run $(steps "$work/whole" | tr '\n' ';'), stopped and resumed $(steps "$work/first" | tr '\n' ';') $(steps "$work/second" | tr '\n' ';')"
fi
[ -f "$work/part/optimizer-4.safetensors" ] && [ ! -f "$work/part/optimizer-2.safetensors" ] &&
    [ "$(wc -l < "$work/part/losses.tsv")" -ge 4 ] && pass "the resumed checkpoint holds step 4 and its history" ||
    fail "the resumed checkpoint: $(ls "$work/part")"
out=$("$tern" train --resume "$work/part" --steps 6 --lr 1e-3 2>&1)
[ $? -eq 1 ] && [ "$(echo "$out" | wc -l)" = 1 ] && [[ "$out" == *"--lr 0.001"*"0.002"* ]] &&
    pass "a resume with another --lr is a one-line error naming both values" || fail "resume with --lr: '$out'"
"$tern" train "${run[@]}" --steps 1 --save-dtype bf16 --out "$work/half" > "$work/half.log" 2>&1 &&
    python3 - "$work/half/model.safetensors" <<'EOF' && pass "--save-dtype bf16 writes a bf16 checkpoint" || fail "--save-dtype bf16: $(tail -2 "$work/half.log")"
import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
sys.exit(0 if all(v["dtype"] == "BF16" for k, v in h.items() if k != "__metadata__") else 1)
EOF
out=$("$tern" generate --model "$work/half" --prompt "$prompt" --tokens 2 --temperature 0 --ids --no-stop 2>&1) &&
    pass "the bf16 checkpoint loads and generates" || fail "generate from the bf16 checkpoint: $out"
out=$("$tern" train "${run[@]}" --steps 1 --recompute gelu 2>&1)
[ $? -eq 1 ] && [ "$(echo "$out" | wc -l)" = 1 ] && [[ "$out" == "tern: error: "*"--recompute"* ]] &&
    pass "--recompute (GPT-2's) is a one-line error for the Llama family" || fail "--recompute: '$out'"

# ---- info names the family, with the parameter count of the file's tensors ----
out=$("$tern" info --model "$fixture" 2>&1)
count=$(python3 - "$fixture/model.safetensors" <<'EOF'
import json, struct, sys
f = open(sys.argv[1], "rb"); n = struct.unpack("<Q", f.read(8))[0]; h = json.loads(f.read(n))
total = 0
for k, v in h.items():
    if k != "__metadata__":
        p = 1
        for d in v["shape"]: p *= d
        total += p
print(total)
EOF
)
echo "$out" | grep -q "^model: .* (llama)$" && echo "$out" | grep -q "^  parameters: $count$" &&
    pass "info names the family and counts $count parameters" || fail "info printed: $out (want $count parameters)"

# ---- one-line errors for what the family does not have ----
bad=$work/bad
mkdir -p "$bad"
cp "$fixture/model.safetensors" "$fixture/tokenizer.json" "$bad/"
sed 's/"model_type": "llama"/"model_type": "llama", "use_sliding_window": true/' "$fixture/config.json" > "$bad/config.json"
out=$("$tern" generate --model "$bad" --prompt hi --tokens 2 2>&1)
status=$?
[ $status -eq 1 ] && [ "$(echo "$out" | wc -l)" = 1 ] && [[ "$out" == "tern: error: "*"sliding"* ]] &&
    pass "sliding-window attention is a one-line error" || fail "sliding window: status $status, '$out'"
sed 's/"model_type": "llama"/"model_type": "mixtral"/' "$fixture/config.json" > "$bad/config.json"
out=$("$tern" eval --model "$bad" --data "$fixture/data.bin" 2>&1)
status=$?
[ $status -eq 1 ] && [ "$(echo "$out" | wc -l)" = 1 ] && [[ "$out" == "tern: error: "* ]] &&
    pass "an unknown model_type is a one-line error" || fail "unknown model_type: status $status, '$out'"
out=$("$tern" train --model "$fixture" --data "$fixture/data.bin" --steps 1 --resume "$work/trained" 2>&1)
[ $? -eq 1 ] && [[ "$out" == "tern: error: "* ]] && pass "train refuses a second model source in one line" ||
    fail "train with --model and --resume: '$out'"

if [ $failures -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all llama cli checks passed"
