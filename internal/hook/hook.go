package hook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vflag/vflag/internal/bootgate"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/pathsafe"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/teardown"
)

// Timeout bounds everything the hook does: libvirt waits for it.
const Timeout = 20 * time.Second

// Options are one hook event and what it may use.
type Options struct {
	// StateDir is vflag's state directory (the main journal; the hook's
	// journals are under StateDir/hook).
	StateDir string
	// Domain, Op, SubOp are libvirt's arguments.
	Domain, Op, SubOp string
	// XML is the domain XML (libvirt's stdin); it is read in every case.
	XML io.Reader
	// Config loads the config: (nil, nil) when there is none. Called only
	// when the domain has PCI devices or changes to release.
	Config func() (*config.Config, error)
	// Host opens the host for cfg (nil: no config; endpoints are defaults).
	Host func(cfg *config.Config) (*host.Host, error)
	Log  *slog.Logger
	// Stderr receives the warnings that must not fail a domain.
	Stderr io.Writer
	// StopAfter and FailAt are the runner's test hooks (teardown.Runner).
	StopAfter int
	FailAt    string
	// Gate, when set, keeps a domain holding one of vflag's VFs from
	// starting before up has brought the VF-LAG up in this boot
	// (internal/bootgate); an autostarted domain is deferred, and up starts it.
	Gate *bootgate.Gate
	// Autostart tells whether libvirt autostarts the domain (default: its
	// link in AutostartDir; the hook must not ask libvirt).
	Autostart func(domain string) bool
	// Stdout receives the domain XML "migrate begin" changed (libvirt uses
	// it; nothing printed: the XML as it came).
	Stdout io.Writer
	// BootID and Now are this boot's id and the time (default: the
	// kernel's boot_id, the clock), for the VF reservations of migrations.
	BootID func() (string, error)
	Now    func() time.Time
}

// AutostartDir is where the system qemu driver of libvirt keeps the links
// of autostarted domains ("virsh autostart $domain").
const AutostartDir = "/etc/libvirt/qemu/autostart"

