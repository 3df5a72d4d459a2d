package eswitch

import (
	"fmt"

	"github.com/vishvananda/netlink/nl"
)

// Eswitch encap modes as devlink prints them ("devlink dev eswitch show
// $dev": encap-mode none|basic).
const (
	EncapNone  = "none"
	EncapBasic = "basic"
)

// EncapModer is what a Kernel adds for the eswitch's encap mode: mlx5
// offloads tunnel encap and decap rules only with basic (its default
// where the FDB has reformat and decap). It changes in legacy (stored)
// or in switchdev while no flow is offloaded (EOPNOTSUPP otherwise).
type EncapModer interface {
	// EncapMode reads it ("devlink dev eswitch show $dev"); ErrNotSupported
	// where the driver reports none (netdevsim).
	EncapMode(d Devlink) (string, error)
	// SetEncapMode sets it ("devlink dev eswitch set $dev encap-mode $mode").
	SetEncapMode(d Devlink, mode string) error
}

var _ EncapModer = Netlink{}

// EncapMode implements EncapModer.
func (n Netlink) EncapMode(d Devlink) (string, error) {
	h, done, err := n.handle()
	if err != nil {
		return "", err
	}
	defer done()
	dev, err := devlinkDevice(h, d)
	if err != nil {
		return "", err
	}
	if dev.Attrs.Eswitch.Mode == "" || dev.Attrs.Eswitch.EncapMode == "" || dev.Attrs.Eswitch.EncapMode == "unknown" {
		return "", fmt.Errorf("devlink dev %s shows no encap-mode: %w", d, ErrNotSupported)
	}
	return dev.Attrs.Eswitch.EncapMode, nil
}

// SetEncapMode implements EncapModer.
func (n Netlink) SetEncapMode(d Devlink, mode string) error {
	var v uint8
	switch mode {
	case EncapNone:
	case EncapBasic:
		v = 1
	default:
		return fmt.Errorf("devlink dev eswitch set %s encap-mode %s: not none or basic", d, mode)
	}
	_, err := n.rateExec(nl.DEVLINK_CMD_ESWITCH_SET, 0, func(req *nl.NetlinkRequest) {
		addDevlink(req, d)
		req.AddData(nl.NewRtAttr(nl.DEVLINK_ATTR_ESWITCH_ENCAP_MODE, nl.Uint8Attr(v)))
	})
	if err != nil {
		return fmt.Errorf("devlink dev eswitch set %s encap-mode %s: %w", d, mode, err)
	}
	return nil
}
