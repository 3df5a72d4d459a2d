package main

// Undoers: one per step kind, each working from its journal record alone
// (no config), treating "already gone" as success.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/sriov"
	"github.com/vflag/vflag/teardown"
)

// gone tells whether an error means the object is already absent.
func gone(err error) bool {
	return errors.Is(err, eswitch.ErrLinkNotFound) || errors.Is(err, fs.ErrNotExist)
}

func (e *env) undoers() teardown.Undoers {
	return teardown.Undoers{
		kindAutoprobe: func(_ context.Context, raw json.RawMessage) error {
			r, err := decode[autoprobeRecord](raw)
			if err != nil {
				return err
			}
			if _, err := sriov.ParseDevice(string(r.PF)); err != nil {
				return fmt.Errorf("journal: %w", err)
			}
			if err := e.pci.SetAutoprobe(r.PF, r.Prior); err != nil && !gone(err) {
				return err
			}
			return nil
		},
		kindParam: func(_ context.Context, raw json.RawMessage) error {
			r, err := decode[paramRecord](raw)
			if err != nil {
				return err
			}
			cur, err := e.k.Param(r.Devlink, r.Name)
			if errors.Is(err, eswitch.ErrNotSupported) || gone(err) || cur == r.Prior {
				return nil
			}
			if err != nil {
				return err
			}
			return e.k.SetParam(r.Devlink, r.Name, r.Prior)
		},
		kindNumVFs: func(_ context.Context, raw json.RawMessage) error {
			r, err := decode[numVFsRecord](raw)
			if err != nil {
				return err
			}
			if _, err := sriov.ParseDevice(string(r.PF)); err != nil {
				return fmt.Errorf("journal: %w", err)
			}
			if !e.pci.Exists(r.PF) {
				return nil
			}
			return e.pci.SetNumVFs(r.PF, r.Prior)
		},
		kindVFMAC: func(_ context.Context, raw json.RawMessage) error {
			r, err := decode[vfMACRecord](raw)
			if err != nil {
				return err
			}
			return restoreVFMAC(e.k, r.PF, r.VF, r.Prior)
		},
		kindUnbind: e.undoDrivers,
		kindBind:   e.undoDrivers,
		kindMode: func(_ context.Context, raw json.RawMessage) error {
			r, err := decode[modeRecord](raw)
			if err != nil {
				return err
			}
			cur, err := e.k.EswitchMode(r.Devlink)
			if err != nil {
				if gone(err) {
					return nil
				}
				return err
			}
			if cur == r.Prior {
				return nil
			}
			if err := e.k.SetEswitchMode(r.Devlink, r.Prior); err != nil {
				return fmt.Errorf("set eswitch mode on %s: %w", r.Devlink, err)
			}
			return nil
		},
		kindTCOffload: func(_ context.Context, raw json.RawMessage) error {
			r, err := decode[featureRecord](raw)
			if err != nil {
				return err
			}
			if err := e.k.SetFeature(r.Netdev, r.Feature, r.Prior); err != nil && !gone(err) {
				return err
			}
			return nil
		},
		kindBond: func(_ context.Context, raw json.RawMessage) error {
			r, err := decode[bondRecord](raw)
			if err != nil {
				return err
			}
			l, err := e.k.Link(r.Name)
			if gone(err) {
				return nil
			}
			if err != nil {
				return err
			}
			if l.Alias != r.Alias {
				e.log.Warn("bond is no longer vflag's; left alone", "bond", r.Name, "alias", l.Alias)
				return nil
			}
			if err := e.k.DeleteLink(r.Name); err != nil && !gone(err) {
				return err
			}
			return nil
		},
		kindEnslave: func(_ context.Context, raw json.RawMessage) error {
			r, err := decode[enslaveRecord](raw)
			if err != nil {
				return err
			}
			l, err := e.k.Link(r.Slave)
			if gone(err) {
				return nil
			}
			if err != nil {
				return err
			}
			if l.Master == r.Bond {
				if err := e.k.SetMaster(r.Slave, r.PriorMaster); err != nil && !gone(err) {
					return err
				}
			}
			if l.AdminUp != r.PriorUp {
				if err := e.k.SetLinkUp(r.Slave, r.PriorUp); err != nil && !gone(err) {
					return err
				}
			}
			return nil
		},
		kindLinkUp: e.undoLinkUp,
		kindRepsUp: e.undoLinkUp,
		kindOVS: func(ctx context.Context, raw json.RawMessage) error {
			r, err := decode[ovsRecord](raw)
			if err != nil {
				return err
			}
			c, err := ovs.Connect(ctx, r.Endpoint)
			if err != nil {
				return err
			}
			defer c.Close()
			// Every port the owner holds on the bridge, also those a later run added.
			return c.UndoOwned(ctx, r.Bridge)
		},
		kindAttach: func(_ context.Context, raw json.RawMessage) error {
			r, err := decode[attachRecord](raw)
			if err != nil {
				return err
			}
			c, err := libvirtx.Open(r.URI)
			if err != nil {
				return err
			}
			defer c.Close()
			return c.Detach(r.Attachment)
		},
	}
}

// restoreVFMAC puts back the MAC a VF had ("" = none: the zero MAC, as
// after VF creation); a PF or VF that is gone needs nothing.
func restoreVFMAC(k eswitch.Kernel, pf string, vf int, prior string) error {
	l, err := k.Link(pf)
	if gone(err) {
		return nil
	}
	if err != nil {
		return err
	}
	exists := false
	for _, v := range l.VFs {
		exists = exists || v.ID == vf
	}
	if !exists {
		return nil
	}
	if prior == "" {
		prior = "00:00:00:00:00:00"
	}
	mac, err := net.ParseMAC(prior)
	if err != nil {
		return fmt.Errorf("bad prior MAC %q of VF %d of %s: %w", prior, vf, pf, err)
	}
	return k.SetVFMAC(pf, vf, mac)
}

// undoDrivers rebinds VFs to the drivers they had (an empty prior driver
// means unbound) and puts their driver_override back.
func (e *env) undoDrivers(_ context.Context, raw json.RawMessage) error {
	r, err := decode[driversRecord](raw)
	if err != nil {
		return err
	}
	var errs []error
	for _, a := range sortedAddrs(r.Drivers) {
		if !e.pci.Exists(a) {
			continue // the VF is gone
		}
		if prior := r.Drivers[a]; prior == "" {
			if err := e.pci.Unbind(a); err != nil {
				errs = append(errs, err)
			}
		} else if err := e.pci.Bind(a, prior); err != nil {
			errs = append(errs, err)
		}
		if err := e.pci.SetDriverOverride(a, r.Overrides[a]); err != nil && !gone(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (e *env) undoLinkUp(_ context.Context, raw json.RawMessage) error {
	r, err := decode[linkUpRecord](raw)
	if err != nil {
		return err
	}
	// In one call where the kernel allows it; an interface already gone is
	// skipped, as one SetLinkUp per name would.
	for names := r.Names; len(names) > 0; {
		n, err := eswitch.SetLinksUp(e.k, names, false)
		if err == nil {
			break
		}
		if !gone(err) {
			return err
		}
		names = names[n+1:]
	}
	return nil
}
