# Sourced by scripts/matrix.sh, scripts/newest-nginx.sh and
# scripts/store-server.sh: Debian suites
# other than the machine's own, through apt with a private state (its own
# sources.list, package lists and archive cache under the cache directory),
# so the machine's /etc/apt, its lists and its installed packages are never
# touched. What is fetched is verified by apt against the suite's signed
# InRelease (debian-archive-keyring).
#
#   NGINX_IDEM_CACHE          the cache directory
#                             (default ${XDG_CACHE_HOME:-~/.cache}/nginx-idempotency)
#   DEBIAN_MIRROR             default http://deb.debian.org/debian
#   DEBIAN_LISTS_MAX_AGE      a suite's package lists are fetched again when
#                             older than this many minutes (default 1440);
#                             0 fetches them on every run
#
# Functions: suite_apt_get, suite_apt_cache, suite_update, suite_candidate,
# suite_source_uris, suite_source_version, suite_source_tree,
# nginx_dev_tree, source_conf_flags, nginx_tree_version, say.

idem_cache=${NGINX_IDEM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nginx-idempotency}
debian_mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
debian_keyring=/usr/share/keyrings/debian-archive-keyring.gpg
debian_lists_max_age=${DEBIAN_LISTS_MAX_AGE:-1440}

say() { printf '%s\n' "$*" >&2; }

# The private apt state of a suite: sets the array apt_opts.
_suite_state() {
    local suite=$1 d="$idem_cache/apt/$1"
    mkdir -p "$d/lists/partial" "$d/cache/archives/partial" "$d/empty"
    [ -e "$d/status" ] || : > "$d/status"
    # Only the Packages and Sources indexes (no translations, Contents or
    # DEP-11 files), from the archive's signed InRelease.
    local opts="signed-by=$debian_keyring"
    printf 'deb [%s targets=Packages] %s %s main\ndeb-src [%s targets=Sources] %s %s main\n' \
        "$opts" "$debian_mirror" "$suite" "$opts" "$debian_mirror" "$suite" > "$d/sources.list.new"
    cmp -s "$d/sources.list.new" "$d/sources.list" 2>/dev/null \
        && rm -f "$d/sources.list.new" || mv -f "$d/sources.list.new" "$d/sources.list"
    # The machine's update hooks (appstream, PackageKit) are for its own lists.
    printf '#clear APT::Update::Pre-Invoke;\n#clear APT::Update::Post-Invoke;\n#clear APT::Update::Post-Invoke-Success;\n' > "$d/apt.conf"
    apt_opts=(-c "$d/apt.conf"
              -o Dir::Etc::SourceList="$d/sources.list" -o Dir::Etc::SourceParts="$d/empty"
              -o Dir::Etc::Preferences="$d/empty/none" -o Dir::Etc::PreferencesParts="$d/empty"
              -o Dir::State::Lists="$d/lists" -o Dir::State::status="$d/status"
              -o Dir::State::extended_states="$d/extended_states" -o Dir::Cache="$d/cache")
    # As root apt would hand downloads to the _apt user, who cannot write
    # into a private directory under root's home.
    [ "$(id -u)" -ne 0 ] || apt_opts+=(-o APT::Sandbox::User=root)
}

suite_apt_get()   { local suite=$1; shift; _suite_state "$suite"; apt-get -q "${apt_opts[@]}" "$@"; }
suite_apt_cache() { local suite=$1; shift; _suite_state "$suite"; apt-cache "${apt_opts[@]}" "$@"; }

# Fetches the suite's package lists when there are none yet, when they are
# older than DEBIAN_LISTS_MAX_AGE minutes, or when the sources.list changed.
# A failed fetch with lists already there only warns.
suite_update() {
    local suite=$1 d="$idem_cache/apt/$1" stamp
    _suite_state "$suite"
    stamp="$d/lists/updated"
    if [ -f "$stamp" ] && [ "$stamp" -nt "$d/sources.list" ] \
       && [ -z "$(find "$stamp" -mmin +"$debian_lists_max_age" 2>/dev/null)" ] \
       && [ "$debian_lists_max_age" != 0 ]; then
        return 0
    fi
    local start=$SECONDS
    say "apt: fetching the package lists of Debian $suite ($debian_mirror)"
    if apt-get -q "${apt_opts[@]}" update > "$d/update.log" 2>&1 \
       && ! grep -q '^E: ' "$d/update.log"; then
        touch "$stamp"
        say "apt: $suite lists fetched in $((SECONDS - start)) s"
    elif [ -f "$stamp" ]; then
        say "apt: WARNING: fetching $suite's lists failed; using the ones of $(date -r "$stamp" '+%F %R'):"
        grep '^[EW]: ' "$d/update.log" >&2
    else
        say "apt: fetching $suite's package lists failed:"
        tail -20 "$d/update.log" >&2
        return 1
    fi
}

# The version of a binary package the suite serves (its candidate).
suite_candidate() {
    suite_apt_cache "$1" policy "$2" 2>/dev/null | sed -n 's/^  Candidate: //p' | grep -v '(none)'
}

