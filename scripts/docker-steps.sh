#!/usr/bin/env bash
# Runs the instructions of contrib/docker/Dockerfile without Docker, each
# stage in a root of its own, so that CI proves the file builds:
#     scripts/docker-steps.sh [DOCKERFILE [OUT]]    OUT defaults to build/docker-steps
#
# Needs root (chroot, mounts); re-runs itself with sudo when not root.
#
# The file is read, not copied: every stage's `FROM debian:SUITE` (the only
# base it accepts; SUITE is trixie) starts from an overlay of a pristine
# minbase root of that suite made with debootstrap, as Debian's images are
# (scripts/debian-root.sh: ${XDG_CACHE_HOME:-~/.cache}/nginx-idempotency/
# trixie-base, made once, upgraded weekly), whose policy-rc.d keeps services
# from starting as the images' does. Then, in order:
#   RUN     /bin/sh -c with the images' environment (PATH, HOME=/root; no
#           terminal), in the WORKDIR, under a 30-minute timeout;
#   COPY    from the build context (the repository's working tree; named
#           paths only) or --from an earlier stage's root, as Docker copies
#           (a directory's contents, a file into a directory ending in /);
#   WORKDIR, ENV KEY=VALUE (no quotes);
# CMD, ENTRYPOINT, EXPOSE, LABEL and STOPSIGNAL describe the image and are
# skipped; any other instruction or form (exec-form RUN, heredocs, COPY
# --chown) is refused, so the file cannot grow a step that is not run here.
# A failing RUN ends the run with its log's tail. Last, in the final stage:
# `nginx -T` loads the module through /etc/nginx/modules-enabled/.
#
# Logs in OUT/NN-*.log. The stages' overlays are unmounted and removed on
# every exit. Downloaded .debs are kept in the cache
# (trixie-archives/docker-steps) for the next run. Environment:
# DEBIAN_MIRROR, DEBIAN_SECURITY_MIRROR, ROOT_REFRESH (scripts/debian-root.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
prog=docker-steps

dockerfile=${1:-contrib/docker/Dockerfile}
out=${2:-build/docker-steps}
case $out in /*) ;; *) out=$repo/$out ;; esac
suite=trixie

if [ "$(id -u)" -ne 0 ]; then
    echo "$prog: not root, running again with sudo" >&2
    exec sudo env NGINX_IDEM_CACHE="${NGINX_IDEM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nginx-idempotency}" \
        ROOT_REFRESH="${ROOT_REFRESH:-}" DEBIAN_MIRROR="${DEBIAN_MIRROR:-}" \
        DEBIAN_SECURITY_MIRROR="${DEBIAN_SECURITY_MIRROR:-}" "$0" "$dockerfile" "$out"
fi

. scripts/debian-root.sh
[ -r "$dockerfile" ] || die "no $dockerfile"

# --- the file ----------------------------------------------------------------

# One instruction per element: continuation lines joined (the backslash
# removed, as Docker does), comments and blank lines dropped.
instr=() args=() lines=()
parse() {
    local line cur='' first=0 n=0
    while IFS= read -r line || [ -n "$line" ]; do
        n=$((n + 1))
        line=${line%$'\r'}
        [[ $line =~ ^[[:space:]]*(#.*)?$ ]] && continue
        [ -n "$cur" ] || first=$n
        if [[ $line =~ \\[[:space:]]*$ ]]; then
            cur+=${line%\\*}
            continue
        fi
        cur+=$line
        [[ $cur =~ ^[[:space:]]*([A-Za-z]+)[[:space:]]+(.*[^[:space:]])[[:space:]]*$ ]] ||
            die "$dockerfile:$first: not an instruction: $cur"
        instr+=("${BASH_REMATCH[1]^^}") args+=("${BASH_REMATCH[2]}") lines+=("$first")
        cur=''
    done < "$dockerfile"
    [ -z "$cur" ] || die "$dockerfile:$first: the last instruction ends in a backslash"
}
parse

# Refused before anything runs.
for i in "${!instr[@]}"; do
    at="$dockerfile:${lines[$i]}"
    case ${instr[$i]} in
    FROM) [[ ${args[$i]} =~ ^debian:$suite([[:space:]]+[Aa][Ss][[:space:]]+[A-Za-z0-9_.-]+)?$ ]] ||
              die "$at: FROM ${args[$i]}: only debian:$suite is run here (a debootstrapped $suite root)" ;;
    RUN)  [[ ${args[$i]} =~ ^(\[[[:space:]]*\"|\<\<|--) ]] && die "$at: only the shell form of RUN is run here" ;;
    COPY) [[ ${args[$i]} =~ ^(\[[[:space:]]*\"|\<\<) ]] && die "$at: only the plain form of COPY is run here" ;;
    WORKDIR|ENV|CMD|ENTRYPOINT|EXPOSE|LABEL|STOPSIGNAL) ;;
    *)    die "$at: ${instr[$i]} is not run here (FROM, RUN, COPY, WORKDIR, ENV; metadata is skipped)" ;;
    esac
done
[ "${instr[0]:-}" = FROM ] || die "$dockerfile: the first instruction is not FROM"

# --- the stages --------------------------------------------------------------

stages=$out/stages
cleanup() {
    root_unmount_all "$stages"
    [ -z "$(mounted_under "$stages")" ] && rm -rf --one-file-system "$stages"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

root_mirrors
root_tools
root_base "$suite"
archives=$idem_cache/$suite-archives/docker-steps
mkdir -p "$archives/partial"

rm -rf --one-file-system "$out"
mkdir -p "$stages"

stage=-1 root='' workdir=/ env=()
stage_root=() stage_name=()
from() {  # FROM debian:SUITE [AS NAME]
    local name
    read -r _ _ name <<<"$1"
    stage=$((stage + 1))
    root_overlay "$base" "$stages/$stage"
    root=$stages/$stage/root
    root_mount "$root"
    mount --bind "$archives" "$root/var/cache/apt/archives"
    stage_root+=("$root") stage_name+=("${name:-}")
    workdir=/ env=()
}

# The root of the stage named or numbered $1.
stage_by() {
    local i
    for i in "${!stage_root[@]}"; do
        if [ "$1" = "$i" ] || [ "$1" = "${stage_name[$i]}" ]; then printf '%s\n' "${stage_root[$i]}"; return; fi
    done
    die "$at: no earlier stage $1"
}

# A path of the image: absolute, or below the WORKDIR.
in_image() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "${workdir%/}/$1" ;; esac; }

copy() {  # COPY [--from=STAGE] SRC... DEST
    local words from='' src_root=$repo dest w s
    read -r -a words <<<"$1"
    case ${words[0]} in
    --from=*) from=${words[0]#--from=}; words=("${words[@]:1}"); src_root=$(stage_by "$from") ;;
    --*)      die "$at: COPY ${words[0]} is not run here" ;;
    esac
    [ ${#words[@]} -ge 2 ] || die "$at: COPY needs a source and a destination"
    dest=$(in_image "${words[-1]}")
    unset 'words[-1]'
    for w in "${words[@]}"; do
        [[ $w =~ [][*?] ]] && die "$at: COPY $w: patterns are not run here"
        if [ -z "$from" ]; then
            [[ $w =~ (^|/)\.\.(/|$) ]] && die "$at: COPY $w: outside the context"
            [ "${w%/}" != . ] || die "$at: COPY of the whole context is not run here: name the paths"
        fi
        s=$src_root/${w#/}
        [ -e "$s" ] || die "$at: COPY $w: no such file"
        if [ -d "$s" ]; then
            mkdir -p "$root$dest"
            cp -R --preserve=mode,timestamps "$s/." "$root$dest/"
        elif [ ${#words[@]} -gt 1 ] || [[ $dest == */ ]]; then
            mkdir -p "$root$dest"
            cp --preserve=mode,timestamps "$s" "$root$dest/"
        else
            mkdir -p "$(dirname "$root$dest")"
            cp --preserve=mode,timestamps "$s" "$root$dest"
        fi
    done
}

