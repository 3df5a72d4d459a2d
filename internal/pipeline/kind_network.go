package pipeline

import (
	"context"
	"fmt"
	"slices"

	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/teardown"
)

// networkKind keeps a group's VF pool as a libvirt hostdev network
// (DESIGN.md step 11): defined persistent with vflag's metadata, active and
// autostarted, its <forward mode='hostdev'> addresses the pool's VFs, its
// portgroups the config's. A domain takes a VF from it at start with
// <interface type='network'><source network='...'/>.
//
//	virsh net-define pool.xml && virsh net-start $name && virsh net-autostart $name
//
// A network of that name without vflag's metadata is foreign: refused, never
// changed. A change that takes from the pool a VF whose port a domain holds
// is refused before any write, naming the domain.
type networkKind struct{}

type networkRecord struct {
	URI   string `json:"uri"`
	Name  string `json:"name"`
	Owner string `json:"owner"` // the group
}

func (networkKind) Name() string { return KindNetwork }

// DependsOn: none. The VFs a numvfs change makes again have the same PCI
// addresses, so the pool stays right.
func (networkKind) DependsOn() []string { return nil }

func (k networkKind) id(name string) string { return k.Name() + "/" + name }

// Pool is the group's pool as VF keys: the config's list, or by default
// every free VF of the PFs that own VFs (one netdevsim device has its VFs
// on its first port only).
func (g Group) Pool() []VFKey {
	if g.Network == nil {
		return nil
	}
	owner := map[int]bool{}
	for _, i := range g.Owners {
		owner[i] = true
	}
	explicit := len(g.Network.VFs) > 0
	var out []VFKey
	for _, r := range g.PoolVFs() {
		if explicit || owner[r.PF] {
			out = append(out, VFKey(r))
		}
	}
	return out
}

// NetworkSpec is what the group's network must be, with the VFs' PCI
// addresses in pcis; missing lists the pool's VFs that do not exist (yet).
func NetworkSpec(g Group, pcis map[VFKey]string) (spec libvirtx.NetworkSpec, missing []VFKey) {
	spec = libvirtx.NetworkSpec{Name: g.NetworkName(), Owner: g.Name}
	for _, k := range g.Pool() {
		a, ok := pcis[k]
		if !ok {
			missing = append(missing, k)
			continue
		}
		spec.PCIs = append(spec.PCIs, a)
	}
	for _, pg := range g.Network.Portgroups {
		spec.Portgroups = append(spec.Portgroups, libvirtx.NetworkPortgroup{
			Name: pg.Name, Default: pg.Default, VLAN: pg.VLAN, VLANMode: pg.VLANMode,
			Trunks: slices.Clone(pg.Trunks), LibvirtVLAN: !g.Switchdev()})
	}
	return spec, missing
}

// portHolders lists each port's domain and VF (libvirtx.PortHolders).
func portHolders(ps []libvirtx.NetworkPort) string { return libvirtx.PortHolders(ps) }

// step keeps the network: its check shows libvirtx's plan of it (what
// EnsureNetwork would do, or why it refuses), its apply is EnsureNetwork,
// which makes that plan again and carries it out.
func (k networkKind) step(e *Env, spec libvirtx.NetworkSpec) teardown.Step {
	return teardown.Step{
		Kind: k.Name(), ID: k.id(spec.Name),
		Check: func(context.Context) (teardown.Change, error) {
			c, err := e.h.Virt()
			if err != nil {
				return teardown.Change{}, err
			}
			p, err := c.PlanNetwork(spec)
			if err != nil {
				return teardown.Change{}, fmt.Errorf("libvirt network %s: %w", spec.Name, err)
			}
			if p.Refused != nil {
				return teardown.Change{}, p.Refused
			}
			rec := networkRecord{URI: e.h.Libvirt, Name: spec.Name, Owner: spec.Owner}
			if !p.Needed() {
				return teardown.Change{Summary: fmt.Sprintf("libvirt network %s: %d VF(s), active, autostart", spec.Name, p.PoolSize), Record: rec}, nil
			}
			return teardown.Change{Needed: true,
				Summary: fmt.Sprintf("libvirt network %s: %s", spec.Name, p),
				Revert:  fmt.Sprintf("libvirt network %s: destroy, undefine", spec.Name),
				Record:  rec}, nil
		},
		Apply: func(context.Context) error {
			c, err := e.h.Virt()
			if err != nil {
				return err
			}
			if _, err := c.EnsureNetwork(spec); err != nil {
				return fmt.Errorf("libvirt network %s: %w", spec.Name, err)
			}
			return nil
		},
	}
}

// networkPorts are the allocated ports of the network of a journal entry
// (none when it is gone or not vflag's).
func (e *Env) networkPorts(en teardown.Entry) ([]libvirtx.NetworkPort, error) {
	rec, err := decode[networkRecord](en.Record)
	if err != nil {
		return nil, fmt.Errorf("journal entry %s: %w", en.ID, err)
	}
	c, done, err := e.virtAt(rec.URI)
	if err != nil {
		return nil, err
	}
	defer done()
	st, err := c.Network(rec.Name)
	if err != nil || !st.Owned {
		return nil, err
	}
	return st.Ports, nil
}

// Undo removes vflag's network (destroy, undefine); libvirtx refuses while
// a port of it is allocated (a domain holds one of its VFs).
func (networkKind) Undo(ctx context.Context, e *Env, r networkRecord) (string, error) {
	c, done, err := e.virtAt(r.URI)
	if err != nil {
		return "", err
	}
	defer done()
	removed, err := c.RemoveNetwork(r.Name)
	if err != nil {
		return "", fmt.Errorf("libvirt network %s: %w", r.Name, err)
	}
	if !removed {
		return fmt.Sprintf("libvirt network %s: already gone", r.Name), nil
	}
	return fmt.Sprintf("libvirt network %s: destroyed, undefined", r.Name), nil
}

// network: the group's pool, after the attachments (which take their VFs
// out of it).
func (run *groupRun) network(context.Context) ([]batch, error) {
	g := run.g
	if g.Network == nil {
		return nil, nil
	}
	vfs, err := run.namedVFs()
	if err != nil {
		return nil, err
	}
	// A numvfs change of this run makes VFs again at the same addresses.
	pcis := map[VFKey]string{}
	for k, a := range vfs {
		pcis[k] = string(a)
	}
	spec, missing := NetworkSpec(g, pcis)
	spec.Replaces = run.e.ReplacedNetworks()
	id := networkKind{}.id(spec.Name)
	switch {
	case len(missing) == 0:
		return one(networkKind{}.step(run.e, spec)), nil
	case run.dry:
		return one(predicted(KindNetwork, id, fmt.Sprintf("libvirt network %s: hostdev pool of %d VF(s) (after VF creation)", spec.Name, len(g.Pool())))), nil
	default:
		return nil, fmt.Errorf("libvirt network %s: pool VF %s does not exist", spec.Name, missing[0])
	}
}