func (o Options) withDefaults() Options {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Stderr == nil {
		o.Stderr = io.Discard
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if o.Config == nil {
		o.Config = func() (*config.Config, error) { return nil, nil }
	}
	if o.Autostart == nil {
		o.Autostart = func(domain string) bool {
			// libvirt names the link after the domain, unescaped: a name
			// that is not one plain path element has no link there.
			if domain == "." || domain == ".." || strings.ContainsAny(domain, "/\x00") {
				return false
			}
			_, err := os.Lstat(filepath.Join(AutostartDir, domain+".xml"))
			return err == nil
		}
	}
	return o
}

// Dir is the directory of a domain's journal and lock,
// STATE_DIR/hook/<pathsafe.Component(domain)>: never outside STATE_DIR/hook,
// whatever the name (a domain may be named ".." or "../x"). A name that
// cannot be encoded (empty, too long) is an error.
func Dir(stateDir, domain string) (string, error) {
	return pathsafe.Join(filepath.Join(stateDir, "hook"), "domain", domain)
}

// domainName is the name the hook keeps the domain's state under: libvirt's
// argument, else the XML's. It fails when that name cannot be used for a
// path (pathsafe.Component), before anything is opened or locked.
func (o Options) domainName(d libvirtx.HookDomain) (name, dir string, err error) {
	name = o.Domain
	if name == "" {
		name = d.Name
	}
	dir, err = Dir(o.StateDir, name)
	return name, dir, err
}

// Run is the qemu hook for one event.
func Run(ctx context.Context, o Options) error {
	o = o.withDefaults()
	action := libvirtx.HookActionFor(o.Op, o.SubOp)
	// Read stdin in every case: libvirt writes the XML to a pipe, and a hook
	// that exits without reading it can make the write fail.
	var doc []byte
	var err error
	if o.XML != nil {
		doc, err = io.ReadAll(io.LimitReader(o.XML, 64<<20))
	}
	if err != nil || action == libvirtx.HookIgnore {
		return nil
	}
	d, err := libvirtx.ParseHookDomain(doc)
	if err != nil {
		// Not knowing the devices, the hook cannot tell whether the domain is
		// vflag's; it must not fail a domain that is not. A migration's XML
		// it cannot read is left as it is, silently (nothing printed: libvirt
		// takes its own).
		if action == libvirtx.HookPrepare || action == libvirtx.HookRelease {
			fmt.Fprintf(o.Stderr, "vflag hook: domain %s: %v; not checked\n", o.Domain, err)
		}
		return nil
	}
	name, dir, nameErr := o.domainName(d)
	d.Name = name
	switch action {
	case libvirtx.HookMigrate:
		return migrateBegin(ctx, o, doc, d)
	case libvirtx.HookStarted:
		if err := markStarted(ctx, o, name, d.UUID); err != nil {
			fmt.Fprintf(o.Stderr, "vflag hook: domain %s: VF reservation: %v\n", name, err)
		}
		return nil
	case libvirtx.HookRelease:
		// Before anything else: a migration that failed leaves no VF reserved.
		if err := dropReservations(ctx, o, name, d.UUID); err != nil {
			fmt.Fprintf(o.Stderr, "vflag hook: release of %s: VF reservation: %v\n", name, err)
		}
	}
	if action == libvirtx.HookRelease {
		if nameErr != nil {
			// No journal can exist under a name that has no path: nothing
			// of vflag's is the domain's, and nothing is touched.
			fmt.Fprintf(o.Stderr, "vflag hook: release of %v: vflag kept no state for it; nothing to undo\n", nameErr)
			return nil
		}
		return release(ctx, o, name, dir)
	}
	if len(d.Devices) == 0 {
		return nil // the fast path: no PCI passthrough at all
	}
	return prepare(ctx, o, d, dir, nameErr)
}

// domainJournal is a domain's journal, under its lock.
type domainJournal struct {
	dir  string
	lock *teardown.Lock
	j    *teardown.Journal
}

// openDomain locks and opens a domain's journal, adopting an old-format
// state file first.
func openDomain(ctx context.Context, o Options, domain, dir string) (*domainJournal, error) {
	o = o.withDefaults()
	if err := pathsafe.EnsureDir(dir, 0o700); err != nil {
		return nil, err
	}
	lock, err := teardown.AcquireLock(dir)
	if err != nil {
		return nil, fmt.Errorf("hook journal of domain %s: %w", domain, err)
	}
	dj := &domainJournal{dir: dir, lock: lock}
	dj.j, err = teardown.OpenJournal(dir)
	if err == nil {
		err = adoptOldState(ctx, o, dir, dj.j)
	}
	if err != nil {
		dj.close(o.Log)
		return nil, err
	}
	return dj, nil
}

// close writes what the journal wrote behind, removes the directory when
// the journal is empty, then unlocks. A write that failed is logged: the
// journal from before stays, whose entries the next release undoes again
// and whose pending entries are treated as applied.
func (dj *domainJournal) close(log *slog.Logger) {
	if dj.j != nil {
		if err := dj.j.Flush(); err != nil {
			log.Warn("hook: domain journal", "err", err)
		}
	}
	if dj.j != nil && len(dj.j.Entries()) == 0 {
		if err := os.Remove(filepath.Join(dj.dir, "journal.json")); err == nil || errors.Is(err, fs.ErrNotExist) {
			_ = os.Remove(dj.lock.Path())
			_ = os.Remove(dj.dir)
		}
	}
	_ = dj.lock.Release()
}

func (o Options) runner(j *teardown.Journal, e *pipeline.Env) *teardown.Runner {
	return &teardown.Runner{Journal: j, Undo: e.Undoers(), Shared: e.SharedThing, Together: e.SlowTogether, Log: o.Log, NoRollback: true, NoOpen: true, StopAfter: o.StopAfter, FailAt: o.FailAt}
}
