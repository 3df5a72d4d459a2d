package hook

// The destination's half of a live migration (libvirt teaming): at
// "migrate begin" libvirt gives the hook the incoming domain XML and uses
// the XML the hook prints. A VF of a teaming pair vflag made (its claim
// names the group) is moved to a VF of this host's group of that name that
// is free, and reserved, so that two migrations arriving at once do not
// take the same VF. The reservation is a file per VF in
// STATE_DIR/hook/reserved/, written under that directory's lock; it is
// marked started at "started begin" and dropped at the domain's "release
// end" (a failed migration's, or the domain's stop or departure later).
// A reservation of an earlier boot is void, and so is one whose QEMU never
// started within ReservationTTL.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/atomicfile"
	"github.com/vflag/vflag/internal/bootgate"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/holders"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/pathsafe"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// ReservationTTL is how long a reservation whose QEMU never started holds
// its VF: a migration whose destination was killed before its release.
const ReservationTTL = 30 * time.Minute

// reservation is one VF an incoming migration took.
type reservation struct {
	PCI    string    `json:"pci"`
	Domain string    `json:"domain"`
	UUID   string    `json:"uuid,omitempty"`
	Group  string    `json:"group"`
	BootID string    `json:"boot_id"`
	At     time.Time `json:"at"`
	// Started: the domain's QEMU started on this host ("started begin"):
	// the reservation lasts until its release.
	Started bool `json:"started,omitempty"`
}

// ReservedDir is the directory of the reservations.
func ReservedDir(stateDir string) string { return filepath.Join(stateDir, "hook", "reserved") }

// reservations is the reservation directory, under its lock.
type reservations struct {
	dir  string
	lock *teardown.Lock
	boot string
	now  time.Time
}

// lockWait bounds the wait for the reservations' lock (another hook
// holds it for milliseconds).
const lockWait = 10 * time.Second

