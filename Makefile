# vflag: build, test, demo. Run as root on Debian bookworm (apt-get installs
# the real parts the tests use: Open vSwitch, libvirt with the qemu driver).
SHELL := /bin/bash
GO ?= $(shell command -v go || echo /usr/local/go/bin/go)
export PATH := $(dir $(GO)):$(PATH)
BIN := bin/vflag
DEBS := openvswitch-switch libvirt-dev libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients \
        qemu-system-x86 iproute2 pkg-config gcc util-linux

.PHONY: all deps build check test vet demo bench e2e e2e-image clean

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

vet: deps
	$(GO) vet ./...

# check: everything CI runs: unit and integration tests, then the e2e suite.
check: test e2e

# test: unit and integration tests (simulated NIC, real ovsdb-server/ovs-vswitchd, real libvirtd).
test: deps vet
	$(GO) test -count=1 -timeout 10m ./...
	$(GO) test -count=1 -race -timeout 10m ./teardown/ ./internal/sim/

# demo: up, status, plan, up again, down on the simulated host with real OVS and libvirt.
demo: build
	$(GO) run ./internal/demo -vflag $(BIN)

bench: build
	$(GO) test -run '^$$' -bench . -benchtime 3x ./...

# e2e-image: the QEMU test bed (Debian 6.1 kernel, netdevsim, rootfs, image,
# trixie QEMU for igb SR-IOV), cached in /var/cache/vflag-e2e.
e2e-image:
	bash e2e/build.sh

# e2e: boot every e2e/scenarios/*.sh with a fresh build of ./cmd/vflag.
e2e: deps e2e-image
	$(GO) test -tags e2e -count=1 -timeout 30m -v ./e2e/...

clean:
	rm -rf bin
