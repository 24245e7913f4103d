#!/usr/bin/env bash
# Build fecbench's rQUIC endpoints (endpoint/, a Go module of ours) against rQUIC, the quic-go fork of
# Zverev et al. 2021, at a pinned commit with fecbench.patch, with Go 1.15 from Debian 11's packages, into
# build/bin/.
# `make rquic` runs it; README.md beside this file says what and why. Idempotent: nothing is done when
# build/bin holds a program built from the same inputs (commit, patch, our Go files, this script, the Go packages).
#
# Go 1.15: rQUIC's TLS fork (qtls-go1-15) compiles with no other Go. Debian 11's golang-1.15-go and
# golang-1.15-src, fetched from Debian's pool (GO_POOL) and checked by the sha256 pinned below, are unpacked
# with `dpkg-deb -x` into the build cache, never installed; they run with their own GOROOT, GOPATH and
# GOCACHE, GOENV=off, GOFLAGS empty and GOTOOLCHAIN=local, so no Go setting of the user's reaches them.
# Modules: from the Go module proxy (GOPROXY), each checked against rQUIC's own go.sum (the build refuses
# any module go.sum does not list).
# Source of rQUIC (checked by its unpacked tree's hash, so that GitHub's archive and a local copy pass
# alike): RQUIC_ARCHIVE=FILE (relative to the checkout), else the archive in a shared/sources folder beside
# the checkout or one of its parents, else a download from GitHub.
# BUILD_CACHE (make sets it; `off`: none): the Go toolchain, the module and build caches, and the programs
# built from the same inputs, shared by every checkout on this machine.
set -euo pipefail

COMMIT=f6427deb6d077a945db68813d855063249a6f56c
# sha256 of the unpacked tree: `find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum`
# in the archive's top folder (file contents and paths).
TREE_SHA256=117bf7d56764acd892c0ead80d166f45046223012962fbc2036423d0d8b0e680
URL="https://github.com/pgOrtiz90/quic-go/archive/$COMMIT.tar.gz"
ARCHIVE_NAME="rquic-quic-go-$COMMIT.tar.gz"

GO_DEB_VERSION="1.15.15-1~deb11u4"
GO_POOL="${GO_POOL:-http://deb.debian.org/debian/pool/main/g/golang-1.15}"
# The sha256 of each package as Debian 11's index lists it (dists/bullseye/main/binary-amd64/Packages.xz).
GO_DEBS=(
    "golang-1.15-go_${GO_DEB_VERSION}_amd64.deb 33f6680406698b60370322aa5710be199006b3d66fbb0974b44da012de3aa82a"
    "golang-1.15-src_${GO_DEB_VERSION}_amd64.deb e580f570f706d801191f9a17e55156736fc5979a6a878bab9304ca007ae29941"
)
GOPROXY_URL="${RQUIC_GOPROXY:-https://proxy.golang.org}"

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build="$here/build"

say() { echo "rquic: $*"; }
die() { echo "rquic: $*" >&2; exit 2; }

[ "$(uname -m)" = x86_64 ] || die "Debian's Go 1.15 packages pinned here are for amd64; this machine is $(uname -m)"
for tool in curl dpkg-deb tar sha256sum patch; do
    command -v "$tool" >/dev/null || die "$tool not found (Debian: apt-get install curl dpkg tar coreutils patch)"
done

cache_root=""
if [ -n "${BUILD_CACHE:-}" ] && [ "$BUILD_CACHE" != off ]; then
    cache_root="$BUILD_CACHE"
fi
tools="${cache_root:-$build}"   # the toolchain and Go's caches: the build cache, else this folder

