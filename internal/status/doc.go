// Package status gathers `vflag status`: per configured group, the PFs,
// bond, hardware LAG, OVS bridge and datapath, and every VF with its
// representor, OVS port and libvirt domain, as the host shows them. Every
// static check of vflag validate that fails is a problem line, named as
// validate names it (internal/validaterun.Static), and so is what status
// could not read: never a guess. Rendering (text, JSON, Prometheus), the
// journal and boot-unit problems and the exit code are cmd/vflag's.
package status
