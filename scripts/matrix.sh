#!/usr/bin/env bash
# make matrix: compiles the module as a dynamic module (nginx's configure
# --add-dynamic-module, then `make modules`: the module's objects and .so,
# no nginx binary) against each nginx below, twice: with --with-debug and
# without. The warnings are nginx's own (-W -Wall ... -Werror, which its
# configure adds for gcc and clang); nothing here relaxes them.
#
#   - the installed nginx-dev tree (NGINX_SRC, default /usr/share/nginx/src;
#     Debian 12 bookworm's is nginx 1.22.1);
#   - the nginx-dev of each Debian suite in NGINX_MATRIX_SUITES (default
#     "trixie sid"), downloaded, not installed (scripts/debian-archive.sh);
#   - each nginx source tree given as an argument (make matrix
#     NGINX_MATRIX_EXTRA="/path/a /path/b"): an nginx.org release or a
#     checkout of github.com/nginx/nginx (auto/configure).
#
# A Debian tree is configured with its conf_flags (NGX_CONF_FLAGS, what
# Debian's nginx is built with; --with-compat among them), Debian's flags
# for modules (CC_OPT/LD_OPT) before them, and --with-debug taken out for
# the build without debug. Another tree gets --with-compat
# --with-http_ssl_module (--with-debug for the debug build) and nginx's
# default compiler flags.
#
# Each build lives in build/matrix/<version>-<origin>-<debug|nodebug>/, a
# copy of the tree, configured again only when its flags, the tree, config
# or the module's header list change; otherwise make rebuilds what changed.
# Downloads are kept in the cache directory (scripts/debian-archive.sh).
# Prints a table at the end; exits non-zero if any build failed, after the
# compiler's errors of each failed build.
#   NGINX_MATRIX_JOBS   make -j (default: the number of CPUs)
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
. "$repo/scripts/debian-archive.sh"

out="$repo/build/matrix"
host_src=${NGINX_SRC:-/usr/share/nginx/src}
read -r -a suites <<< "${NGINX_MATRIX_SUITES-trixie sid}"
jobs=${NGINX_MATRIX_JOBS:-$(nproc 2>/dev/null || echo 2)}
cc_opt=${CC_OPT:--g -O2 -fstack-protector-strong -Wformat -Werror=format-security -fPIC -Wdate-time -D_FORTIFY_SOURCE=2}
ld_opt=${LD_OPT:--Wl,-z,relro -Wl,-z,now -fPIC}
# A make above this one (make matrix) is not this make's jobserver.
unset MAKEFLAGS MFLAGS MAKELEVEL
start_all=$SECONDS

# ---- the trees: path, kind (debian: has conf_flags; plain), origin (short
# name for the build directory), description
t_path=() t_kind=() t_origin=() t_desc=()
add_tree() { t_path+=("$1"); t_kind+=("$2"); t_origin+=("$3"); t_desc+=("$4"); }
unavailable=()    # trees that could not be had: "description: why"

if [ -f "$host_src/src/core/nginx.h" ]; then
    codename=$(. /etc/os-release 2>/dev/null; echo "${VERSION_CODENAME:-host}")
    pkg=$(dpkg-query -W -f '${Version}' nginx-dev 2>/dev/null)
    if [ "$host_src" = /usr/share/nginx/src ] && [ -n "$pkg" ]; then
        desc="Debian $codename nginx-dev $pkg (installed)"
    else
        desc="$host_src"; codename=host
    fi
    kind=plain; [ -f "$host_src/conf_flags" ] && kind=debian
    add_tree "$host_src" "$kind" "$codename" "$desc"
else
    unavailable+=("installed nginx-dev: no $host_src/src/core/nginx.h (apt-get install nginx-dev)")
fi

for suite in "${suites[@]}"; do
    say "matrix: the nginx-dev of Debian $suite"
    if tree=$(nginx_dev_tree "$suite"); then
        v=$(basename "${tree%/usr/share/nginx/src}")
        add_tree "$tree" debian "$suite" "Debian $suite nginx-dev ${v//%3a/:}"
    else
        unavailable+=("Debian $suite nginx-dev: not available (see above)")
    fi
done

