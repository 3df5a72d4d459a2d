//go:build !vflag_nolibvirt

package libvirtx

import "time"

// SetSharedMaxAge sets how long c's prefetched reads answer (sharedMaxAge).
func SetSharedMaxAge(c *Conn, d time.Duration) {
	c.sharedMu.Lock()
	c.sharedAge = d
	c.sharedMu.Unlock()
}
