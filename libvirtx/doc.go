// Package libvirtx attaches SR-IOV VFs to libvirt domains and detaches them
// again (pipeline step 11 of vflag up, the first undo of vflag down).
//
// A VF goes into a domain as
//
//	<interface type='hostdev' managed='yes'>
//	  <mac address='52:54:00:..'/>
//	  <source><address type='pci' domain='0x0000' bus='0x61' slot='0x00' function='0x2'/></source>
//	</interface>
//
// built with libvirtxml, persistent (VIR_DOMAIN_AFFECT_CONFIG) and, when the
// attachment asks for it and the domain runs, live as well. The package never
// starts, stops or defines a domain.
//
// # Ownership
//
// What vflag attached is recorded in the domain's own metadata, in the
// namespace MetadataNamespace under the key MetadataKey:
//
//	<metadata>
//	  <vflag:vflag xmlns:vflag="https://vflag.dev/xmlns/vflag/1">
//	    <vflag:vf pci="0000:61:00.2" mac="52:54:00:00:00:01" owner="lag0"/>
//	  </vflag:vflag>
//	</metadata>
//
// The persistent and the live definition each carry their own copy (a
// domain started later inherits the persistent one). An interface counts as
// vflag's only when the definition it is in holds an entry with its PCI
// address and its MAC. Anything else is foreign: Attach refuses to attach a
// second interface for a PCI address a foreign interface (or a plain <hostdev>)
// already uses, and Detach never removes a foreign interface.
//
// # Ordering constraints
//
//  1. Read the XML before attaching. libvirt does not refuse a second,
//     identical <interface type='hostdev'>: attaching twice silently
//     duplicates it. Attach and Plan read the persistent definition (and the
//     live one when the domain runs) and attach only what is missing.
//  2. Config before live. The CONFIG attach comes first; the LIVE attach only
//     when Attachment.Live is set and the domain is active. When LIVE fails
//     the CONFIG attach (and its metadata entry) is rolled back and the error
//     returned, so a failed attach leaves the domain as it was.
//  3. Metadata and device. The metadata entry is vflag's ownership claim.
//     Attach writes the claim into a definition right before it attaches the
//     device there; Detach removes the device first and the claim after it.
//     So a claim may exist without its device, but a vflag device never
//     exists without its claim: a crash between the two steps leaves at most
//     a claim without a device, which Detach cleans up and Attach completes.
//     The reverse order (claim after the device) would leave, after a crash,
//     an unclaimed vflag device that every later run must treat as foreign:
//     Attach would refuse it forever and down could not remove it.
//  4. Detach is the reverse of Attach: the live definition first (device,
//     then its claim), then the persistent one (device, then its claim). A
//     live PCI unplug needs the guest's cooperation; when the device is
//     still in the live XML after the request, Detach returns an error and
//     keeps the claim, so a later Detach retries.
//
// Detach works from a Record alone (no configuration) and is repeatable: a
// missing domain, device or claim is success.
//
// HoldingDomains reads the live XML of running domains only: a VF listed in a
// shut-off domain is not in use and does not block a teardown.
package libvirtx
