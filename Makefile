# vflag: build, test, demo. Run as root on Debian bookworm (apt-get installs
# the real parts the tests use: Open vSwitch, libvirt with the qemu driver).
SHELL := /bin/bash
GO ?= $(shell command -v go || echo /usr/local/go/bin/go)
export PATH := $(dir $(GO)):$(PATH)
BIN := bin/vflag
# HOOK_BIN: the libvirt hooks alone (cmd/vflag-hook), without libvirt's C
# library and static: the hook scripts run it when it is next to vflag.
HOOK_BIN := $(BIN)-hook
HOOK_BUILD := CGO_ENABLED=0 $(GO) build -tags vflag_nolibvirt
DEBS := rpm openvswitch-switch ovn-common ovn-central ovn-host libvirt-dev libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients \
        qemu-system-x86 iproute2 pkg-config gcc util-linux

.PHONY: all deps build check test vet lint fuzz fuzz-short demo simhost bench e2e e2e-image e2e-migrate-guest clean package ansible-test

all: build

# deps installs the Debian packages the build and the tests need.
deps:
	@missing=""; for p in $(DEBS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

build: deps
	$(GO) build -o $(BIN) ./cmd/vflag
	$(HOOK_BUILD) -o $(HOOK_BIN) ./cmd/vflag-hook

vet: deps
	$(GO) vet ./...
	$(GO) vet -tags vflag_nolibvirt ./cmd/vflag-hook/ ./libvirtx/

# lint: static analysis beyond vet, at pinned versions the Go toolchain
# fetches and builds (nothing to install): staticcheck, and errcheck for
# unchecked errors (.errcheck-excludes: terminal writes, libvirt frees).
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
ERRCHECK := $(GO) run github.com/kisielk/errcheck@v1.30.0
lint: deps
	$(STATICCHECK) ./...
	$(ERRCHECK) -ignoretests -exclude .errcheck-excludes ./...

# check: everything CI runs: vet and lint, unit and integration tests, each
# fuzz target for a second, the
# packages (built, inspected, installed and removed in an empty root), the
# Ansible playbook over simulated hypervisors, then the e2e suite.
check: lint test fuzz-short package ansible-test e2e

# fuzz-short: every fuzz target for a short budget (make check); make fuzz
# runs them longer.
fuzz-short:
	$(MAKE) fuzz FUZZTIME=1s

# test: unit and integration tests (simulated NIC, real ovsdb-server/ovs-vswitchd, real libvirtd).
test: deps vet
	$(GO) test -count=1 -timeout 20m ./...
	$(GO) test -count=1 -race -timeout 10m ./teardown/ ./internal/sim/

# fuzz: every Go fuzz target (the parsers of the config, the journal, domain
# XML, identifiers, sysfs values and tool output), one after the other, each
# for FUZZTIME; internal/tools/fuzz/run.sh lists them (a new target is one
# line there). A crasher fails the run and is written to the package's
# testdata/fuzz/<Target>/: keep it there with the fix.
FUZZTIME ?= 30s
fuzz: deps
	GO=$(GO) FUZZTIME=$(FUZZTIME) bash internal/tools/fuzz/run.sh

# demo: up, status, plan, up again, down on the simulated host with real OVS and libvirt.
demo: build
	$(GO) run ./internal/tools/demo -vflag $(BIN)

# simhost: the real daemons the simulated host needs, for CONFIG (README "Try it
# on the simulated host"): a private ovsdb-server/ovs-vswitchd in the network
# namespace CONFIG's sim.mirror_netns names and a private libvirtd with the
# domains CONFIG's attachments name (with an ovn section, an OVN central with
# CONFIG's logical ports and ovn-controller, docs/ovn.md); writes the environment for bin/vflag to
# vflag-simhost.env next to CONFIG and runs until Ctrl-C. In the background
# (nohup make simhost &), stop it with SIGTERM to make's pid: make passes
# SIGTERM on to its recipe, SIGINT not (README).
CONFIG ?= examples/vflag-simhost.yaml
simhost: build
	$(GO) build -o bin/vflag-simhost ./internal/tools/simhost
	bin/vflag-simhost -config $(CONFIG)

# ansible-test: examples/ansible/playbook.yml as shipped, run by Debian's
# ansible-core (installed when missing) over three simulated hypervisors
# that share one private ovsdb-server/ovs-vswitchd and libvirtd: a bad config
# stops the rollout at its batch, --check predicts and writes nothing, a
# first run converges, a second changes nothing (docs/fleet.md; about 30 s).
ansible-test: build
	GO=$(GO) bash examples/ansible/test/run.sh

# bench: Go benchmarks (journal step, OVS transaction, pipeline at zero
# latency), then the whole-command benchmark: the built binary against the
# simulated ConnectX with measured hardware latencies, a private OVS and
# libvirtd; prints one table (about 7 minutes; docs/performance.md).
bench: build
	$(GO) test -run '^$$' -bench . -benchtime 3x ./teardown/ ./ovs/ ./cmd/vflag/
	$(GO) run ./internal/tools/bench -vflag $(BIN)

# e2e-image: the QEMU test bed (Debian 6.1 kernel, netdevsim, rootfs, image,
# trixie QEMU for igb SR-IOV), cached in /var/cache/vflag-e2e.
e2e-image:
	bash e2e/build.sh

# e2e: boot every e2e/scenarios/*.sh with a fresh build of ./cmd/vflag.
e2e: deps e2e-image
	$(GO) test -tags e2e -count=1 -timeout 45m -v ./e2e/...

# e2e-migrate-guest: a live migration with a guest OS in the domain (nested
# TCG, slow: not in check), its traffic measured (e2e/README.md).
e2e-migrate-guest: deps e2e-image
	bash e2e/migrate-guest/run.sh

# package: .deb and .rpm in build/ with nfpm (pinned), the binary, units,
# hook, example config, the README and docs/, man pages and completions
# generated from the command tree (and vflag.yaml(5) from
# docs/configuration.md); packaging/check.sh then checks their contents.
NFPM := $(GO) run github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.43.0
VERSION ?= 0.1.0
ARCH ?= $(shell $(GO) env GOARCH)
package: deps
	rm -rf build/pkg && mkdir -p build/pkg
	$(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o build/pkg/vflag ./cmd/vflag
	$(HOOK_BUILD) -trimpath -ldflags "-X main.version=$(VERSION)" -o build/pkg/vflag-hook ./cmd/vflag-hook
	$(GO) build -tags vflag_gendocs -o build/vflag-gendocs ./cmd/vflag
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) build/vflag-gendocs gen-docs build/pkg
	rm -f build/vflag-gendocs
	gzip -9n build/pkg/man/man1/*.1 build/pkg/man/man5/*.5
	VERSION=$(VERSION) ARCH=$(ARCH) $(NFPM) package -f packaging/nfpm.yaml -p deb -t build/
	VERSION=$(VERSION) ARCH=$(ARCH) $(NFPM) package -f packaging/nfpm.yaml -p rpm -t build/
	bash packaging/check.sh build/vflag_$(VERSION)_$(ARCH).deb
	rpm -qlp build/vflag-*.rpm | grep -qx /usr/bin/vflag && rpm -qlp build/vflag-*.rpm | grep -qx /usr/bin/vflag-hook && rpm -qlp build/vflag-*.rpm | grep -qx /etc/libvirt/hooks/qemu.d/vflag \
	  && echo "rpm: contents OK"

clean:
	rm -rf bin build
