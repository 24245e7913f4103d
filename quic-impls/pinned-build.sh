# The part the build scripts of pinned third-party stacks share (quic-impls/xquic/build.sh,
# quic-impls/rquic/build.sh): the pinned source archive (a local copy, one in a shared/sources folder, or
# GitHub's), checked by its unpacked tree's hash and patched with fecbench.patch; and the programs built
# from the same inputs, kept in build/ and in BUILD_CACHE. A build script sources it (`. pinned-build.sh`)
# after setting:
#   NAME          the stack's name in messages and cache entries (xquic, rquic)
#   COMMIT        the pinned commit
#   TREE_SHA256   sha256 of the unpacked tree: `find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
#                 | sha256sum` in the archive's top folder (file contents and paths), so that GitHub's archive
#                 and a local copy pass alike
#   URL           GitHub's archive of the commit
#   ARCHIVE_NAME  the archive's file name in a shared/sources folder
#   ARCHIVE_VAR   the variable naming a local copy of the archive (XQUIC_ARCHIVE, ...), relative to the checkout
#   TOP           the archive's top folder (<repository>-<commit>)
#   PROGRAMS      the programs the build writes into build/bin (an array)
#   here          the stack's folder (the build script's)
# It sets root (the checkout), build (here/build) and cache_root (BUILD_CACHE, empty when off or unset), and
# defines say, die, tree_hash, and the steps: pinned_ready INPUTS, pinned_source, pinned_keep INPUTS.

root=$(cd "$here/../.." && pwd)
build="$here/build"
cache_root=""
if [ -n "${BUILD_CACHE:-}" ] && [ "$BUILD_CACHE" != off ]; then
    cache_root="$BUILD_CACHE"
fi

say() { echo "$NAME: $*"; }
die() { echo "$NAME: $*" >&2; exit 2; }

tree_hash() {
    (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}

# The pinned archive in a shared/sources folder beside the checkout or beside one of its parents (CI's fresh
# clones may sit deeper than the working checkout); empty when there is none.
pinned_shared_archive() {
    local dir="$root"
    while [ "$dir" != "/" ]; do
        dir=$(dirname "$dir")
        if [ -f "$dir/shared/sources/$ARCHIVE_NAME" ]; then
            echo "$dir/shared/sources/$ARCHIVE_NAME"
            return
        fi
    done
}

# The archive to unpack: $ARCHIVE_VAR, else a shared/sources copy, else a download from GitHub.
pinned_archive() {
    local given="${!ARCHIVE_VAR:-}" shared
    shared=$(pinned_shared_archive)
    if [ -n "$given" ]; then
        case "$given" in /*) ;; *) given="$root/$given" ;; esac
        [ -f "$given" ] || die "$ARCHIVE_VAR=${!ARCHIVE_VAR}: no such file (a relative path is taken from the checkout, $root)"
        echo "$given"
    elif [ -n "$shared" ]; then
        echo "$shared"
    else
        mkdir -p "$build"
        say "downloading $URL" >&2
        curl -fsSL --retry 2 -o "$build/$NAME.tar.gz.part" "$URL" \
            || die "cannot download $URL (set $ARCHIVE_VAR to a local copy of that archive)"
        mv "$build/$NAME.tar.gz.part" "$build/$NAME.tar.gz"
        echo "$build/$NAME.tar.gz"
    fi
}

# Whether DIR holds every program of PROGRAMS under bin/ and a version file saying INPUTS.
pinned_holds() {
    local dir=$1 inputs=$2 program
    for program in "${PROGRAMS[@]}"; do
        [ -x "$dir/bin/$program" ] || return 1
    done
    [ "$(cat "$dir/version" 2>/dev/null)" = "$inputs" ]
}

# The cache entry of INPUTS in BUILD_CACHE (empty without one).
pinned_cache() {
    [ -z "$cache_root" ] || echo "$cache_root/$NAME-$(echo "$1" | sha256sum | cut -c1-16)"
}

# Succeeds when build/bin holds the programs built from INPUTS: already there, or copied from the entry another
# checkout on this machine kept in BUILD_CACHE. Otherwise clears build/bin for a new build and fails.
pinned_ready() {
    local inputs=$1 cache
    if pinned_holds "$build" "$inputs"; then
        say "already built ($build/bin)"
        return 0
    fi
    # Called as a condition, where `set -e` does not stop the script: each step says when it fails.
    rm -rf "$build/bin" "$build/version" && mkdir -p "$build" || die "cannot clear $build/bin"
    cache=$(pinned_cache "$inputs")
    if [ -n "$cache" ] && pinned_holds "$cache" "$inputs"; then
        cp -r "$cache/bin" "$build/bin" && echo "$inputs" > "$build/version" || die "cannot copy $cache/bin"
        say "from $cache"
        return 0
    fi
    return 1
}

# The pinned source, checked by its tree's hash and patched (no fuzz: a patch that no longer fits fails here),
# in build/src.
pinned_source() {
    local tarball top got
    tarball=$(pinned_archive)
    say "source $tarball"
    rm -rf "$build/src" "$build/unpack"
    mkdir -p "$build/unpack"
    tar -xzf "$tarball" -C "$build/unpack"
    top="$build/unpack/$TOP"
    [ -d "$top" ] || die "$tarball does not hold $TOP/ (an archive of commit $COMMIT)"
    got=$(tree_hash "$top")
    [ "$got" = "$TREE_SHA256" ] || die "$tarball: unpacked tree sha256 $got, expected $TREE_SHA256 (commit $COMMIT)"
    patch -d "$top" -p1 --forward --fuzz=0 --no-backup-if-mismatch --quiet < "$here/fecbench.patch" \
        || die "fecbench.patch does not apply to commit $COMMIT"
    mv "$top" "$build/src"
    rm -rf "$build/unpack"
}

# The programs in build/bin are built from INPUTS: build/version says so, and BUILD_CACHE keeps them for other
# checkouts (whole or not at all: a half-copied cache entry must never look built).
pinned_keep() {
    local inputs=$1 cache
    echo "$inputs" > "$build/version"
    cache=$(pinned_cache "$inputs")
    if [ -n "$cache" ]; then
        rm -rf "$cache.part" && mkdir -p "$cache.part" && cp -r "$build/bin" "$build/version" "$cache.part/" \
            && rm -rf "$cache" && mv "$cache.part" "$cache"
    fi
}
