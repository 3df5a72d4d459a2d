package testbed

import "strings"

// PointConfig rewrites the example config (vflag example-config) for a
// private test bed: the OVSDB endpoint and libvirt URI of the bed's daemons,
// the simulated netdevs mirrored into ovs-vswitchd's network namespace, and
// the userspace datapath (the build machines have no openvswitch module).
func PointConfig(cfg, ovsdb, libvirtURI, netns string) string {
	cfg = strings.Replace(cfg, "ovsdb: unix:/var/run/openvswitch/db.sock", "ovsdb: "+ovsdb, 1)
	cfg = strings.Replace(cfg, "libvirt: qemu:///system", "libvirt: "+libvirtURI, 1)
	if netns != "" {
		cfg = strings.Replace(cfg, "sim:\n", "sim:\n  mirror_netns: "+netns+"\n", 1)
	}
	return strings.Replace(cfg, "      hw_offload: true\n", "      hw_offload: true\n      datapath_type: netdev\n", 1)
}
