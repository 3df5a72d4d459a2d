package status

import (
	"github.com/vflag/vflag/internal/holders"
	"github.com/vflag/vflag/internal/host"
)

// gatherHolders fills each VF's holders as the kernel shows them
// (internal/holders: a process with its vfio group open, a host netdev in
// use), in the words of vflag's disruption gate. libvirt is not asked: the
// VF's domain column is the config's attachment. A kernel view that cannot
// be read is said on the group, not made a problem: the host is not at
// fault (status may run as a user who cannot read other processes' files).
func gatherHolders(gs *GroupStatus, h *host.Host) {
	var pcis []string
	for _, v := range gs.VFs {
		if v.PCI != "" && v.Driver != "" { // an unbound VF is held by nobody
			pcis = append(pcis, v.PCI)
		}
	}
	if len(pcis) == 0 {
		return
	}
	held, err := holders.Kernel{FS: h.FS, Links: h.Kernel}.Read(pcis)
	if err != nil {
		gs.HoldersError = err.Error()
		return
	}
	for i := range gs.VFs {
		gs.VFs[i].Holders = held[gs.VFs[i].PCI]
	}
}
