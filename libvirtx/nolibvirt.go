//go:build vflag_nolibvirt

package libvirtx

import "errors"

// ErrNotLinked is the error of every connection in a binary built with the
// vflag_nolibvirt tag (vflag-hook): it does not link libvirt's C library,
// and the hooks must never call back into libvirt anyway.
var ErrNotLinked = errors.New("libvirt: not linked into this binary (built with vflag_nolibvirt)")

// Conn is the connection type of a binary without libvirt: Open always
// fails, so no Conn exists and its methods are never reached.
type Conn struct{}

// Open fails: this binary does not link libvirt.
func Open(uri string) (*Conn, error) { return nil, ErrNotLinked }

// Close does nothing.
func (c *Conn) Close() error { return nil }

// Prefetch does nothing.
func (c *Conn) Prefetch(names ...string) {}

// Exists fails (ErrNotLinked).
func (c *Conn) Exists(name string) (bool, error) { return false, ErrNotLinked }

// Domain fails (ErrNotLinked).
func (c *Conn) Domain(name string) (DomainState, error) {
	return DomainState{Name: name}, ErrNotLinked
}

// Plan fails (ErrNotLinked).
func (c *Conn) Plan(a Attachment) (needed bool, why string, err error) {
	return false, "", ErrNotLinked
}

// TeamingProblems fails (ErrNotLinked).
func (c *Conn) TeamingProblems(a Attachment) ([]Problem, error) { return nil, ErrNotLinked }

// Attach fails (ErrNotLinked).
func (c *Conn) Attach(a Attachment) (Record, bool, error) { return Record{}, false, ErrNotLinked }

// Detach fails (ErrNotLinked).
func (c *Conn) Detach(r Record) error { return ErrNotLinked }

// HoldingDomains fails (ErrNotLinked).
func (c *Conn) HoldingDomains(pcis []string) (map[string]string, error) {
	return nil, ErrNotLinked
}

// StartAutostarted fails (ErrNotLinked).
func (c *Conn) StartAutostarted(name string) (bool, error) { return false, ErrNotLinked }

// Network fails (ErrNotLinked).
func (c *Conn) Network(name string) (NetworkState, error) {
	return NetworkState{Name: name}, ErrNotLinked
}

// PlanNetwork fails (ErrNotLinked).
func (c *Conn) PlanNetwork(s NetworkSpec) (NetworkPlan, error) { return NetworkPlan{}, ErrNotLinked }

// TakenVFs fails (ErrNotLinked).
func (c *Conn) TakenVFs(name string, pcis []string, replaced ...string) ([]TakenVF, error) {
	return nil, ErrNotLinked
}

// EnsureNetwork fails (ErrNotLinked).
func (c *Conn) EnsureNetwork(s NetworkSpec) (bool, error) { return false, ErrNotLinked }

// RemoveNetwork fails (ErrNotLinked).
func (c *Conn) RemoveNetwork(name string) (bool, error) { return false, ErrNotLinked }
