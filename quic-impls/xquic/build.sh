#!/usr/bin/env bash
# Build XQUIC's test programs (tests/test_server, tests/test_client) with FEC (XOR, Reed-Solomon,
# packet mask) into build/bin/, from the pinned commit with fecbench.patch applied. `make xquic` runs
# it; README.md beside this file says what and why. Idempotent: nothing is done when build/bin holds
# programs built from the same inputs (commit, patch, this script, BoringSSL source).
#
# Source of XQUIC (checked by its unpacked tree's hash, so that GitHub's archive and a local copy
# pass alike): XQUIC_ARCHIVE=FILE (relative to the checkout), else the archive in a shared/sources
# folder beside the checkout or one of its parents, else a download from GitHub.
# BoringSSL: BORINGSSL_SRC=DIR, else the copy bundled in the tquic crate's source in the cargo
# registry (there after `make tquic`).
set -euo pipefail

COMMIT=d67938db705c39b1f160ed1596ab4392f75e7e3c
# sha256 of the unpacked tree: `find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum`
# in the archive's top folder (file contents and paths).
TREE_SHA256=59db748950e86378b2a6c9b219afd6de7d21bdddd2eba47185f77222eea148a9
URL="https://github.com/alibaba/xquic/archive/$COMMIT.tar.gz"
TQUIC_CRATE=tquic-1.6.0

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build="$here/build"
jobs=$(nproc 2>/dev/null || echo 2)

say() { echo "xquic: $*"; }
die() { echo "xquic: $*" >&2; exit 2; }

