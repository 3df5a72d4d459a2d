package pipeline

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// Stage selects which phases `up` runs (--stage).
type Stage string

const (
	// StageAll runs every phase.
	StageAll Stage = "all"
	// StagePre runs the phases that need neither the network, OVS nor
	// libvirt (vflag-pre.service at boot): legacy settings, VFs, VF MACs,
	// unbind, switchdev (and the PFs up for a legacy group).
	StagePre Stage = "pre"
)

// ParseStage checks a --stage value.
func ParseStage(s string) (Stage, error) {
	switch Stage(s) {
	case "", StageAll:
		return StageAll, nil
	case StagePre:
		return StagePre, nil
	}
	return "", &config.FieldError{Path: "--stage", Value: s, Msg: "is not pre or all"}
}

// Env is one run of the pipeline: the config and the host.
type Env struct {
	cfg *config.Config
	h   *host.Host
	k   eswitch.Kernel
	fs  sysfs.FS
	pci sriov.Host
	log *slog.Logger

	// VswitchdLog is ovs-vswitchd's log (the config's ovs_log;
	// ovs.DefaultVswitchdLog when empty), read for what it said of the
	// bond's tc flow API.
	VswitchdLog string
	// logUnreadable: the warning that VswitchdLog cannot be read was given.
	logUnreadable sync.Once

	// Stage is StageAll (default) or StagePre.
	Stage Stage
	// Boot: the run is part of the host's boot (stage pre), where a NIC's
	// driver may still probe its ports: a PF that does not resolve is
	// waited for, pf_wait at most. Otherwise a PF the host will not have
	// (udev settled, the NIC's other ports there) fails the wait at once
	// (WaitPFs).
	Boot bool
	// Poll is the interval of the bounded polls (LAG, representors); 0 = their default.
	Poll time.Duration
	// OFPortWait bounds verification's wait for ofports that ovs-vswitchd
	// assigns asynchronously (after a reboot: when the netdev appears).
	OFPortWait time.Duration
	// BusyWait bounds the wait of an eswitch mode change while mlx5
	// answers EBUSY (E-Switch busy); 0 = eswitchBusyWait.
	BusyWait time.Duration
	// Holding, when set, answers which running domain holds each VF instead
	// of libvirt (tests: no domain here can hold a VF without VFIO; the
	// libvirt path is covered on the real kernel, e2e scenario B). The
	// kernel's answer (internal/holders) is read either way.
	Holding func(vfs []string) (map[string]string, error)
	// Force lets a disruptive change go ahead when vflag cannot tell
	// whether something holds its VFs, the kernel's view being unreadable
	// (up --force): noted in the report and the log. Without it such a
	// change is refused. A VF known to be held is refused either way.
	Force bool
	// rebinds are the VFs each planned drivers step would take from their
	// driver, by step id (noteRebinds; the gate reads them).
	rebindMu sync.Mutex
	rebinds  map[string][]string
	// Progress, when set, receives live lines of long steps by key (VF
	// creation, the LAG wait, ofports): a terminal shows them while the step
	// runs; "" clears a key. Called from the steps' goroutines.
	Progress func(key, line string)
	// Recorded are the journal's entries before the run (apply sets them
	// before the preflight): vflag's own objects that the run replaces
	// (a renamed pool's network) are not counted as owners of what the
	// config wants.
	Recorded []teardown.Entry
	// domLocks: one lock per domain (domainLock).
	domMu    sync.Mutex
	domLocks map[string]*sync.Mutex
	// journal is this host's journal (UseJournal), whose pending entries'
	// claims make an unmarked link vflag's (claim.go).
	journal *teardown.Journal
	// madeSystemID is the chassis name this run made (newSystemID).
	madeSystemID string
}

// New is a run on host h for cfg (nil: down from the journal alone).
func New(cfg *config.Config, h *host.Host, log *slog.Logger) *Env {
	if cfg == nil {
		cfg = &config.Config{}
		cfg.ApplyDefaults()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Env{cfg: cfg, h: h, k: h.Kernel, fs: h.FS, pci: h.PCI, log: log, Stage: StageAll, OFPortWait: 30 * time.Second, VswitchdLog: cfg.OVSLog}
}

// Config is the run's config.
func (e *Env) Config() *config.Config { return e.cfg }

// Host is the run's host.
func (e *Env) Host() *host.Host { return e.h }

// ovsAt is the OVSDB client for endpoint: the run's own connection when it
// is the run's endpoint (one connection per run: undo of each journal entry
// no longer dials its own), else a new one, which done closes.
func (e *Env) ovsAt(ctx context.Context, endpoint string) (c *ovs.Client, done func(), err error) {
	if endpoint == e.h.OVSDB {
		c, err = e.h.OVS(ctx)
		return c, func() {}, err
	}
	if c, err = ovs.Connect(ctx, endpoint); err != nil {
		return nil, nil, err
	}
	return c, c.Close, nil
}

// virtAt is the libvirt connection for uri, as ovsAt.
func (e *Env) virtAt(uri string) (c *libvirtx.Conn, done func(), err error) {
	if uri == e.h.Libvirt {
		c, err = e.h.Virt()
		return c, func() {}, err
	}
	if c, err = libvirtx.Open(uri); err != nil {
		return nil, nil, err
	}
	return c, func() { _ = c.Close() }, nil
}
