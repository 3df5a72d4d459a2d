package pipeline

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/teardown"
)

// ovnBindKind is the qemu hook's binding of a domain's VF to its logical
// port: the representor's Interface external_ids that up's bridge step
// also sets (bindIDs: iface-id, attached-mac, vm-uuid, iface-status),
// written at prepare from the domain's own XML (its UUID) and put back at
// release. Its record holds only the keys the hook changed, each with its
// prior value (nil: absent): a binding up had made already journals
// nothing, and release leaves it.
//
//	ovs-vsctl set Interface $rep external_ids:iface-id=$lsp external_ids:iface-status=active \
//	    [external_ids:attached-mac=$mac] [external_ids:vm-uuid=$uuid]
type ovnBindKind struct{}

type ovnBindRecord struct {
	Endpoint string             `json:"endpoint"`
	Iface    string             `json:"iface"`
	Set      map[string]string  `json:"set"`   // the keys changed, with the values set
	Prior    map[string]*string `json:"prior"` // their values before (nil: absent)
}

// KindOVNBind is the journal name of the hook's OVN binding.
const KindOVNBind = "ovn.bind"

func (ovnBindKind) Name() string { return KindOVNBind }

// DependsOn: the port the binding is on is the bridge step's or the
// hook's port step's.
func (ovnBindKind) DependsOn() []string {
	return []string{ovsBridgeKind{}.Name(), ovsPortKind{}.Name()}
}

// OVNBindFor is the binding the hook gives VF k of group g while domain
// (whose UUID is uuid) holds it: the one up's bridge step gives it
// (bindIDs), from the attachment with ovn_port that gives this VF to this
// domain; ok is false when there is none (no ovn section, no such
// attachment, or the attachment names another domain).
func OVNBindFor(g *config.Group, k VFKey, domain, uuid string) (map[string]string, bool) {
	for _, p := range g.OVNPorts("") {
		if p.Domain == "" || p.Domain != domain || p.VF.PF != k.PF || p.VF.VF != k.VF {
			continue
		}
		return bindIDs(ovnBinding{LSP: p.LSP, MAC: p.MAC, Domain: p.Domain}, uuid), true
	}
	return nil, false
}

// OVNPoolBind is the binding the hook gives a pool VF while a domain
// (whose UUID is uuid) holds it through its interface with MAC mac: the
// logical port lsp the domain's metadata names for that interface.
func OVNPoolBind(lsp, mac, uuid string) map[string]string {
	return bindIDs(ovnBinding{LSP: lsp, MAC: mac}, uuid)
}

// OVNBindStep sets the binding keys want on the Interface iface (a
// representor of the run's OVSDB endpoint). Its Check reads the Interface
// and records the keys that differ; an Interface that does not exist is
// an error (the port step before it makes it).
func (e *Env) OVNBindStep(endpoint, iface string, want map[string]string) teardown.Step {
	k := ovnBindKind{}
	return teardown.Step{
		Kind: k.Name(), ID: k.Name() + "/" + iface,
		Check: func(ctx context.Context) (teardown.Change, error) {
			if endpoint != e.h.OVSDB {
				return teardown.Change{}, fmt.Errorf("%s: endpoint %s is not this run's (%s)", KindOVNBind, endpoint, e.h.OVSDB)
			}
			c, err := e.h.OVS(ctx)
			if err != nil {
				return teardown.Change{}, err
			}
			ids, err := c.InterfaceIDs(ctx, []string{iface})
			if err != nil {
				return teardown.Change{}, err
			}
			cur, ok := ids[iface]
			if !ok {
				return teardown.Change{}, fmt.Errorf("interface %s not found", iface)
			}
			r := ovnBindRecord{Endpoint: endpoint, Iface: iface, Set: map[string]string{}, Prior: map[string]*string{}}
			var changes []string
			for _, key := range slices.Sorted(maps.Keys(want)) {
				v, had := cur[key]
				if had && v == want[key] {
					continue
				}
				r.Set[key] = want[key]
				if had {
					r.Prior[key] = &v
				} else {
					r.Prior[key] = nil
				}
				changes = append(changes, fmt.Sprintf("%s %s -> %s", key, orDash(v), want[key]))
			}
			if len(changes) == 0 {
				return teardown.Change{Summary: fmt.Sprintf("%s bound to %s", iface, want["iface-id"])}, nil
			}
			return teardown.Change{Needed: true, Record: r,
				Summary: fmt.Sprintf("%s external_ids: %s", iface, strings.Join(changes, ", ")),
				Revert:  fmt.Sprintf("%s external_ids: %s back", iface, strings.Join(slices.Sorted(maps.Keys(r.Set)), ", "))}, nil
		},
		Apply: func(ctx context.Context) error {
			c, err := e.h.OVS(ctx)
			if err != nil {
				return err
			}
			set := make(map[string]*string, len(want))
			for key, v := range want {
				set[key] = &v
			}
			return c.SetInterfaceIDs(ctx, iface, set)
		},
	}
}

// Undo puts each recorded key's prior value back (removes a key that was
// absent) where the key still has the value the hook set: a key changed
// since (by up, by an operator) is left as it is, and so is a key the
// hook's crashed prepare never wrote. An Interface that is gone is undone.
func (ovnBindKind) Undo(ctx context.Context, e *Env, r ovnBindRecord) (string, error) {
	c, done, err := e.ovsAt(ctx, r.Endpoint)
	if err != nil {
		return "", err
	}
	defer done()
	ids, err := c.InterfaceIDs(ctx, []string{r.Iface})
	if err != nil {
		return "", err
	}
	cur, ok := ids[r.Iface]
	if !ok {
		return fmt.Sprintf("interface %s gone", r.Iface), nil
	}
	back := map[string]*string{}
	var did, left []string
	for _, key := range slices.Sorted(maps.Keys(r.Set)) {
		if v, had := cur[key]; !had || v != r.Set[key] {
			left = append(left, key)
			continue
		}
		back[key] = r.Prior[key]
		did = append(did, fmt.Sprintf("%s -> %s", key, orDash(deref(r.Prior[key]))))
	}
	if len(back) > 0 {
		if err := c.SetInterfaceIDs(ctx, r.Iface, back); err != nil {
			return "", err
		}
	}
	out := fmt.Sprintf("%s external_ids: %s", r.Iface, orDash(strings.Join(did, ", ")))
	if len(left) > 0 {
		out += fmt.Sprintf(" (%s not as set: left)", strings.Join(left, ", "))
	}
	return out, nil
}
