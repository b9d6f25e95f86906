#!/usr/bin/env bash
# The compile-time check of the Tensor effect, proven on a stub handler whose entry points
# the seam generates (src/handlers/seam.h), as every handler's are:
#  1. every body defined: builds, links and runs (the entries validate, then call the body);
#  2. one body missing: the link fails and names broken_<op>;
#  3. one body with a wrong signature: the compile fails and names it.
# usage: run.sh CC SOURCE_DIR WORK_DIR
set -u
cc=$1 src=$2 work=$3
mkdir -p "$work"
flags=(-std=c11 -Wall -Wno-unused-parameter -D_POSIX_C_SOURCE=200809L -I"$src/include" -I"$src/src"
       -I"$src/tests/effect_check" -DTERN_HANDLER=broken)
seam=("$src/tests/effect_check/entries.c" "$src/src/handlers/op_table.c" "$src/src/handlers/validate.c"
      "$src/src/handlers/validate_llama.c"
      "$src/src/core/error.c" "$src/src/core/dtype.c")
fail=0

if "$cc" "${flags[@]}" -o "$work/complete" "$src/tests/effect_check/stub_handler.c" "${seam[@]}" -lm \
        >"$work/complete.log" 2>&1 && "$work/complete"; then
    echo "ok: a complete handler builds, links and runs"
else
    echo "FAIL: the complete stub handler did not build or run:"; cat "$work/complete.log"; fail=1
fi

for op in matmul attention_backward adamw; do
    # The stubs are compiled with the body renamed away; the entries, as always, are not.
    if "$cc" "${flags[@]}" -Dbroken_$op=broken_${op}_renamed_away -c -o "$work/stubs.o" \
            "$src/tests/effect_check/stub_handler.c" >"$work/missing.log" 2>&1 &&
       "$cc" "${flags[@]}" -o "$work/missing" "$work/stubs.o" "${seam[@]}" -lm >>"$work/missing.log" 2>&1; then
        echo "FAIL: a handler without '$op' linked"; fail=1
    elif grep -q "undefined reference to \`broken_$op'" "$work/missing.log"; then
        echo "ok: a handler without '$op' fails to link, naming broken_$op"
    else
        echo "FAIL: missing '$op' failed without naming it:"; cat "$work/missing.log"; fail=1
    fi
done

if "$cc" "${flags[@]}" -c -o "$work/wrong.o" "$src/tests/effect_check/wrong_signature.c" \
        >"$work/wrong.log" 2>&1; then
    echo "FAIL: a wrong signature for 'fill' compiled"; fail=1
elif grep -q "conflicting types for .broken_fill" "$work/wrong.log"; then
    echo "ok: a wrong signature fails to compile, naming broken_fill"
else
    echo "FAIL: the wrong signature failed without naming it:"; cat "$work/wrong.log"; fail=1
fi
exit $fail
