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
}

// HostdevIface is one <interface type='hostdev'> of a domain.
type HostdevIface struct {
	PCI     string
	MAC     string
	Managed bool
	// Owned tells that vflag attached it (its metadata says so).
	Owned bool
	// InConfig and InLive tell which definitions hold it.
	InConfig bool
	InLive   bool
}
