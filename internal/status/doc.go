// Package status gathers `vflag status`: per configured group, the PFs,
// bond, hardware LAG, OVS bridge and datapath, and every VF with its
// representor, OVS port and libvirt domain, as the host shows them. What
// cannot be read becomes a problem line, never a guess. Rendering (text,
// JSON, Prometheus) is cmd/vflag's.
package status