// openReservations locks the reservation directory, waiting while another
// hook holds it.
func openReservations(ctx context.Context, o Options) (*reservations, error) {
	dir := ReservedDir(o.StateDir)
	if err := pathsafe.EnsureDir(dir, 0o700); err != nil {
		return nil, err
	}
	boot, err := o.bootID()
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(lockWait)
	for {
		lock, err := teardown.AcquireLock(dir)
		if err == nil {
			return &reservations{dir: dir, lock: lock, boot: boot, now: o.now()}, nil
		}
		if !errors.Is(err, teardown.ErrLocked) || time.Now().After(deadline) {
			return nil, fmt.Errorf("VF reservations: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("VF reservations: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (r *reservations) close() { _ = r.lock.Release() }

// path is the file of the reservation of VF pci (a canonical PCI address:
// never a name from libvirt).
func (r *reservations) path(pci string) (string, error) {
	a, err := sriov.ParseAddr(pci)
	if err != nil || string(a) != pci {
		return "", fmt.Errorf("VF reservation: bad PCI address %q", pci)
	}
	return filepath.Join(r.dir, pci+".json"), nil
}

// live reads the reservations that hold: this boot's, started or younger
// than ReservationTTL; void ones are removed.
func (r *reservations) live() (map[string]reservation, error) {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, err
	}
	out := map[string]reservation{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		path := filepath.Join(r.dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var res reservation
		if err := json.Unmarshal(data, &res); err != nil || res.PCI+".json" != name {
			_ = os.Remove(path) // unreadable: holds nothing
			continue
		}
		if res.BootID != r.boot || !res.Started && r.now.Sub(res.At) > ReservationTTL {
			_ = os.Remove(path)
			continue
		}
		out[res.PCI] = res
	}
	return out, nil
}

func (r *reservations) write(res reservation) error {
	path, err := r.path(res.PCI)
	if err != nil {
		return err
	}
	data, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(data, '\n'), 0o600)
}

// of are the live reservations of the domain (by name, and UUID when both
// have one).
func of(all map[string]reservation, domain, uuid string) []reservation {
	var out []reservation
	for _, res := range all {
		if res.Domain == domain && (uuid == "" || res.UUID == "" || strings.EqualFold(uuid, res.UUID)) {
			out = append(out, res)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PCI < out[j].PCI })
	return out
}

func (o Options) bootID() (string, error) {
	if o.BootID != nil {
		return o.BootID()
	}
	data, err := os.ReadFile(bootgate.BootIDPath)
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	return strings.TrimSpace(string(data)), nil
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// migrateBegin is "migrate begin" on the destination: it prints the
// incoming XML with each of vflag's teaming VFs on a VF of this host it
// reserved, or nothing when the XML stays as it is.
func migrateBegin(ctx context.Context, o Options, doc []byte, d libvirtx.HookDomain) error {
	teamed, err := libvirtx.TeamedVFs(doc)
	if err != nil {
		fmt.Fprintf(o.Stderr, "vflag hook: migration of %s: %v; XML left as it is\n", d.Name, err)
		return nil
	}
	// vflag's: its claim names the group, or (a pair written by hand) its
	// standby is an openvswitch port of a bridge of this host's groups.
	var ours []libvirtx.TeamedVF
	for _, t := range teamed {
		if t.Owner != "" || t.HasStandby && t.Bridge != "" {
			ours = append(ours, t)
		}
	}
	if len(ours) == 0 {
		return nil
	}
	if err := pathsafe.CheckDir(o.StateDir); err != nil {
		return fmt.Errorf("refusing the migration of domain %q: %w", d.Name, err)
	}
	cfg, err := o.Config()
	if err != nil {
		return fmt.Errorf("refusing the migration of domain %q: %w", d.Name, err)
	}
	if cfg == nil {
		fmt.Fprintf(o.Stderr, "vflag hook: migration of %s: no vflag config on this host; its VFs are left at the source's addresses\n", d.Name)
		return nil
	}
	h, err := o.Host(cfg)
	if err != nil {
		return err
	}
	defer h.Close()
	res, err := openReservations(ctx, o)
	if err != nil {
		return fmt.Errorf("refusing the migration of domain %q: %w", d.Name, err)
	}
	defer res.close()
	reserved, err := res.live()
	if err != nil {
		return fmt.Errorf("refusing the migration of domain %q: %w", d.Name, err)
	}
	out := doc
	var taken []string
	for _, t := range ours {
		grp := configGroup(cfg, t.Owner)
		switch {
		case t.Owner == "":
			if grp = bridgeGroup(cfg, t.Bridge); grp == nil {
				continue // not vflag's: no claim, its standby on no bridge of vflag's
			}
		case grp == nil:
			fmt.Fprintf(o.Stderr, "vflag hook: migration of %s: VF %s is of group %q, which this host's config does not have; left at the source's address\n", d.Name, t.PCI, t.Owner)
			continue
		}
		pick, err := pickVF(o, h, grp, d, t, reserved, taken)
		if err != nil {
			return fmt.Errorf("refusing the migration of domain %q: VF %s (mac %s) of group %s: %w", d.Name, t.PCI, t.MAC, t.Owner, err)
		}
		taken = append(taken, pick)
		if err := res.write(reservation{PCI: pick, Domain: d.Name, UUID: d.UUID, Group: grp.Name, BootID: res.boot, At: res.now.UTC()}); err != nil {
			return fmt.Errorf("refusing the migration of domain %q: reserve VF %s: %w", d.Name, pick, err)
		}
		if pick != t.PCI {
			if out, err = libvirtx.RewriteVF(out, t.PCI, pick); err != nil {
				return fmt.Errorf("refusing the migration of domain %q: %w", d.Name, err)
			}
		}
		o.Log.Info("migration: VF reserved", "domain", d.Name, "group", grp.Name, "from", t.PCI, "vf", pick)
	}
	if len(taken) > 0 && !slices.Equal(out, doc) {
		if _, err := o.Stdout.Write(out); err != nil {
			return fmt.Errorf("migration of domain %q: write the XML: %w", d.Name, err)
		}
	}
	return nil
}

// configGroup is the config's group of that name, nil when none.
func configGroup(cfg *config.Config, name string) *config.Group {
	for i := range cfg.Groups {
		if cfg.Groups[i].Name == name {
			return &cfg.Groups[i]
		}
	}
	return nil
}

// bridgeGroup is the group of cfg whose standbys go on bridge (a switchdev
// group's ovs.bridge, a legacy group's standby_bridge), nil when none.
func bridgeGroup(cfg *config.Config, bridge string) *config.Group {
	for i := range cfg.Groups {
		g := &cfg.Groups[i]
		if g.Switchdev() && g.OVS.Bridge == bridge || g.Eswitch == eswitch.ModeLegacy && g.StandbyBridge != "" && g.StandbyBridge == bridge {
			return g
		}
	}
	return nil
}

// pickVF chooses the VF of grp the incoming teaming VF t goes to: the VF
// the config attaches to this domain with t's MAC, else t's own address
// when it is a free VF of grp here, else grp's first free VF. Free: no
// attachment, pool or host driver of the config takes it, nothing holds
// it (internal/holders: a QEMU with its vfio group open, a host netdev in
// use), no live reservation of another domain has it, and this call did
// not pick it for another VF (taken).
func pickVF(o Options, h *host.Host, grp *config.Group, d libvirtx.HookDomain, t libvirtx.TeamedVF, reserved map[string]reservation, taken []string) (string, error) {
	g, errs := pipeline.ResolveGroup(h.Kernel, h.FS, grp)
	if len(errs) > 0 {
		return "", errs[0]
	}
	busy := map[pipeline.VFKey]string{}
	mine := map[pipeline.VFKey]bool{}
	for ai, a := range grp.Attachments {
		k := pipeline.VFKey{PF: a.PF, VF: a.VF}
		mac := a.MAC
		if mac == "" {
			mac = grp.VFMAC(a.PF, a.VF)
		}
		if a.Domain == d.Name && strings.EqualFold(mac, t.MAC) {
			mine[k] = true
			continue
		}
		busy[k] = fmt.Sprintf("attachments[%d] (domain %s)", ai, a.Domain)
	}
	for _, v := range grp.VFs {
		if v.Driver != "" {
			busy[pipeline.VFKey{PF: v.PF, VF: v.VF}] = "the host (driver " + v.Driver + ")"
		}
	}
	for _, r := range grp.PoolVFs() {
		busy[pipeline.VFKey{PF: r.PF, VF: r.VF}] = "the pool " + grp.NetworkName()
	}
	type cand struct {
		key pipeline.VFKey
		pci string
	}
	var cands []cand
	for _, pi := range g.Owners {
		pf := g.PFs[pi]
		for vf := 0; vf < grp.NumVFs; vf++ {
			a, ok, err := h.PCI.VF(pf.Dev, vf)
			if err != nil || !ok {
				continue
			}
			cands = append(cands, cand{pipeline.VFKey{PF: pi, VF: vf}, string(a)})
		}
	}
	if len(cands) == 0 {
		return "", fmt.Errorf("group %s has no VFs on this host (run `vflag up`)", grp.Name)
	}
	pcis := make([]string, len(cands))
	for i, c := range cands {
		pcis[i] = c.pci
	}
	held, herr := heldVFs(h, pcis)
	if herr != nil {
		return "", fmt.Errorf("who holds the group's VFs: %w", herr)
	}
	why := map[string]string{}
	free := func(c cand) bool {
		switch r, ok := reserved[c.pci]; {
		case slices.Contains(taken, c.pci):
			why[c.pci] = "picked for another VF of the domain"
		case ok && !(r.Domain == d.Name && (d.UUID == "" || r.UUID == "" || strings.EqualFold(d.UUID, r.UUID))):
			why[c.pci] = "reserved by the incoming migration of " + r.Domain
		case len(held[c.pci]) > 0:
			why[c.pci] = "held by " + held[c.pci][0].Who()
		case busy[c.key] != "":
			why[c.pci] = "taken by " + busy[c.key]
		default:
			return true
		}
		return false
	}
	// The config's own attachment of this domain first, then the address
	// the domain comes with, then the group's order.
	order := slices.Clone(cands)
	sort.SliceStable(order, func(i, j int) bool {
		rank := func(c cand) int {
			switch {
			case mine[c.key]:
				return 0
			case c.pci == t.PCI:
				return 1
			}
			return 2
		}
		return rank(order[i]) < rank(order[j])
	})
	for _, c := range order {
		if free(c) {
			return c.pci, nil
		}
	}
	var lines []string
	for _, c := range cands {
		lines = append(lines, c.pci+" "+why[c.pci])
	}
	return "", fmt.Errorf("no free VF of group %s on this host (%s): free one (a domain's attachment, the pool, a host driver) or raise numvfs", grp.Name, strings.Join(lines, "; "))
}

// markStarted marks the domain's reservations started ("started begin"):
// they hold until its release, whatever the time.
func markStarted(ctx context.Context, o Options, domain, uuid string) error {
	return eachReservation(ctx, o, domain, uuid, func(res *reservations, r reservation) error {
		if r.Started {
			return nil
		}
		r.Started = true
		return res.write(r)
	})
}

// dropReservations removes the domain's reservations (its release).
func dropReservations(ctx context.Context, o Options, domain, uuid string) error {
	return eachReservation(ctx, o, domain, uuid, func(res *reservations, r reservation) error {
		path, err := res.path(r.PCI)
		if err != nil {
			return err
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		o.Log.Info("migration: VF reservation dropped", "domain", domain, "vf", r.PCI)
		return nil
	})
}

// eachReservation runs fn on each live reservation of the domain, under
// the reservations' lock; nothing when no reservation was ever made.
func eachReservation(ctx context.Context, o Options, domain, uuid string, fn func(*reservations, reservation) error) error {
	if !hasReservations(o.StateDir) {
		return nil
	}
	res, err := openReservations(ctx, o)
	if err != nil {
		return err
	}
	defer res.close()
	all, err := res.live()
	if err != nil {
		return err
	}
	for _, r := range of(all, domain, uuid) {
		if err := fn(res, r); err != nil {
			return err
		}
	}
	return nil
}

// hasReservations: the reservation directory exists (the fast path of
// every other domain's start and release).
func hasReservations(stateDir string) bool {
	_, err := os.Lstat(ReservedDir(stateDir))
	return err == nil
}

// Reserved lists the live reservations (status, tests), by VF.
func Reserved(ctx context.Context, o Options) (map[string]string, error) {
	if !hasReservations(o.StateDir) {
		return nil, nil
	}
	res, err := openReservations(ctx, o)
	if err != nil {
		return nil, err
	}
	defer res.close()
	all, err := res.live()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for pci, r := range all {
		out[pci] = r.Domain
	}
	return out, nil
}

// heldVFs reads who holds the VFs, the kernel's answer (the hook never asks
// libvirt); libvirtd, which runs the hook, is not counted.
func heldVFs(h *host.Host, pcis []string) (holders.Set, error) {
	return holders.Kernel{FS: h.FS, Links: h.Kernel, Except: []int{os.Getppid()}}.Read(pcis)
}

// refuseReserved refuses a domain whose VF an incoming migration of another
// domain has reserved (the VF is that domain's from its "migrate begin").
func refuseReserved(ctx context.Context, o Options, d libvirtx.HookDomain, tasks []libvirtx.HookTask) error {
	if !hasReservations(o.StateDir) {
		return nil
	}
	res, err := openReservations(ctx, o)
	if err != nil {
		return fmt.Errorf("refusing to start domain %s: %w", d.Name, err)
	}
	defer res.close()
	all, err := res.live()
	if err != nil {
		return fmt.Errorf("refusing to start domain %s: %w", d.Name, err)
	}
	var problems []string
	for _, t := range tasks {
		r, ok := all[t.Device.PCI]
		if ok && len(of(map[string]reservation{r.PCI: r}, d.Name, d.UUID)) == 0 {
			problems = append(problems, fmt.Sprintf("VF %s is reserved by the incoming migration of domain %s", t.Device.PCI, r.Domain))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("refusing to start domain %s: %s", d.Name, strings.Join(problems, "; "))
	}
	return nil
}
