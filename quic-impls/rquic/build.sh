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
# the checkout or one of its parents, else a download from GitHub (../pinned-build.sh, shared with XQUIC's
# build, does that part and keeps the program in BUILD_CACHE).
# BUILD_CACHE (make sets it; `off`: none): the Go toolchain, the module and build caches, and the programs
# built from the same inputs, shared by every checkout on this machine.
set -euo pipefail

COMMIT=f6427deb6d077a945db68813d855063249a6f56c
# sha256 of the unpacked tree: `find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum`
# in the archive's top folder (file contents and paths).
TREE_SHA256=117bf7d56764acd892c0ead80d166f45046223012962fbc2036423d0d8b0e680
URL="https://github.com/pgOrtiz90/quic-go/archive/$COMMIT.tar.gz"
NAME=rquic
ARCHIVE_NAME="rquic-quic-go-$COMMIT.tar.gz"
ARCHIVE_VAR=RQUIC_ARCHIVE
TOP="quic-go-$COMMIT"
PROGRAMS=(rquic-fecbench)

GO_DEB_VERSION="1.15.15-1~deb11u4"
GO_POOL="${GO_POOL:-http://deb.debian.org/debian/pool/main/g/golang-1.15}"
# The sha256 of each package as Debian 11's index lists it (dists/bullseye/main/binary-amd64/Packages.xz).
GO_DEBS=(
    "golang-1.15-go_${GO_DEB_VERSION}_amd64.deb 33f6680406698b60370322aa5710be199006b3d66fbb0974b44da012de3aa82a"
    "golang-1.15-src_${GO_DEB_VERSION}_amd64.deb e580f570f706d801191f9a17e55156736fc5979a6a878bab9304ca007ae29941"
)
GOPROXY_URL="${RQUIC_GOPROXY:-https://proxy.golang.org}"

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../pinned-build.sh
. "$here/../pinned-build.sh"

[ "$(uname -m)" = x86_64 ] || die "Debian's Go 1.15 packages pinned here are for amd64; this machine is $(uname -m)"
for tool in curl dpkg-deb tar sha256sum patch; do
    command -v "$tool" >/dev/null || die "$tool not found (Debian: apt-get install curl dpkg tar coreutils patch)"
done

tools="${cache_root:-$build}"   # the toolchain and Go's caches: the build cache, else this folder

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
inputs="rquic ${COMMIT:0:12}, fecbench.patch $(sha256sum < "$here/fecbench.patch" | cut -c1-16), endpoint $(files_hash "$here/endpoint"), build.sh $(sha256sum < "$here/build.sh" | cut -c1-16), pinned-build.sh $(sha256sum < "$here/../pinned-build.sh" | cut -c1-16), go $GO_DEB_VERSION"
# Already built from the same inputs here, or by another checkout on this machine: nothing to do.
pinned_ready "$inputs" && exit 0

# 1. The pinned source, checked by its tree's hash, patched.
rm -rf "$build/endpoint"
pinned_source

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
pinned_keep "$inputs"
say "built $build/bin/rquic-fecbench ($inputs)"