n=0
for extra in "$@"; do
    n=$((n + 1))
    if [ -f "$extra/src/core/nginx.h" ] && { [ -x "$extra/configure" ] || [ -x "$extra/auto/configure" ]; }; then
        path=$(cd "$extra" && pwd)
        name=$(basename "$path" | tr -c 'A-Za-z0-9._+\n-' _)
        add_tree "$path" plain "extra$n-$name" "$path"
    else
        unavailable+=("$extra: not an nginx source tree (no src/core/nginx.h and configure)")
    fi
done

# ---- the builds: first every configure that is needed, $jobs at a time
# (configure runs one small compile after another and waits for each: more
# than one at once use the CPUs better), then each `make modules` in turn
# with make -j$jobs.
c_name=() c_tree=() c_version=() c_desc=() c_debug=() c_label=() c_result=() c_conf=() c_make=()
ncells=$(( ${#t_path[@]} * 2 ))
say "matrix: $ncells builds of the module (configure --add-dynamic-module, make -j$jobs modules) in build/matrix/"
mkdir -p "$out"

configure_cell() {    # CELL TREE STAMP ARGS...: a fresh copy of TREE, configured
    local cell=$1 tree=$2 stamp=$3 configure=./configure; shift 3
    find "$cell" -mindepth 1 -delete
    tar -C "$tree" --anchored --exclude=./.git --exclude=./objs --exclude=./Makefile -cf - . \
        | tar -C "$cell" -xf - || return 1
    [ -x "$cell/configure" ] || configure=auto/configure
    ( cd "$cell" && "$configure" "$@" ) > "$cell/configure.log" 2>&1 || return 1
    printf '%s\n' "$stamp" > "$cell/.matrix-stamp"
}

pending=()    # the cells to configure
for t in "${!t_path[@]}"; do
    tree=${t_path[$t]}
    version=$(nginx_tree_version "$tree")
    for debug in debug nodebug; do
        c=${#c_name[@]}
        name="$version-${t_origin[$t]}-$debug"
        cell="$out/$name"
        c_name+=("$name") c_tree+=("$tree") c_version+=("$version") c_desc+=("${t_desc[$t]}") c_debug+=("$debug")
        c_label+=("[$((c + 1))/$ncells] nginx $version, ${t_desc[$t]}, $( [ $debug = debug ] && echo 'with --with-debug' || echo 'without --with-debug')")
        c_result+=("") c_conf+=(-) c_make+=(-)
        mkdir -p "$cell"

        # The configure arguments. conf_flags is evaluated in the build
        # directory, as Debian's build does (sid's calls dpkg-buildflags,
        # whose -ffile-prefix-map names the current directory).
        if [ "${t_kind[$t]}" = debian ]; then
            mapfile -d '' flags < <(cd "$cell" && source_conf_flags "$tree/conf_flags")
            if [ ${#flags[@]} -eq 0 ]; then
                c_result[c]="FAILED (conf_flags)"
                say "matrix: ${c_label[c]}: FAILED: $tree/conf_flags gave no flags"
                continue
            fi
            args=(--with-cc-opt="$cc_opt" --with-ld-opt="$ld_opt")
            has_debug=
            for f in "${flags[@]}"; do
                if [ "$f" = --with-debug ]; then has_debug=1; [ $debug = debug ] && args+=("$f")
                else args+=("$f"); fi
            done
            [ $debug = nodebug ] || [ -n "$has_debug" ] || args+=(--with-debug)
        else
            args=(--with-compat --with-http_ssl_module)
            [ $debug = nodebug ] || args+=(--with-debug)
        fi
        args+=(--add-dynamic-module="$repo")
        printf '%s\0' "${args[@]}" > "$cell.args"

        stamp=$(printf '%s\n' "tree $tree $version" "${args[@]}" \
                "config $(sha256sum < "$repo/config")" \
                "headers $(cd "$repo" && ls module/*.hpp module/*/*.hpp 2>/dev/null | tr '\n' ' ')")
        if [ ! -f "$cell/objs/Makefile" ] || [ "$(cat "$cell/.matrix-stamp" 2>/dev/null)" != "$stamp" ]; then
            printf '%s\n' "$stamp" > "$cell.stamp"
            pending+=("$c")
        fi
    done
done

# Each configure in the background writes its seconds and status to
# $cell.configured; at most $jobs run at once.
running=0
for c in "${pending[@]}"; do
    if [ "$running" -ge "$jobs" ]; then wait -n; running=$((running - 1)); fi
    cell="$out/${c_name[c]}"
    tree=${c_tree[c]}
    say "matrix: ${c_label[c]}: configure"
    (
        start=$SECONDS
        mapfile -d '' args < "$cell.args"
        if configure_cell "$cell" "$tree" "$(cat "$cell.stamp")" "${args[@]}"; then status=ok; else status=FAILED; fi
        echo "$((SECONDS - start)) $status" > "$cell.configured"
        say "matrix: ${c_label[c]}: configure $status ($((SECONDS - start)) s)"
    ) &
    running=$((running + 1))
done
wait
for c in "${pending[@]}"; do
    cell="$out/${c_name[c]}"
    read -r secs status < "$cell.configured" 2>/dev/null || { secs=- status=FAILED; }
    c_conf[c]=$secs
    [ "$status" = ok ] || c_result[c]="FAILED (configure)"
    rm -f "$cell.configured" "$cell.stamp"
done

for c in "${!c_name[@]}"; do
    rm -f "$out/${c_name[c]}.args"
    [ -z "${c_result[c]}" ] || continue
    cell="$out/${c_name[c]}"
    say "matrix: ${c_label[c]}: make modules"
    start=$SECONDS
    if make -C "$cell" -f objs/Makefile -j"$jobs" modules > "$cell/make.log" 2>&1 \
       && [ -f "$cell/objs/ngx_http_idempotency_module.so" ]; then
        c_result[c]=ok
    else
        c_result[c]=FAILED
    fi
    c_make[c]=$((SECONDS - start))
    say "matrix: ${c_label[c]}: ${c_result[c]} (make ${c_make[c]} s)"
done

# Builds of trees no longer in the matrix.
for d in "$out"/*/; do
    [ -d "$d" ] || continue
    keep=; for name in "${c_name[@]}"; do [ "$d" = "$out/$name/" ] && keep=1; done
    [ -n "$keep" ] || rm -rf "$d"
done

# ---- the compiler's errors of the failed builds, then the table
failed=0
for c in "${!c_name[@]}"; do
    [ "${c_result[$c]}" = ok ] && continue
    failed=1
    cell="$out/${c_name[$c]}"
    echo
    if [ "${c_result[$c]}" = "FAILED (conf_flags)" ]; then
        echo "--- ${c_name[$c]}: bash could not evaluate ${c_desc[$c]}'s conf_flags"
    elif [ "${c_result[$c]}" = "FAILED (configure)" ]; then
        echo "--- ${c_name[$c]}: configure failed (build/matrix/${c_name[$c]}/configure.log):"
        tail -n 15 "$cell/configure.log"
    else
        echo "--- ${c_name[$c]}: make modules failed (build/matrix/${c_name[$c]}/make.log):"
        if grep -qE 'error:|undefined reference' "$cell/make.log"; then
            grep -E -B3 -A6 'error:|undefined reference|\*\*\*' "$cell/make.log" | head -n 120
        else
            tail -n 30 "$cell/make.log"
        fi
    fi
done
for u in "${unavailable[@]}"; do failed=1; echo; echo "--- $u"; done

echo
w=4; for d in "${c_desc[@]}"; do [ ${#d} -gt $w ] && w=${#d}; done
fmt="%-7s  %-${w}s  %-8s  %-19s  %9s  %6s\n"
printf "$fmt" nginx from build result configure make
for c in "${!c_name[@]}"; do
    printf "$fmt" "${c_version[c]}" "${c_desc[c]}" \
        "$( [ "${c_debug[c]}" = debug ] && echo debug || echo 'no debug')" \
        "${c_result[c]}" "${c_conf[c]}" "${c_make[c]}"
done
for u in "${unavailable[@]}"; do printf "$fmt" '?' "${u%%:*}" - 'FAILED (not built)' - -; done
echo "(seconds; configure - : the configured tree of the last run, make rebuilt what changed)"
echo "matrix: $((SECONDS - start_all)) s in all; $( [ $failed = 0 ] && echo 'every build passed' || echo 'FAILED')"
exit $failed
