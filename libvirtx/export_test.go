//go:build !vflag_nolibvirt

package libvirtx

import "time"

// SetSharedMaxAge sets how long c's prefetched reads answer (sharedMaxAge).
func SetSharedMaxAge(c *Conn, d time.Duration) {
	c.sharedMu.Lock()
	c.sharedAge = d
	c.sharedMu.Unlock()
}

// WaitPrefetch waits until c's Prefetch reads are done (a test that then
// changes a domain behind c's back knows what the reads saw).
func WaitPrefetch(c *Conn) { c.reading.Wait() }
