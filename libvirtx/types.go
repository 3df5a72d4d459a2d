package libvirtx

// Attachment is one VF to put into one domain.
type Attachment struct {
	Domain string
	// PCI is the VF's PCI address, "0000:61:00.2".
	PCI string
	// MAC is the guest-visible MAC address, "52:54:00:...".
	MAC string
	// Live: also attach live if the domain runs; false = config only.
	Live bool
	// Owner is the LAG group name, stored in vflag's domain metadata.
	Owner string
	// Migratable makes the VF the transient half of a teaming pair whose
	// standby (a virtio interface on Standby.Bridge, alias StandbyAlias(MAC))
	// vflag makes too.
	Migratable bool
	Standby    Standby
	// VFVLAN is the VLAN of a legacy group's teaming VF (0: none): its
	// interface's <vlan>, which libvirt sets through the PF.
	VFVLAN int
}

// Record is the attachment's record (what Detach needs).
func (a Attachment) Record() Record {
	r := Record{Domain: a.Domain, PCI: a.PCI, MAC: a.MAC, Live: a.Live, Owner: a.Owner}
	if a.Migratable {
		r.Standby = StandbyAlias(a.MAC)
	}
	return r
}

// Record is what Attach did, enough to undo it without the configuration;
// it goes into the journal as JSON.
type Record struct {
	Domain string `json:"domain"`
	PCI    string `json:"pci"`
	MAC    string `json:"mac"`
	// Live tells that the VF is in the running domain by vflag's hand
	// (attached live now or by an earlier run); Detach then removes it
	// live too.
	Live  bool   `json:"live"`
	Owner string `json:"owner"`
	// Standby is the alias of the teaming standby vflag made with the VF
	// (a migratable attachment); Detach removes it too. Detach also finds
	// it in vflag's claim, so a record from before it is enough.
	Standby string `json:"standby,omitempty"`
}

// DomainState is what libvirt says about one domain.
type DomainState struct {
	Name string
	// UUID is the domain's UUID (its persistent definition's), "" when it
	// does not exist.
	UUID   string
	Exists bool
	Active bool
	// Persistent: the domain is defined (not transient); vflag attaches
	// only to defined domains.
	Persistent bool
	// Interfaces are the <interface type='hostdev'> with a PCI source of
	// the persistent definition and, when the domain runs, of the live one
	// (merged by PCI address; the persistent one wins).
	Interfaces []HostdevIface
	// Standbys are the teaming standbys (<teaming type='persistent'/>)
	// of the definitions, merged by alias like Interfaces.
	Standbys []StandbyIface
	// Machine is the persistent definition's machine type ("pc-q35-7.2").
	Machine string
}

// StandbyIface is a teaming standby interface of a domain.
type StandbyIface struct {
	Alias  string
	MAC    string
	Bridge string // <source bridge=>; "" when it is not a bridge interface
	// OVS: <virtualport type='openvswitch'/>; Virtio: <model type='virtio'/>.
	OVS, Virtio bool
	// VLAN is what its <vlan> makes of its OVS port's VLAN columns.
	VLAN Standby
	// Owned: vflag made it (its claim names the alias).
	Owned            bool
	InConfig, InLive bool
	// Target is its tap device in the live definition (<target dev=>),
	// the name of its OVS port while the domain runs; "" otherwise.
	Target string
}

// HostdevIface is one <interface type='hostdev'> of a domain.
type HostdevIface struct {
	PCI     string
	MAC     string
	Managed bool
	// Owned tells that vflag attached it (its metadata says so).
	Owned bool
	// Standby is the alias its <teaming type='transient'> pairs it with;
	// "" when it is no teaming interface.
	Standby string
	// VLAN is the VLAN its <vlan> has libvirt set on the VF through the PF
	// (0 none, -1 not one tag).
	VLAN int
	// NotHotplug: it sits on a guest PCI bus that takes no hotplug (not a
	// PCIe root port, or one with hotplug='off'): QEMU cannot unplug it at
	// a migration. Read from the persistent definition where it is there.
	NotHotplug bool
	// InConfig and InLive tell which definitions hold it.
	InConfig bool
	InLive   bool
}
