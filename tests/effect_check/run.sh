#!/usr/bin/env bash
# The compile-time check of the Tensor effect, proven on a stub handler:
#  1. every op defined: builds, links and runs;
#  2. one op missing: the link fails and names tern_broken_<op>;
#  3. one op with a wrong signature: the compile fails and names it.
# usage: run.sh CC SOURCE_DIR WORK_DIR
set -u
cc=$1 src=$2 work=$3
mkdir -p "$work"
flags=(-std=c11 -Wall -Wno-unused-parameter -I"$src/include" -I"$src/src" -DTERN_HANDLER=broken)
core=("$src/src/core/error.c")
fail=0

if "$cc" "${flags[@]}" -o "$work/complete" "$src/tests/effect_check/stub_handler.c" \
        "$src/src/handlers/op_table.c" "${core[@]}" >"$work/complete.log" 2>&1 && "$work/complete"; then
    echo "ok: a complete handler builds and links"
else
    echo "FAIL: the complete stub handler did not build or run:"; cat "$work/complete.log"; fail=1
fi

for op in matmul attention_backward adamw; do
    # The stubs are compiled with the op renamed away; the op table, as always, is not.
    if "$cc" "${flags[@]}" -Dtern_broken_$op=tern_broken_${op}_renamed_away -c -o "$work/stubs.o" \
            "$src/tests/effect_check/stub_handler.c" >"$work/missing.log" 2>&1 &&
       "$cc" "${flags[@]}" -o "$work/missing" "$work/stubs.o" "$src/src/handlers/op_table.c" \
            "${core[@]}" >>"$work/missing.log" 2>&1; then
        echo "FAIL: a handler without '$op' linked"; fail=1
    elif grep -q "undefined reference to \`tern_broken_$op'" "$work/missing.log"; then
        echo "ok: a handler without '$op' fails to link, naming tern_broken_$op"
    else
        echo "FAIL: missing '$op' failed without naming it:"; cat "$work/missing.log"; fail=1
    fi
done

if "$cc" "${flags[@]}" -c -o "$work/wrong.o" "$src/tests/effect_check/wrong_signature.c" \
        >"$work/wrong.log" 2>&1; then
    echo "FAIL: a wrong signature for 'fill' compiled"; fail=1
elif grep -q "conflicting types for .tern_broken_fill" "$work/wrong.log"; then
    echo "ok: a wrong signature fails to compile, naming tern_broken_fill"
else
    echo "FAIL: the wrong signature failed without naming it:"; cat "$work/wrong.log"; fail=1
fi
exit $fail