tree_hash() {
    (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
}

# The pinned archive in a shared/sources folder beside the checkout or beside one of its parents; empty if none.
shared_archive() {
    local dir="$root"
    while [ "$dir" != "/" ]; do
        dir=$(dirname "$dir")
        if [ -f "$dir/shared/sources/$ARCHIVE_NAME" ]; then
            echo "$dir/shared/sources/$ARCHIVE_NAME"
            return
        fi
    done
}

archive() {
    local given="${RQUIC_ARCHIVE:-}" shared
    shared=$(shared_archive)
    if [ -n "$given" ]; then
        case "$given" in /*) ;; *) given="$root/$given" ;; esac
        [ -f "$given" ] || die "RQUIC_ARCHIVE=$RQUIC_ARCHIVE: no such file (a relative path is taken from the checkout, $root)"
        echo "$given"
    elif [ -n "$shared" ]; then
        echo "$shared"
    else
        mkdir -p "$build"
        say "downloading $URL" >&2
        curl -fsSL --retry 2 -o "$build/rquic.tar.gz.part" "$URL" \
            || die "cannot download $URL (set RQUIC_ARCHIVE to a local copy of that archive)"
        mv "$build/rquic.tar.gz.part" "$build/rquic.tar.gz"
        echo "$build/rquic.tar.gz"
    fi
}

# Go 1.15 unpacked from Debian's packages (once per machine with a build cache); prints its GOROOT.
go_toolchain() {
    local dest="$tools/go-$GO_DEB_VERSION" entry name sum got
    local goroot="$dest/usr/lib/go-1.15"
    if [ -x "$goroot/bin/go" ] && [ -f "$dest/ok" ]; then
        echo "$goroot"
        return
    fi
    rm -rf "$dest.part" && mkdir -p "$dest.part/debs"
    for entry in "${GO_DEBS[@]}"; do
        name=${entry% *}
        sum=${entry#* }
        say "downloading $GO_POOL/$name" >&2
        curl -fsSL --retry 2 -o "$dest.part/debs/$name" "$GO_POOL/$name" \
            || die "cannot download $GO_POOL/$name (GO_POOL: another Debian mirror's pool/main/g/golang-1.15)"
        got=$(sha256sum < "$dest.part/debs/$name" | cut -d' ' -f1)
        [ "$got" = "$sum" ] || die "$name: sha256 $got, expected $sum (Debian 11's index)"
        dpkg-deb -x "$dest.part/debs/$name" "$dest.part"
    done
    rm -rf "$dest.part/debs"
    env GOROOT="$dest.part/usr/lib/go-1.15" GOENV=off GOFLAGS= GOTOOLCHAIN=local "$dest.part/usr/lib/go-1.15/bin/go" version \
        | grep -q 'go1\.15\.15 ' || die "the unpacked Go does not run"
    touch "$dest.part/ok"
    rm -rf "$dest" && mv "$dest.part" "$dest"   # whole or not at all
    echo "$goroot"
}

# The Go command with nothing of the user's: its own GOROOT, GOPATH, caches, proxy; no go env file.
go115() {
    env -u GOOS -u GOARCH -u GOBIN -u GOEXPERIMENT -u GOPRIVATE -u GONOPROXY -u GONOSUMDB -u GOINSECURE \
        -u GOMODCACHE -u GOWORK -u CC -u CGO_CFLAGS -u CGO_LDFLAGS \
        GOROOT="$goroot" GOPATH="$tools/go1.15-path" GOMODCACHE="$tools/go1.15-path/pkg/mod" \
        GOCACHE="$tools/go1.15-cache" GOENV=off GOFLAGS= GOTOOLCHAIN=local GO111MODULE=on \
        GOPROXY="$GOPROXY_URL" GOSUMDB=off CGO_ENABLED=0 "$goroot/bin/go" "$@"
}

files_hash() {
    (cd "$1" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c1-16)
}

# What the program is built from; also its version (--version, recorded with every campaign).
inputs="rquic ${COMMIT:0:12}, fecbench.patch $(sha256sum < "$here/fecbench.patch" | cut -c1-16), endpoint $(files_hash "$here/endpoint"), build.sh $(sha256sum < "$here/build.sh" | cut -c1-16), go $GO_DEB_VERSION"
if [ -x "$build/bin/rquic-fecbench" ] && [ "$(cat "$build/version" 2>/dev/null)" = "$inputs" ]; then
    say "already built ($build/bin/rquic-fecbench)"
    exit 0
fi
rm -rf "$build/bin" "$build/version"
mkdir -p "$build"

# A program built from the same inputs by another checkout on this machine is taken from the cache.
cache=""
if [ -n "$cache_root" ]; then
    cache="$cache_root/rquic-$(echo "$inputs" | sha256sum | cut -c1-16)"
fi
if [ -n "$cache" ] && [ -x "$cache/bin/rquic-fecbench" ] && [ "$(cat "$cache/version" 2>/dev/null)" = "$inputs" ]; then
    cp -r "$cache/bin" "$build/bin"
    echo "$inputs" > "$build/version"
    say "from $cache"
    exit 0
fi

# 1. The pinned source, checked by its tree's hash, patched (no fuzz: a patch that no longer fits fails here).
tarball=$(archive)
say "source $tarball"
rm -rf "$build/src" "$build/unpack" "$build/endpoint"
mkdir -p "$build/unpack"
tar -xzf "$tarball" -C "$build/unpack"
top="$build/unpack/quic-go-$COMMIT"
[ -d "$top" ] || die "$tarball does not hold quic-go-$COMMIT/ (an archive of commit $COMMIT)"
got=$(tree_hash "$top")
[ "$got" = "$TREE_SHA256" ] || die "$tarball: unpacked tree sha256 $got, expected $TREE_SHA256 (commit $COMMIT)"
patch -d "$top" -p1 --forward --fuzz=0 --no-backup-if-mismatch --quiet < "$here/fecbench.patch" \
    || die "fecbench.patch does not apply to commit $COMMIT"
mv "$top" "$build/src"
rm -rf "$build/unpack"

# 2. Go 1.15.
goroot=$(go_toolchain)
say "$(go115 version | cut -d' ' -f3) from Debian's $GO_DEB_VERSION ($goroot)"

# 3. Our module beside the source (its go.mod replaces quic-go by ../src), with the repository's go.sum:
# -mod=readonly refuses to change go.mod, and go.sum must come out unchanged (a module it does not list
# would have been added: refused).
cp -r "$here/endpoint" "$build/endpoint"
cp "$build/src/go.sum" "$build/endpoint/go.sum"
mkdir -p "$build/bin"
(cd "$build/endpoint" && go115 build -mod=readonly -modcacherw -trimpath -ldflags "-X 'main.version=$inputs'" \
    -o "$build/bin/rquic-fecbench.part" .) > "$build/go-build.log" 2>&1 \
    || { cat "$build/go-build.log" >&2; die "build failed (log: $build/go-build.log)"; }
cmp -s "$build/src/go.sum" "$build/endpoint/go.sum" \
    || die "the build needed modules rQUIC's go.sum does not list (diff $build/src/go.sum $build/endpoint/go.sum)"
mv "$build/bin/rquic-fecbench.part" "$build/bin/rquic-fecbench"
echo "$inputs" > "$build/version"
if [ -n "$cache" ]; then   # whole or not at all: a half-copied cache entry must never look built
    rm -rf "$cache.part" && mkdir -p "$cache.part" && cp -r "$build/bin" "$build/version" "$cache.part/" \
        && rm -rf "$cache" && mv "$cache.part" "$cache"
fi
say "built $build/bin/rquic-fecbench ($inputs)"
