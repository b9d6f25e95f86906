#!/usr/bin/env bash
# test_pkg_config.sh BUILD CC: installs BUILD into a temporary prefix and links a program
# against it with `pkg-config --cflags --libs tern` alone (no --static), then runs it.
set -u
build=$1 cc=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log" 2>&1 ||
    fail "cmake --install: $(tail -3 "$work/install.log")"
pc=$(dirname "$(find "$work/prefix" -name tern.pc | head -1)")
[ -n "$pc" ] || fail "no tern.pc installed"
cat > "$work/prog.c" <<'C'
#include <stdio.h>
#include <tern/handlers.h>
#include <tern/tern.h>
int main(void) {
    size_t n = 0;
    const char *const *names = tern_handler_names(&n);
    if (n == 0 || tern_handler_ops(names[0]) == NULL) return 1;
    printf("tern %s, %zu handlers, first %s\n", tern_version(), n, names[0]);
    return 0;
}
C
flags=$(PKG_CONFIG_PATH="$pc" pkg-config --cflags --libs tern) || fail "pkg-config --cflags --libs tern"
"$cc" -o "$work/prog" "$work/prog.c" $flags > "$work/cc.log" 2>&1 || fail "linking with '$flags': $(head -5 "$work/cc.log")"
out=$("$work/prog") || fail "the program failed: $out"
[[ "$out" == "tern "*" handlers, first cpu" ]] || fail "the program printed: $out"
echo "PASS: a program links with pkg-config --cflags --libs tern and runs ($out)"
