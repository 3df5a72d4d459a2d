//go:build vflag_nolibvirt

package libvirtx

import "time"

// SetSharedMaxAge does nothing: this build has no connections.
func SetSharedMaxAge(c *Conn, d time.Duration) {}

// WaitPrefetch does nothing: this build has no connections.
func WaitPrefetch(c *Conn) {}