run() {  # RUN COMMAND (shell form)
    local log=$1 cmd=$2
    mkdir -p "$root$workdir"
    if ! timeout --foreground -k 10 1800 chroot "$root" /usr/bin/env -i \
            PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "${env[@]}" \
            /bin/sh -c 'cd "$1" && exec /bin/sh -c "$2"' sh "$workdir" "$cmd" < /dev/null > "$log" 2>&1; then
        tail -n 40 "$log" >&2
        die "$at: RUN failed (log: $log)"
    fi
}

for i in "${!instr[@]}"; do
    at="$dockerfile:${lines[$i]}"
    a=${args[$i]}
    printf -v n '%02d' "$i"
    case ${instr[$i]} in
    FROM)    from "$a"; step "$at: FROM $a (stage $stage: $root)" ;;
    RUN)     step "$at: RUN ${a:0:100}"; run "$out/$n-stage$stage-run.log" "$a" ;;
    COPY)    step "$at: COPY $a"; copy "$a" ;;
    WORKDIR) workdir=$(in_image "$a"); mkdir -p "$root$workdir" ;;
    ENV)     for w in $a; do
                 [[ $w =~ ^[A-Za-z_][A-Za-z0-9_]*=[^\"\'\$]*$ ]] || die "$at: ENV $w: only KEY=VALUE without quotes is run here"
                 env+=("$w")
             done ;;
    *)       step "$at: ${instr[$i]} $a (describes the image: skipped)" ;;
    esac
done

# --- the image ---------------------------------------------------------------

step "nginx -T in the final stage"
if ! timeout 60 chroot "$root" /usr/sbin/nginx -T > "$out/nginx-T.log" 2>&1 ||
   ! grep -q '^load_module modules/ngx_http_idempotency_module.so;' "$out/nginx-T.log"; then
    tail -n 20 "$out/nginx-T.log" >&2
    die "the image's nginx does not load the module through modules-enabled (log: $out/nginx-T.log)"
fi
echo "ok - the image's nginx loads ngx_http_idempotency_module ($(chroot "$root" dpkg-query -W -f='nginx ${Version}' nginx))"
step "done"
