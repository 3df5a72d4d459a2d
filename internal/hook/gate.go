package hook

import "fmt"

// gate refuses to start a domain holding vflag's VFs before up has brought
// the VF-LAG up in this boot (their drivers are bound strictly after the
// LAG); an autostarted domain is recorded as deferred first, and the mark
// read again after that (see internal/bootgate for the order).
func gate(o Options, domain string) error {
	if o.Gate == nil {
		return nil
	}
	ready, err := o.Gate.Ready()
	if err != nil {
		return fmt.Errorf("refusing to start domain %s: %w", domain, err)
	}
	if ready {
		return nil
	}
	if !o.Autostart(domain) {
		return fmt.Errorf("refusing to start domain %s: vflag has not brought the VF-LAG up in this boot yet, and its VFs must not be used before; start it after `vflag up` (vflag.service runs it at boot)", domain)
	}
	if err := o.Gate.Defer(domain); err != nil {
		return fmt.Errorf("refusing to start domain %s: %w", domain, err)
	}
	if ready, err := o.Gate.Ready(); err == nil && ready {
		_ = o.Gate.Undefer(domain) // up finished meanwhile: go on
		return nil
	}
	return fmt.Errorf("deferring the autostart of domain %s: vflag has not brought the VF-LAG up in this boot yet; `vflag up` (vflag.service) starts it once it has", domain)
}
