package hook

import (
	"fmt"
	"os"
	"strings"

	"github.com/vflag/vflag/internal/holders"
	"github.com/vflag/vflag/libvirtx"
)

// refuseHeld refuses a domain whose VF something else holds, as the kernel
// shows it (internal/holders): a process with the VF's vfio group open
// (another domain's QEMU, a DPDK application), or a host netdev of the VF
// that is up, addressed or enslaved. The holder is named in the words of
// vflag's disruption gate (plan, up, down, status). libvirtd, which runs
// the hook, is not counted (it may open the VF for the domain it starts),
// and libvirt is not asked (the hook must not call it). A kernel view that
// cannot be read is a warning, not a refusal: the hook does not destroy the
// VF, and libvirt's own open of the group fails (EBUSY) while another
// process holds it.
func (p *preparer) refuseHeld(domain string, tasks []libvirtx.HookTask) error {
	vfs := make([]string, 0, len(tasks))
	for _, t := range tasks {
		vfs = append(vfs, t.Device.PCI)
	}
	held, err := holders.Kernel{FS: p.h.FS, Links: p.h.Kernel, Except: []int{os.Getppid()}}.Read(vfs)
	if err != nil {
		fmt.Fprintf(p.o.Stderr, "vflag hook: domain %s: who holds its VFs not checked: %v\n", domain, err)
		return nil
	}
	if len(held) == 0 {
		return nil
	}
	return fmt.Errorf("refusing to start domain %s: VF in use: %s (see `vflag status`)", domain, strings.Join(held.Lines(), "; "))
}