# The files of a source package in the suite (PKG: its newest; PKG=VERSION),
# one per line: URI NAME SIZE SHA256
suite_source_uris() {
    suite_apt_get "$1" --print-uris source "$2" 2>/dev/null \
        | sed -n "s/^'\([^']*\)' \([^ ]*\) \([0-9]*\) SHA256:\([0-9a-f]*\)$/\1 \2 \3 \4/p"
}

# The newest version (epoch included) of the source package PKG the
# suite's Sources index lists.
suite_source_version() {
    local v newest=
    while read -r v; do
        if [ -z "$newest" ] || dpkg --compare-versions "$v" gt "$newest"; then newest=$v; fi
    done < <(suite_apt_cache "$1" showsrc "$2" 2>/dev/null | sed -n 's/^Version: //p')
    [ -n "$newest" ] && printf '%s\n' "$newest"
}

# The source package PKG=VERSION of the suite, downloaded into DIR/dl and
# unpacked into DIR/tree (logs in DIR): the whole source package (.dsc,
# orig tarball, Debian's debian.tar.xz; dpkg-source -x, Debian's patches
# applied), or else the orig tarball alone (the upstream release as Debian
# took it in), checked against the SHA256 of the suite's signed Sources
# index. Sets source_kind to source-package or orig-tarball.
suite_source_tree() {
    local suite=$1 pkg=$2 version=$3 dir=$4 orig orig_sha
    source_kind=
    rm -rf "$dir/tree" && mkdir -p "$dir/dl" || return 1
    if ( cd "$dir/dl" && suite_apt_get "$suite" source --download-only "$pkg=$version" ) > "$dir/download.log" 2>&1; then
        if dpkg-source -x "$dir/dl/${pkg}_${version#*:}.dsc" "$dir/tree" > "$dir/unpack.log" 2>&1; then
            source_kind=source-package
            return 0
        fi
        say "apt: dpkg-source -x $pkg $version failed:"; tail -5 "$dir/unpack.log" >&2
        return 1
    fi
    grep '^E: ' "$dir/download.log" | sed 's/^/    /' >&2
    # apt keeps the files it could fetch: the orig tarball alone will do,
    # checked again against the index's SHA256.
    read -r _ orig _ orig_sha < <(suite_source_uris "$suite" "$pkg=$version" \
                                  | grep -E " ${pkg}_[^ ]*\.orig\.tar\.[a-z0-9]+ ")
    if [ -n "${orig:-}" ] && [ -f "$dir/dl/$orig" ] \
       && [ "$(sha256sum < "$dir/dl/$orig" | cut -c1-64)" = "$orig_sha" ]; then
        mkdir -p "$dir/tree" && tar -C "$dir/tree" --strip-components=1 -xf "$dir/dl/$orig" || return 1
        source_kind=orig-tarball
        say "apt: using $orig alone (SHA256 as in $suite's Sources index): the upstream source, without Debian's patches"
        return 0
    fi
    say "apt: Debian $suite: neither the source package $pkg $version nor its orig tarball can be downloaded"
    return 1
}

# The nginx-dev tree (nginx's headers, configure, conf_flags) of the suite's
# nginx-dev, downloaded and unpacked under the cache once per version; prints
# the path of its usr/share/nginx/src.
nginx_dev_tree() {
    local suite=$1 version dir tmp
    suite_update "$suite" || return 1
    version=$(suite_candidate "$suite" nginx-dev)
    [ -n "$version" ] || { say "apt: Debian $suite has no nginx-dev"; return 1; }
    dir="$idem_cache/nginx-dev/$suite/${version//:/%3a}"
    if [ ! -f "$dir/usr/share/nginx/src/conf_flags" ]; then
        say "apt: downloading nginx-dev $version from Debian $suite"
        tmp="$dir.tmp"
        rm -rf "$tmp" && mkdir -p "$tmp"
        ( cd "$tmp" && suite_apt_get "$suite" download "nginx-dev=$version" > download.log 2>&1 ) \
            || { cat "$tmp/download.log" >&2; return 1; }
        dpkg-deb -x "$tmp"/nginx-dev_*.deb "$tmp/root" || return 1
        rm -rf "$dir" && mv "$tmp/root" "$dir" && rm -rf "$tmp"
        # Other versions of this suite's nginx-dev are not needed any more.
        find "$idem_cache/nginx-dev/$suite" -mindepth 1 -maxdepth 1 ! -path "$dir" -exec rm -rf {} +
    fi
    printf '%s\n' "$dir/usr/share/nginx/src"
}

# The NGX_CONF_FLAGS array of a conf_flags file, evaluated by bash in the
# current directory (sid's calls dpkg-architecture and dpkg-buildflags), as
# NUL-separated words: mapfile -d '' flags < <(source_conf_flags FILE)
source_conf_flags() {
    bash -c 'set -e; . "$1"; printf "%s\0" "${NGX_CONF_FLAGS[@]}"' conf_flags "$1"
}

# The nginx version of a source or nginx-dev tree (src/core/nginx.h).
nginx_tree_version() {
    sed -n 's/^#define NGINX_VERSION *"\(.*\)"/\1/p' "$1/src/core/nginx.h"
}
