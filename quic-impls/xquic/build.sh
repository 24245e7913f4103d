#!/usr/bin/env bash
# Build XQUIC's test programs (tests/test_server, tests/test_client) with FEC (XOR, Reed-Solomon,
# packet mask) into build/bin/, from the pinned commit with fecbench.patch applied. `make xquic` runs
# it; README.md beside this file says what and why. Idempotent: nothing is done when build/bin holds
# programs built from the same inputs (commit, patch, this script, BoringSSL source).
#
# Source of XQUIC (checked by its unpacked tree's hash, so that GitHub's archive and a local copy
# pass alike): XQUIC_ARCHIVE=FILE (relative to the checkout), else the archive in a shared/sources
# folder beside the checkout or one of its parents, else a download from GitHub (../pinned-build.sh,
# shared with rQUIC's build, does that part and keeps the programs in BUILD_CACHE).
# BoringSSL: BORINGSSL_SRC=DIR, else the copy bundled in the tquic crate's source in the cargo
# registry (there after `make tquic`).
set -euo pipefail

COMMIT=d67938db705c39b1f160ed1596ab4392f75e7e3c
# sha256 of the unpacked tree: `find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum`
# in the archive's top folder (file contents and paths).
TREE_SHA256=59db748950e86378b2a6c9b219afd6de7d21bdddd2eba47185f77222eea148a9
URL="https://github.com/alibaba/xquic/archive/$COMMIT.tar.gz"
NAME=xquic
ARCHIVE_NAME="xquic-$COMMIT.tar.gz"
ARCHIVE_VAR=XQUIC_ARCHIVE
TOP="xquic-$COMMIT"
PROGRAMS=(test_server test_client)
TQUIC_CRATE=tquic-1.6.0

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../pinned-build.sh
. "$here/../pinned-build.sh"
jobs=$(nproc 2>/dev/null || echo 2)

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

ssl_src=$(boringssl_source)
# What the programs are built from; also their version (impl.toml: version), recorded with every campaign.
inputs="xquic $COMMIT, fecbench.patch sha256 $(sha256sum < "$here/fecbench.patch" | cut -d' ' -f1), build.sh sha256 $(sha256sum < "$here/build.sh" | cut -d' ' -f1), pinned-build.sh sha256 $(sha256sum < "$here/../pinned-build.sh" | cut -d' ' -f1), BoringSSL $ssl_src"
# Already built from the same inputs here, or by another checkout on this machine (BUILD_CACHE, `make` sets it;
# `off`: none): nothing to do.
pinned_ready "$inputs" && exit 0

# 1. The pinned source, checked, patched.
pinned_source

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
pinned_keep "$inputs"
say "built $build/bin/test_server and test_client"
