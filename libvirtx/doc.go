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
//
// Prefetch reads domains ahead of their use, once: until the connection
// writes a domain (Attach, Detach, StartAutostarted), and for at most a
// second, Exists, Domain and Plan of a prefetched domain answer from that
// read. Attach itself always reads afresh (rule 1).
//
// # VF pools (hostdev networks)
//
// A VF pool is a libvirt network with <forward mode='hostdev' managed='yes'>
// and one <address type='pci'> per VF. A domain's <interface type='network'>
// with <source network= portgroup=> gets a free VF from it when it starts:
// libvirt allocates a network port (<plug type='hostdev-pci'>) and runs the
// network hook. NetworkXML builds the definition; PlanNetwork says what
// EnsureNetwork would do to libvirt's network (NetworkPlan: define, start,
// restart, live portgroup update, autostart, or why it refuses) and
// EnsureNetwork makes that same plan and carries it out; Network reads it
// with its ports, RemoveNetwork stops and undefines it, ParseNetworkHook
// reads the hook's standard input.
//
// vflag's claim is the network's metadata, in MetadataNamespace like the
// domains' claims:
//
//	<metadata>
//	  <vflag:vflag xmlns:vflag="https://vflag.dev/xmlns/vflag/1" owner="lag0">
//	    <vflag:portgroup name="tenant-a" vlan="100"/>
//	    <vflag:portgroup name="trunk" vlan="5" vlan_mode="native-untagged" trunks="6,7"/>
//	  </vflag:vflag>
//	</metadata>
//
// It records every portgroup's VLAN whether or not libvirt's own <vlan>
// carries it (NetworkPortgroup.LibvirtVLAN), so the network hook reads it
// from the hookData without libvirt's <vlan>. A network without this
// element is foreign: EnsureNetwork and RemoveNetwork refuse it, and
// EnsureNetwork refuses a network another vflag group owns.
//
// What libvirt 9.0 does (checked against libvirtd 9.0.0 through virttest,
// and in libvirt's src/network/bridge_driver.c and src/conf/network_conf.c):
//
//   - Addresses must be VFs. Defining (and starting) a hostdev network
//     checks every <address>: /sys/bus/pci/devices/<address>/physfn must
//     exist ("device ... is not an SR-IOV Virtual Function", networkValidate).
//     Only the definition checks: a defined network whose VF is gone starts
//     (net-start, so autostart at boot before the VFs exist too) and hands
//     out ports on the missing VF. Nothing else of a device is looked at
//     until a domain starts with its port. So EnsureNetwork needs the VFs
//     when it (re)defines, not when it only starts. virttest.FakeVFs
//     provides such addresses (a physfn link, nothing else) for tests.
//   - A pool without an address is taken: a hostdev network with a bare
//     <forward mode='hostdev' managed='yes'/> defines and starts, and every
//     port asked of it fails ("network '...' requires exclusive access to
//     interfaces, but none are available"), so every domain start on it.
//   - An address already in another network's pool is taken too: two
//     networks define and start with the same VF, and each hands it out
//     (seen: a port of each on 0000:61:00.2), to two domains. So the plan
//     refuses a VF another network's pool has (TakenVFs), and preflight
//     refuses it where the VF exists before up.
//   - A redefinition needs the network's UUID: a definition without one is a
//     new network, refused for a name in use ("already exists with uuid").
//     Defining a running network changes its persistent definition only.
//   - The pool cannot change while the network runs. virNetworkUpdate's
//     VIR_NETWORK_SECTION_FORWARD_INTERFACE takes <interface dev=> only
//     ("unexpected element <address>, expecting <interface>"), and
//     VIR_NETWORK_SECTION_FORWARD is not supported at all ("can't update
//     'forward' section"). A pool change is a restart (destroy, start).
//   - Metadata cannot change while the network runs: virNetworkSetMetadata
//     exists from libvirt 9.7 only. A metadata change is a restart too.
//   - Portgroups can change live (VIR_NETWORK_SECTION_PORTGROUP, modify,
//     add-last, delete; one default at a time: "a different portgroup entry
//     ... is already set as the default"). But every live update replaces
//     the running definition by a format/parse copy (virNetworkObjUpdate,
//     virNetworkDefCopy), and the pool's usage counts are not in the XML:
//     after it, the network's connections and every VF's count are 0, and
//     the next port gets a VF another port holds (seen: vm1 and vm2 both on
//     0000:61:00.2). Ports allocated earlier keep their VLAN (copied into
//     the port at allocation).
//   - A network stops (virsh net-destroy) with ports allocated, without
//     complaint and without port-deleted hook calls; its ports are gone
//     when it starts again, while the domains keep their VFs.
//   - A port gets its portgroup's libvirt <vlan> (a port without <group>
//     that of the default portgroup, its <group> staying empty; see
//     NetworkState.Portgroup), and the qemu driver sets it on the VF
//     through the PF when the domain starts (virHostdevSetNetConfig calls
//     virNetDevSetNetConfig with setVlan: a VF without <vlan> is set to
//     VLAN 0). Only one tag without trunk='yes'
//     works there ("vlan trunking is not supported by SR-IOV network
//     devices"); a nativeMode is ignored. So LibvirtVLAN takes an access
//     VLAN only, and on switchdev (mlx5 refuses a VF VLAN through the PF)
//     the VLAN stays out of libvirt's <vlan>.
//
// Hence EnsureNetwork on a running network: portgroup changes go live when
// no port is allocated; a pool or metadata change restarts the network when
// no port is allocated; with ports allocated, any change of the running
// definition is refused with an error naming the domains and nothing is
// changed (a change of the persistent definition alone is made). The
// comparison is semantic: addresses, forward mode, portgroups (name,
// default, libvirt <vlan>) and vflag's metadata, not bytes. RemoveNetwork
// refuses while ports are allocated.
//
// # Network hook
//
// libvirt runs /etc/libvirt/hooks/network (found when libvirtd starts) as
// "network NETWORK OPERATION SUB-OPERATION -" with
//
//	<hookData>
//	  <network>...</network>            the running definition, metadata included
//	  <networkport>...</networkport>    port-created and port-deleted only
//	</hookData>
//
// on standard input (networkRunHook). The calls seen from libvirtd 9.0:
// "start begin" and "started begin" (start), "updated begin" (after a live
// virNetworkUpdate, with the updated definition), "port-created begin" (the
// port with its <plug type='hostdev-pci'> VF and <vlan>, the network with
// connections= counting it), "port-deleted begin" and "stopped end".
// testdata/network-hook holds real ones, captured by TestNetworkHookData.
//
// # Without libvirt's C library
//
// Only libvirtx.go and network_conn.go use the binding (libvirt.org/go/libvirt,
// cgo). Built with the tag vflag_nolibvirt (vflag-hook: the libvirt hooks,
// which never call libvirt) they are left out, and nolibvirt.go's Conn takes
// their place: Open fails with ErrNotLinked. The types, the XML and the
// attach and network planning are in the other files, in both builds.
package libvirtx
