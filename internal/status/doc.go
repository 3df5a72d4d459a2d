// Package status gathers `vflag status`: per configured group, the PFs,
// bond, hardware LAG, OVS bridge and datapath, and every VF with its
// representor, OVS port and libvirt domain, as the host shows them. Every
// static check of vflag validate that fails is a problem line, named as
// validate names it (internal/validaterun.Static), and so is each change
// vflag plan would make (validaterun.PlanDrift: the one comparison of the
// host against the config) and what status could not read: never a guess.
// A group never brought up, or brought down, has the one problem "not up". The journal's and the failed boot units'
// problems are added by the caller (AddJournalProblem, AddBootProblems)
// after Gather. The package renders the status as text (WriteText), as a
// tree (WriteTree) and as Prometheus textfile metrics (WritePrometheus);
// JSON is the HostStatus itself. The exit code is cmd/vflag's.
package status
