#!/usr/bin/env bash
# check-layers-selftest.sh — the layer check catches what it is for: in a
# scratch tree with this repository's floor table, a core file (key.cpp)
# that calls a function of a handler (access.cpp) fails the call check, one
# that includes the handler's header fails the include check, and the same
# two files without either pass. Run by `make layers`.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/module" "$tmp/objs/module"

plant() {  # $1: what key.cpp does beyond its own function
    rm -f "$tmp"/module/* "$tmp"/objs/module/*
    printf 'int access_answer(int x) { return x + 1; }\n' > "$tmp/module/access.cpp"
    printf '#pragma once\nint access_answer(int x);\n' > "$tmp/module/access.hpp"
    case $1 in
    clean)   printf 'int key_length(int x) { return x * 2; }\n' ;;
    call)    printf 'int access_answer(int x);\nint key_length(int x) { return access_answer(x) * 2; }\n' ;;
    include) printf '#include "access.hpp"\nint key_length(int x) { return x * 2; }\n' ;;
    esac > "$tmp/module/key.cpp"
    for f in access key; do
        g++ -c -o "$tmp/objs/module/$f.o" "$tmp/module/$f.cpp"
    done
}

check() {  # $1: the planted case, $2: 0 if it must pass, 1 if it must fail, $3: the offence's words
    plant "$1"
    set +e
    out=$("$here/scripts/check-layers.pl" --root "$tmp" --design "$here/docs/design.md" --calls "$tmp/objs" 2>&1)
    rc=$?
    set -e
    if [ "$rc" != "$2" ] || ! grep -q -- "$3" <<<"$out"; then
        echo "check-layers-selftest: the $1 case: exit $rc, expected $2 with \"$3\":" >&2
        echo "$out" >&2
        exit 1
    fi
}

check clean 0 'every include and call goes down or sideways'
check call 1 'module/key.cpp calls access_answer(int) of module/access.cpp: core calls handlers'
check include 1 'module/key.cpp:1: #include "access.hpp": core includes handlers'
echo "check-layers-selftest: a planted upward call and include are caught, the clean tree passes"
