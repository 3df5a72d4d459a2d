package pipeline

import (
	"fmt"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/sriov"
)

// Group is a config group with its PFs as found on the host.
type Group struct {
	*config.Group
	// PFs are the resolved PFs, in the config's order (all of them when
	// ResolveGroup returned no error).
	PFs []eswitch.PF
	// Owners indexes the PFs that own VFs: the first PF of each SR-IOV
	// device (both mlx5 PFs; one of two netdevsim ports, which share a device).
	Owners []int
}

// PFError is a PF reference that does not resolve to a usable PF.
type PFError struct {
	Index int
	Ref   string
	Err   error
}

func (e *PFError) Error() string { return fmt.Sprintf("pfs[%d] %q: %v", e.Index, e.Ref, e.Err) }
func (e *PFError) Unwrap() error { return e.Err }

// ResolveGroup finds the group's PFs on the host: the one place every
// command (up, status, validate, hook, install, roce) resolves them. The
// PFs that resolve are returned with an error for each that does not.
func ResolveGroup(k eswitch.Kernel, f sysfs.FS, g *config.Group) (Group, []*PFError) {
	out := Group{Group: g}
	var errs []*PFError
	for i, ref := range g.PFs {
		pf, err := eswitch.ResolvePF(k, f, ref)
		if err != nil {
			errs = append(errs, &PFError{Index: i, Ref: ref, Err: err})
			continue
		}
		out.PFs = append(out.PFs, pf)
	}
	out.Owners = Owners(out.PFs)
	return out, errs
}

// Owners returns the index of the first PF of each distinct device.
func Owners(pfs []eswitch.PF) []int {
	var out []int
	seen := map[sriov.Device]bool{}
	for i, pf := range pfs {
		if !seen[pf.Dev] {
			seen[pf.Dev] = true
			out = append(out, i)
		}
	}
	return out
}

// VFKey names one VF by logical coordinates: the index of its PF in the
// group's pfs and the VF index.
type VFKey struct{ PF, VF int }

func (k VFKey) String() string { return fmt.Sprintf("pf %d vf %d", k.PF, k.VF) }

// devlinks lists the distinct devlink instances of the PFs (netdevsim has one for both ports).
func devlinks(pfs []eswitch.PF) []eswitch.Devlink {
	var out []eswitch.Devlink
	seen := map[eswitch.Devlink]bool{}
	for _, pf := range pfs {
		if !seen[pf.Devlink] {
			seen[pf.Devlink] = true
			out = append(out, pf.Devlink)
		}
	}
	return out
}

func netdevs(pfs []eswitch.PF) []string {
	var out []string
	for _, pf := range pfs {
		out = append(out, pf.Netdev)
	}
	return out
}

// VFAddr is the PCI address of VF vf of the group's PF pf, ok false when
// it does not exist (yet).
func (e *Env) VFAddr(g Group, k VFKey) (sriov.Addr, bool, error) {
	if k.PF < 0 || k.PF >= len(g.PFs) {
		return "", false, nil
	}
	return e.pci.VF(g.PFs[k.PF].Dev, k.VF)
}
