package docs

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// ConfigManPage is vflag.yaml(5): the config file's fields, defaults and
// what changing each costs, from configuration.md's field table, in roff
// (man(7) macros). date is the page's date (SOURCE_DATE_EPOCH in make
// package).
func ConfigManPage(date time.Time) (string, error) {
	fields, err := Fields()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, ".TH \"VFLAG.YAML\" \"5\" \"%s\" \"vflag\" \"vflag manual\"\n", date.UTC().Format("Jan 2006"))
	b.WriteString(`.SH NAME
vflag.yaml \- vflag's configuration file
.SH SYNOPSIS
.B /etc/vflag/vflag.yaml
.SH DESCRIPTION
The YAML file
.BR vflag (1)
reads (\fB\-\-config\fR, \fBVFLAG_CONFIG\fR).
It lists LAG groups, one per dual\-port NIC: the two ports, the VFs per port, the bond, the VFs' settings, the Open vSwitch bridge and the libvirt attachments or VF pool.
A key vflag does not know is an error naming the nearest it knows; every error names the field's path and value, and comes before any change to the host.
Durations take a unit (\fB30s\fR, \fB5m\fR).
The top\-level \fBovsdb\fR, \fBlibvirt\fR, \fBlag_timeout\fR, \fBvf_timeout\fR and \fBpf_wait\fR can also be set as \fBVFLAG_OVSDB\fR etc.
.PP
\fBvflag up\fR on a converged host changes only what differs.
Under each field, \fIchange\fR says what changing it costs there:
\fBlive\fR (written in place while the host carries traffic),
\fBcontained\fR (only what the field describes is made again or stops for a moment; the hardware LAG and the other VFs stay),
\fBdisruptive\fR (the hardware LAG goes down or the VFs are made again: refused while running domains hold the group's VFs),
\fBmanual\fR (needs an ovs\-vswitchd restart or the eswitch back in legacy mode, which vflag does not do),
\fBnone\fR (no host state).
A default of \- means the setting is left alone when absent.
.SH FIELDS
`)
	for _, f := range fields {
		fmt.Fprintf(&b, ".TP\n.B %s\n", roffText(f.Path))
		fmt.Fprintf(&b, "Default: %s. Change: %s.\n.br\n%s\n", roffInline(f.Default), roffInline(f.Change), roffInline(f.Doc))
	}
	b.WriteString(`.SH FILES
.TP
.B /etc/vflag/vflag.yaml
the config file
.TP
.B /usr/share/doc/vflag/examples/vflag.yaml
a real host's config: one ConnectX, 802.3ad, 16 VFs per port, two VMs
.TP
.B /var/lib/vflag
the journal and lock (\fB\-\-state\-dir\fR)
.SH EXAMPLES
.nf
groups:
  \- name: lag0
    pfs: ["0000:61:00.0", "0000:61:00.1"]
    numvfs: 16
    bond: {name: bond0, mode: 802.3ad, miimon: 100}
    vfs:
      \- {pf: 0, vf: 0, mac: "52:54:00:61:00:00", vlan: 101}
    ovs: {bridge: br\-lag0}
    attachments:
      \- {domain: vnf\-a, pf: 0, vf: 0, live: true}
.fi
.SH SEE ALSO
.BR vflag (1),
.BR vflag\-up (1),
.BR vflag\-plan (1),
.BR vflag\-example\-config (1);
/usr/share/doc/vflag/docs/configuration.md
`)
	return b.String(), nil
}

var (
	mdLinkTextRE = regexp.MustCompile(`\[([^\]]+)\]\([^)]+\)`)
	mdCodeRE     = regexp.MustCompile("`([^`]+)`")
)

// roffInline turns a Markdown cell into roff text: code in bold, links as
// their text.
func roffInline(md string) string {
	md = mdLinkTextRE.ReplaceAllString(md, "$1")
	var b strings.Builder
	last := 0
	for _, m := range mdCodeRE.FindAllStringSubmatchIndex(md, -1) {
		b.WriteString(roffText(md[last:m[0]]))
		b.WriteString(`\fB` + roffText(md[m[2]:m[3]]) + `\fR`)
		last = m[1]
	}
	b.WriteString(roffText(md[last:]))
	s := b.String()
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// roffText escapes text for roff: backslashes, hyphens (so that they stay
// hyphens in copied text).
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	return strings.ReplaceAll(s, "-", `\-`)
}
