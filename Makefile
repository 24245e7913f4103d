# fecbench: `make demo` and `make test` bootstrap everything a fresh Debian/Ubuntu machine needs (as root),
# then run the main job or every test suite. Each step is skipped when its result is already there.
SHELL := /bin/bash
.DEFAULT_GOAL := demo

export PATH := $(HOME)/.cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$(PATH)

VENV      := .venv
PY        := $(VENV)/bin/python
FECBENCH  := $(VENV)/bin/fecbench
STAMPS    := .build
# Debian's package names; `a|b`: the first that apt has a candidate for (asked, not assumed: on Ubuntu 24.04
# bpftool is not its own package but in linux-tools-*, distros/README.md). The runs' packet captures
# (fecbench/runners/run/pcap.py): tcpdump captures, tshark brings editcap (wireshark-common; its one debconf
# question, may users other than root capture, takes its default, no, under DEBIAN_FRONTEND=noninteractive).
APT_PKGS  := mininet clang llvm libbpf-dev bpftool|linux-tools-generic iproute2 iputils-ping ethtool iperf3 \
             build-essential pkg-config sqlite3 libelf-dev zlib1g-dev python3-venv python3-dev git cmake openssl patch \
             libevent-dev tcpdump tshark
# The bpftool that runs: Debian's on PATH, else the newest of linux-tools' (Ubuntu's /usr/sbin/bpftool is a
# wrapper that fails unless the running kernel's linux-tools package is installed). Used by dropper/ and schedlat/.
BPFTOOL = $(or $(shell bpftool version >/dev/null 2>&1 && echo bpftool),$(lastword $(sort $(wildcard /usr/lib/linux-tools/*/bpftool))),bpftool)
export BPFTOOL
FECQ_DIR  := quic-impls/fecq
TQUIC_DIR := quic-impls/tquic
TQUIC_VERSION := 1.6.0
XQUIC_DIR := quic-impls/xquic
# A local copy of XQUIC's pinned archive (quic-impls/xquic/README.md) for offline builds; relative to the checkout.
XQUIC_ARCHIVE ?=
RQUIC_DIR := quic-impls/rquic
# A local copy of rQUIC's pinned archive (quic-impls/rquic/README.md) for offline builds; relative to the checkout.
RQUIC_ARCHIVE ?=
# Where native builds that depend only on pinned inputs (tquic, XQUIC, rQUIC and its Go 1.15) are kept between
# checkouts; `off`: none.
BUILD_CACHE ?= $(HOME)/.cache/fecbench
export BUILD_CACHE
PYTEST_ARGS ?=
# The parallel pass's workers: its tests mostly wait on emulated delays. Measured on this 2-core machine, files
# handed out longest first: 3 workers 492-543 s (the CPUs 78 % busy), 4 workers 447 s (88 %).
PYTEST_WORKERS ?= 4

.PHONY: demo test bootstrap apt venv native dropper delayline schedlat noq-proto fecq tquic xquic rquic lint clean-build constraints \
        test-stress test-recipes test-durations test-kernels test-kernels-quick test-debian13 test-debian13-quick container test-cluster \
        golden golden-record

demo: bootstrap
	$(FECBENCH) doctor
	$(FECBENCH) run designs/smoke.toml
	$(FECBENCH) report results/smoke.sqlite

# XQUIC and rQUIC are not part of bootstrap (nor of demo), but their tests run here: built first (skipped when built).
test: bootstrap xquic rquic
	$(MAKE) -C dropper test
	$(MAKE) -C delayline test
	$(MAKE) -C schedlat test
	cargo test --release --locked --manifest-path $(FECQ_DIR)/Cargo.toml
	$(MAKE) lint
	$(FECQ_DIR)/build-cache save test
	@# Two passes: the tests that neither measure timing nor load the machine, PYTEST_WORKERS at a time
	@# (pytest-xdist; they mostly wait on emulated delays), whole files handed out longest first
	@# (tests/durations.py), then the `serial` ones alone (tests/conftest.py). pytest exits 5 when it
	@# collected nothing: that must never count as a pass. Each pass lists its slowest tests (--durations)
	@# and keeps its junit report in .build/ (`make test-durations` orders the next passes by it).
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "not serial and not recipes" --durations=15 \
	    --junitxml=.build/pytest-parallel.xml $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; \
	  $(PY) -m pytest -m "serial and not recipes" --durations=10 --junitxml=.build/pytest-serial.xml $(PYTEST_ARGS); rc2=$$?; \
	  if [ $$rc2 -eq 5 ]; then echo "pytest collected no serial tests: failing"; exit 1; fi; \
	  [ $$rc -eq 0 ] && [ $$rc2 -eq 0 ]

bootstrap: apt venv native

# The CI recipes end to end (ci-recipes/: a baseline recorded, an unchanged build passed and a slowed one caught;
# base and head interleaved on one runner): about four minutes of campaigns, so a stage of .ci/run of its own after
# `make test` (which stays within 15 minutes on a 2-core machine), not a part of it. Two files, one worker each.
test-recipes: bootstrap
	$(PY) -m pytest -n 2 --dist loadfile -m recipes --durations=5 $(PYTEST_ARGS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no recipe tests: failing"; exit 1; fi; exit $$rc

# tests/file_durations.json from the last `make test`'s junit reports: the order the parallel pass hands files
# out in (longest first). Refresh and commit it when files were added or grew.
test-durations:
	$(PY) -m tests.durations .build/pytest-parallel.xml .build/pytest-serial.xml

# The tests that touch real networks and clocks, STRESS_ROUNDS rounds beside STRESS_LOAD busy processes: each
# test's failure count (tests/stress.py). Any failure is a timing-dependent test to fix at its cause.
STRESS_ROUNDS ?= 3
STRESS_LOAD ?= 1
test-stress: bootstrap
	$(PY) -m tests.stress --rounds $(STRESS_ROUNDS) --load $(STRESS_LOAD) $(STRESS_ARGS)

# Debian 12's stock kernel in QEMU (TCG), as root inside the guest: netem link tests, the clsact
# dropper against the committed tcx verdict reference, doctor, smoke, kill -9 -> clean -> resume and
# the both-backends comparison (vm/README.md). `make -C vm` is this target's own bootstrap (QEMU,
# busybox, the pinned kernel package), so plain `make test` never pays for it. -quick: the CI subset.
test-kernels: bootstrap
	$(MAKE) -C vm
	vm/test-kernels

# One vCPU: the quick subset's guest stalled twice with two (QEMU's multi-threaded TCG losing a cross-vCPU kick,
# vm/README.md "When the guest stalls"); with one there is no such kick to lose (617 s wall against ~300 s).
test-kernels-quick: bootstrap
	$(MAKE) -C vm
	vm/test-kernels --quick --smp 1

# A fresh Debian 13 root (debootstrap), entered as a container is (own mount namespace, pivot_root, cgroup and
# BPF file systems), a fresh clone's `make demo` and the core suite inside: distros/README.md (~15 min cold).
# -quick, CI's: tquic's tools from this machine's BUILD_CACHE instead of their cold build.
DEBIAN13_ROOT ?= /var/tmp/fecbench-debian13
test-debian13:
	distros/debian13 $(DEBIAN13_ROOT)

test-debian13-quick: tquic
	distros/debian13 --quick $(DEBIAN13_ROOT)

# Many hosts on one machine (issue 52): lab1 … lab3, each its own network namespace and address, root file system
# (an overlay on the cluster root: Debian 13 with this commit built, kept in $(BUILD_CACHE)/cluster), hostname and
# SSH server; designs/README.md's "Many hosts, verbatim" run as written on them, a worker host killed mid-campaign,
# a worker with another fecq refused (tests/cluster/, distros/cluster; distros/README.md). Committed HEAD only.
CLUSTER_DIR ?= /var/tmp/fecbench-cluster
test-cluster: bootstrap
	distros/cluster root
	FECBENCH_CLUSTER=1 FECBENCH_CLUSTER_DIR=$(CLUSTER_DIR) $(PY) -m pytest -p no:cacheprovider -v -s tests/cluster

# fecbench's golden campaigns (golden/README.md): each golden design run again and compared with its recorded
# database by `fecbench compare --margin` (GOLDEN_MARGIN, default 10%); any group that moved fails (4-5 min).
# golden-record re-records them (NAMES: some only); add a line to golden/CHANGELOG.md.
NAMES ?=
golden: bootstrap
	golden/check $(NAMES)
	@# The stage must be able to fail: its rQUIC Wi-Fi campaign again with fecbench's link rate halved by a
	@# deliberate fault (tests/test_golden.py), which the compare must call worse (~1 min).
	$(if $(NAMES),,FECBENCH_GOLDEN_STAGE=1 $(PY) -m pytest -p no:cacheprovider -q tests/test_golden.py -k changed_link_rate)

golden-record: bootstrap
	golden/check --record $(NAMES)

# The container image (distros/Containerfile) with podman or docker, then doctor and smoke inside it with the
# privileges distros/README.md lists. Where no engine runs, make test-debian13 runs the same content.
container:
	distros/container

# Debian packages: install only the missing ones (apt-get update only when something is missing). For `a|b`,
# one installed is enough; otherwise the first one apt has a candidate for is installed, and none is an error.
apt:
	@installed() { dpkg-query -W -f='$${Status}\n' $$1 2>/dev/null | grep -q '^install ok installed'; }; \
	missing=$$(for alts in $(subst |,:,$(APT_PKGS)); do \
	    for p in $${alts//:/ }; do installed $$p && continue 2; done; echo $$alts; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "missing Debian packages: $$missing (run make as root)"; exit 2; fi; \
	  apt-get update -qq || exit 1; pkgs=; \
	  for alts in $$missing; do pick=; \
	    for p in $${alts//:/ }; do \
	      if apt-cache policy $$p 2>/dev/null | grep -q 'Candidate: [^(]'; then pick=$$p; break; fi; done; \
	    [ -n "$$pick" ] || { echo "no apt candidate for $${alts//:/ or } (apt-cache policy): see distros/README.md"; exit 2; }; \
	    pkgs="$$pkgs $$pick"; done; \
	  echo "installing:$$pkgs"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$pkgs; \
	fi
	@# Rust: rustup's if on PATH; else Debian's cargo-web (rustc-web, in Debian 12's and 13's security updates:
	@# 1.96 today), when apt offers one at least as new as fecq's rust-version (Debian's cargo, 1.85, is older).
	@if ! command -v cargo >/dev/null; then \
	  need=$$(sed -n 's/^rust-version = "\(.*\)"/\1/p' $(FECQ_DIR)/Cargo.toml); \
	  cand=$$(apt-cache policy cargo-web 2>/dev/null | sed -n 's/ *Candidate: \([0-9][0-9.]*\).*/\1/p'); \
	  if [ "$$(id -u)" = 0 ] && [ -n "$$cand" ] && [ "$$(printf '%s\n' $$need $$cand | sort -V | head -1)" = "$$need" ]; then \
	    echo "cargo not found: installing Debian's cargo-web $$cand (fecq needs Rust >= $$need)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends cargo-web || exit 1; \
	  else echo "cargo not found: install Rust with rustup (https://rustup.rs), stable >= $$need"; exit 2; fi; \
	fi

# The venv is made from Debian's /usr/bin/python3 with system site-packages so that Debian's
# Mininet (python3-mininet, which ships mnexec) is importable; everything else comes from PyPI, at the
# versions constraints.txt pins, installed by uv (itself pinned there): ~10 s instead of pip's ~1 min.
# Bytecode is compiled at install, as pip does: with PYTHONDONTWRITEBYTECODE set (CI runners, some
# shells) nothing is cached later, and every fecbench process of the suite would compile its imports.
venv: $(STAMPS)/venv.stamp
$(STAMPS)/venv.stamp: pyproject.toml constraints.txt
	@mkdir -p $(STAMPS)
	test -x $(PY) || /usr/bin/python3 -m venv --system-site-packages $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -c constraints.txt uv
	$(VENV)/bin/uv pip install -q --compile-bytecode --python $(PY) -c constraints.txt -e '.[analysis,cluster,dev,doe]'
	$(PY) -c 'import mininet.net, fecbench' 
	touch $@

native: dropper delayline schedlat fecq tquic

dropper:
	$(MAKE) -C dropper

delayline:
	$(MAKE) -C delayline

schedlat:
	$(MAKE) -C schedlat

# The pinned noq-proto release from crates.io (through cargo's registry cache) with fecq's scheduler
# patch, in $(FECQ_DIR)/build/noq-proto, where $(FECQ_DIR)/Cargo.toml's [patch.crates-io] points:
# every cargo command on the workspace needs it. Idempotent; offline once the crate is cached.
# A checkout without fecq's target/ starts from the build cache's copy of a build from the same Cargo.lock, noq-proto
# patch and toolchain (quic-impls/fecq/build-cache): a fresh clone then compiles fecq's own crates only.
noq-proto:
	$(FECQ_DIR)/build-cache restore
	$(FECQ_DIR)/noq-proto/prepare

fecq: noq-proto
	cargo build --release --locked --manifest-path $(FECQ_DIR)/Cargo.toml
	$(FECQ_DIR)/build-cache save build

# Re-pin constraints.txt (after changing dependencies in pyproject.toml): one resolution per supported Python,
# each marked with its python_version, made by the venv's uv (pinned here too) for a Python that need not be
# installed, so this works the same on any of them. The pins already there are kept wherever they still fit
# (uv's output-file preferences; the 3.11 ones seed a Python not yet pinned), so numpy and scipy, on which a
# design's identity depends (README.md, "The same design on every machine"), stay the same on every Python.
PIN_PYTHONS := 3.11 3.12 3.13
constraints: venv
	@set -euo pipefail; tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; \
	sed -n '1,/^# Regenerate/p' constraints.txt > "$$tmp/out"; echo uv > "$$tmp/tools.in"; \
	for v in $(PIN_PYTHONS); do \
	  sed -n "s/ *; python_version == \"$$v\"$$//p" constraints.txt > "$$tmp/$$v.txt"; \
	  [ -s "$$tmp/$$v.txt" ] || sed -n 's/ *; python_version == "3.11"$$//p' constraints.txt > "$$tmp/$$v.txt"; \
	  $(VENV)/bin/uv pip compile -q --no-header --no-annotate --all-extras --python-version $$v \
	    --python-platform x86_64-unknown-linux-gnu pyproject.toml "$$tmp/tools.in" -o "$$tmp/$$v.txt"; \
	  sed "s/$$/ ; python_version == \"$$v\"/" "$$tmp/$$v.txt" >> "$$tmp/out"; \
	done; \
	mv "$$tmp/out" constraints.txt; echo "constraints.txt: pinned for Python $(PIN_PYTHONS)"

# tquic's example tools (multipath QUIC, quic-impls/tquic/impl.toml): ~2–5 min cold (BoringSSL via cmake);
# skipped when the pinned version is already installed. Built once per machine into $(BUILD_CACHE) (a fresh
# clone copies them from there); BUILD_CACHE=off builds into the checkout only.
tquic:
	@if [ "$$($(TQUIC_DIR)/build/bin/tquic_client --version 2>/dev/null)" = "client $(TQUIC_VERSION)" ]; then \
	  echo "tquic $(TQUIC_VERSION): already built"; \
	elif [ "$(BUILD_CACHE)" = off ]; then \
	  cargo install --locked --force tquic_tools --version $(TQUIC_VERSION) --root $(TQUIC_DIR)/build; \
	else \
	  cached=$(BUILD_CACHE)/tquic-$(TQUIC_VERSION); \
	  if [ "$$($$cached/bin/tquic_client --version 2>/dev/null)" != "client $(TQUIC_VERSION)" ]; then \
	    cargo install --locked --force tquic_tools --version $(TQUIC_VERSION) --root $$cached.part && \
	    rm -rf $$cached && mv $$cached.part $$cached || exit 1; \
	  fi; \
	  mkdir -p $(TQUIC_DIR)/build/bin && cp $$cached/bin/tquic_client $$cached/bin/tquic_server $(TQUIC_DIR)/build/bin/ && \
	  echo "tquic $(TQUIC_VERSION): from $$cached"; \
	fi

# XQUIC's test programs with FEC (quic-impls/xquic/impl.toml): the pinned commit + fecbench.patch, BoringSSL
# from the tquic crate's bundled source (hence tquic first), libevent; ~3 min cold on 2 cores; skipped when
# built from the same inputs. Offline: XQUIC_ARCHIVE=path/to/xquic-<commit>.tar.gz.
xquic: apt tquic
	XQUIC_ARCHIVE="$(XQUIC_ARCHIVE)" $(XQUIC_DIR)/build.sh

# rQUIC, the code of Zverev et al. 2021 (quic-impls/rquic/impl.toml): fecbench's Go endpoints against its quic-go
# fork at a pinned commit, with Go 1.15 from Debian 11's packages (by sha256, unpacked into $(BUILD_CACHE), never
# installed) and modules from the Go module proxy checked by rQUIC's go.sum; skipped when built from the same
# inputs. Offline (no GitHub): RQUIC_ARCHIVE=path/to/rquic-quic-go-<commit>.tar.gz.
rquic:
	RQUIC_ARCHIVE="$(RQUIC_ARCHIVE)" $(RQUIC_DIR)/build.sh

# Conventions (ARCHITECTURE.md): ruff for Python; cargo fmt and clippy -D warnings for Rust (C builds with -Werror);
# the CI recipes' job files against GitHub's and GitLab's schemas (check-jsonschema ships them: offline).
lint: venv noq-proto
	$(VENV)/bin/ruff check fecbench tests
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.github-workflows ci-recipes/github-actions.yml
	$(VENV)/bin/check-jsonschema --builtin-schema vendor.gitlab-ci ci-recipes/gitlab-ci.yml
	cargo fmt --manifest-path $(FECQ_DIR)/Cargo.toml --all --check
	cargo clippy --release --locked --manifest-path $(FECQ_DIR)/Cargo.toml --all-targets -- -D warnings

clean-build:
	rm -rf $(STAMPS) dropper/build delayline/build schedlat/build $(FECQ_DIR)/build $(XQUIC_DIR)/build $(RQUIC_DIR)/build
