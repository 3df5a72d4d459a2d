package sim

import (
	"strconv"
	"strings"
)

// pciDirFast is pciDir with a lookup fast path for a PF's virtfn<i> links:
// resolving one link (sriov.Host.VFs reads each) then costs O(1) instead of
// building the whole directory, which made listing a PF's VFs quadratic in
// the VF count. So is a function's driver link (sriov.Host.Driver reads it
// for every VF), and its net/ directory. Every other name falls back to
// the directory.
func (t tree) pciDirFast(d pciDev) *node {
	n := t.pciDir(d)
	n.lookup = func(name string) *node {
		if idx, ok := strings.CutPrefix(name, "virtfn"); ok && d.vf == nil {
			i, err := strconv.Atoi(idx)
			if err != nil || strconv.Itoa(i) != idx || i < 0 || i >= len(d.pf.VFs) {
				return nil
			}
			vf := d.pf.VFs[i]
			if !vf.ready(t.now) {
				return nil
			}
			return linkNode("../" + vf.PCI)
		}
		if name == "driver" { // as pciDir makes it, without the directory's net/ scan
			if drv := d.driver(); drv != "" {
				return linkNode(rel(t.devPath(d), "/sys/bus/pci/drivers/"+drv))
			}
			return nil
		}
		if name == "net" { // a VF's netdevs (sriov.Host.Netdevs lists them)
			return t.pciNetDir(d)
		}
		if name == "infiniband" {
			return n.kids()[name]
		}
		return t.pciEntries(d, false)[name] // without the netdev and VF scans

	}
	return n
}