boringssl_source() {
    if [ -n "${BORINGSSL_SRC:-}" ]; then
        [ -f "$BORINGSSL_SRC/CMakeLists.txt" ] || die "BORINGSSL_SRC=$BORINGSSL_SRC holds no CMakeLists.txt"
        (cd "$BORINGSSL_SRC" && pwd)
        return
    fi
    local registry="${CARGO_HOME:-$HOME/.cargo}/registry/src" dir
    # The registry folder's name carries a hash of the index URL: take whichever holds the crate.
    for dir in "$registry"/*/"$TQUIC_CRATE"/deps/boringssl; do
        if [ -f "$dir/CMakeLists.txt" ]; then
            echo "$dir"
            return
        fi
    done
    die "BoringSSL source not found in $registry/*/$TQUIC_CRATE/deps/boringssl: run \`make tquic\` (cargo downloads the tquic crate, which bundles it) or set BORINGSSL_SRC"
}

tree_hash() {
    (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}

# The pinned archive in a shared/sources folder beside the checkout or beside one of its parents (CI's fresh
# clones may sit deeper than the working checkout); empty when there is none.
shared_archive() {
    local dir="$root"
    while [ "$dir" != "/" ]; do
        dir=$(dirname "$dir")
        if [ -f "$dir/shared/sources/xquic-$COMMIT.tar.gz" ]; then
            echo "$dir/shared/sources/xquic-$COMMIT.tar.gz"
            return
        fi
    done
}

archive() {
    local given="${XQUIC_ARCHIVE:-}" shared
    shared=$(shared_archive)
    if [ -n "$given" ]; then
        case "$given" in /*) ;; *) given="$root/$given" ;; esac
        [ -f "$given" ] || die "XQUIC_ARCHIVE=$XQUIC_ARCHIVE: no such file (a relative path is taken from the checkout, $root)"
        echo "$given"
    elif [ -n "$shared" ]; then
        echo "$shared"
    else
        mkdir -p "$build"
        say "downloading $URL" >&2
        curl -fsSL --retry 2 -o "$build/xquic.tar.gz.part" "$URL" || die "cannot download $URL (set XQUIC_ARCHIVE to a local copy of that archive)"
        mv "$build/xquic.tar.gz.part" "$build/xquic.tar.gz"
        echo "$build/xquic.tar.gz"
    fi
}

ssl_src=$(boringssl_source)
# What the programs are built from; also their version (impl.toml: version), recorded with every campaign.
inputs="xquic $COMMIT, fecbench.patch sha256 $(sha256sum < "$here/fecbench.patch" | cut -d' ' -f1), build.sh sha256 $(sha256sum < "$here/build.sh" | cut -d' ' -f1), BoringSSL $ssl_src"
if [ -x "$build/bin/test_server" ] && [ -x "$build/bin/test_client" ] \
    && [ "$(cat "$build/version" 2>/dev/null)" = "$inputs" ]; then
    say "already built ($build/bin)"
    exit 0
fi
rm -rf "$build/bin" "$build/version"
mkdir -p "$build"

# Programs built from the same inputs by another checkout on this machine (BUILD_CACHE, `make` sets it;
# `off`: none) are taken from there.
cache=""
if [ -n "${BUILD_CACHE:-}" ] && [ "$BUILD_CACHE" != off ]; then
    cache="$BUILD_CACHE/xquic-$(echo "$inputs" | sha256sum | cut -c1-16)"
fi
if [ -n "$cache" ] && [ -x "$cache/bin/test_server" ] && [ -x "$cache/bin/test_client" ] \
    && [ "$(cat "$cache/version" 2>/dev/null)" = "$inputs" ]; then
    cp -r "$cache/bin" "$build/bin"
    echo "$inputs" > "$build/version"
    say "from $cache"
    exit 0
fi

# 1. The pinned source, checked, patched (no fuzz: a patch that no longer fits fails here).
tarball=$(archive)
say "source $tarball"
rm -rf "$build/src" "$build/unpack"
mkdir -p "$build/unpack"
tar -xzf "$tarball" -C "$build/unpack"
top="$build/unpack/xquic-$COMMIT"
[ -d "$top" ] || die "$tarball does not hold xquic-$COMMIT/ (an archive of commit $COMMIT)"
got=$(tree_hash "$top")
[ "$got" = "$TREE_SHA256" ] || die "$tarball: unpacked tree sha256 $got, expected $TREE_SHA256 (commit $COMMIT)"
patch -d "$top" -p1 --forward --fuzz=0 --no-backup-if-mismatch --quiet < "$here/fecbench.patch" \
    || die "fecbench.patch does not apply to commit $COMMIT"
mv "$top" "$build/src"
rm -rf "$build/unpack"

# 2. BoringSSL, static (kept between builds of the same source).
ssl="$build/boringssl"
if [ ! -f "$ssl/libssl.a" ] || [ ! -f "$ssl/libcrypto.a" ] || [ "$(cat "$ssl/source" 2>/dev/null)" != "$ssl_src" ]; then
    say "BoringSSL from $ssl_src"
    rm -rf "$ssl"
    cmake -S "$ssl_src" -B "$ssl" -DBUILD_SHARED_LIBS=0 -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_C_FLAGS=-fPIC -DCMAKE_CXX_FLAGS=-fPIC > "$build/boringssl.log"
    cmake --build "$ssl" --target ssl crypto -j "$jobs" >> "$build/boringssl.log" \
        || die "BoringSSL build failed (log: $build/boringssl.log)"
    echo "$ssl_src" > "$ssl/source"
fi

# 3. XQUIC's test programs, statically linked against BoringSSL and libevent. XQC_PRINT_SECRET: the
# programs write the TLS secrets of their connections (ckeys.log, skeys.log in their working folder, the
# run's), so that a packet capture of the run can be decrypted (fecbench/runners/experiment/capture.py).
# XQC_ENABLE_EVENT_LOG: the qlog events, written as text into the log file when the run asks for them
# (impl.toml [capture]; off with --qlog_disable: one branch per event) and converted to qlog by fecbench.
libevent=$(cc -print-file-name=libevent.a)
[ -f "$libevent" ] || die "libevent.a not found: apt-get install libevent-dev"
rm -rf "$build/xquic"
cmake -S "$build/src" -B "$build/xquic" -DCMAKE_BUILD_TYPE=Release -DXQC_ENABLE_TESTING=1 \
    -DXQC_ENABLE_FEC=1 -DXQC_ENABLE_XOR=1 -DXQC_ENABLE_RSC=1 -DXQC_ENABLE_PKM=1 \
    -DXQC_ENABLE_RENO=1 -DXQC_ENABLE_BBR2=1 -DXQC_ENABLE_COPA=1 -DXQC_ENABLE_UNLIMITED=1 -DXQC_PRINT_SECRET=1 \
    -DXQC_ENABLE_EVENT_LOG=1 \
    -DSSL_TYPE=boringssl -DSSL_PATH="$ssl_src" -DSSL_INC_PATH="$ssl_src/src/include" \
    "-DSSL_LIB_PATH=$ssl/libssl.a;$ssl/libcrypto.a" -DLIBEVENT_LIBRARY="$libevent" > "$build/xquic.log"
cmake --build "$build/xquic" --target test_server test_client -j "$jobs" >> "$build/xquic.log" \
    || die "XQUIC build failed (log: $build/xquic.log)"
mkdir -p "$build/bin"
cp "$build/xquic/tests/test_server" "$build/xquic/tests/test_client" "$build/bin/"
echo "$inputs" > "$build/version"
if [ -n "$cache" ]; then   # whole or not at all: a half-copied cache entry must never look built
    rm -rf "$cache.part" && mkdir -p "$cache.part" && cp -r "$build/bin" "$build/version" "$cache.part/" \
        && rm -rf "$cache" && mv "$cache.part" "$cache"
fi
say "built $build/bin/test_server and test_client"
