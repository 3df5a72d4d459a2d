package libvirtx

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Domain XML as libvirt 9 hands it to /etc/libvirt/hooks/qemu (live
// definition, no <actual> for hostdev interfaces, full device list).
const hookHead = `<domain type='kvm' id='3'>
  <name>vm1</name>
  <uuid>0f8c1c1e-2b1a-4c55-9a43-7f0d2d1e9a01</uuid>
  <metadata>
    <vflag:vflag xmlns:vflag="https://vflag.dev/xmlns/vflag/1">
      <vflag:vf pci="0000:61:00.2" mac="52:54:00:10:00:00" owner="lag0"/>
    </vflag:vflag>
  </metadata>
  <memory unit='KiB'>1048576</memory>
  <vcpu placement='static'>2</vcpu>
  <os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type><boot dev='hd'/></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2'/>
      <source file='/var/lib/libvirt/images/vm1.qcow2'/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <interface type='bridge'>
      <mac address='52:54:00:aa:bb:cc'/>
      <source bridge='br0'/>
      <model type='virtio'/>
    </interface>
`
const hookTail = `    <console type='pty'><target type='serial' port='0'/></console>
  </devices>
</domain>
`

const hostdevIface = `    <interface type='hostdev' managed='yes'>
      <mac address='52:54:00:10:00:00'/>
      <driver name='vfio'/>
      <source>
        <address type='pci' domain='0x0000' bus='0x61' slot='0x00' function='0x2'/>
      </source>
      <alias name='hostdev0'/>
      <address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/>
    </interface>
`

const hostdevElem = `    <hostdev mode='subsystem' type='pci' managed='yes'>
      <driver name='vfio'/>
      <source>
        <address domain='0x0000' bus='0x61' slot='0x00' function='0x3'/>
      </source>
      <alias name='hostdev1'/>
      <address type='pci' domain='0x0000' bus='0x02' slot='0x00' function='0x0'/>
    </hostdev>
`

// An interface from a hostdev network pool (<forward mode='hostdev'>) at
// "prepare begin": libvirt has not picked a VF yet.
const poolIface = `    <interface type='network'>
      <mac address='52:54:00:10:00:07'/>
      <source network='vf-pool'/>
      <model type='virtio'/>
    </interface>
`

// The same interface in libvirt's status XML: the chosen VF in <actual>.
const poolIfaceActual = `    <interface type='network'>
      <mac address='52:54:00:10:00:07'/>
      <source network='vf-pool' portid='8a7e4c3b-5d1f-4e8a-9c2b-1a2b3c4d5e6f'/>
      <actual type='hostdev' managed='yes'>
        <source>
          <address type='pci' domain='0x0000' bus='0x61' slot='0x00' function='0x4'/>
        </source>
      </actual>
    </interface>
`

// At "start begin" libvirt formats an allocated pool interface by its actual
// type: type='hostdev' with the VF's address (and no <source network>).
const poolIfaceStarted = `    <interface type='hostdev' managed='yes'>
      <mac address='52:54:00:10:00:07'/>
      <source>
        <address type='pci' domain='0x0000' bus='0x61' slot='0x00' function='0x4'/>
      </source>
    </interface>
`

const usbHostdev = `    <hostdev mode='subsystem' type='usb' managed='yes'>
      <source><vendor id='0x046d'/><product id='0xc52b'/></source>
    </hostdev>
`

// A GPU passed through: a PCI device that is not a VF of vflag's.
const gpuHostdev = `    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source><address domain='0x0000' bus='0x3b' slot='0x00' function='0x0'/></source>
    </hostdev>
`

func domainXML(devices ...string) []byte {
	return []byte(hookHead + strings.Join(devices, "") + hookTail)
}

func TestHookActionFor(t *testing.T) {
	tests := []struct {
		op, sub string
		want    HookAction
	}{
		{"prepare", "begin", HookPrepare},
		{"start", "begin", HookPrepare},
		{"started", "begin", HookStarted},
		{"started", "end", HookIgnore},
		{"stopped", "end", HookIgnore},
		{"release", "end", HookRelease},
		{"migrate", "begin", HookMigrate},
		{"migrate", "end", HookIgnore},
		{"restore", "begin", HookIgnore},
		{"reconnect", "begin", HookIgnore},
		{"attach", "begin", HookIgnore},
		{"prepare", "end", HookIgnore},
		{"release", "begin", HookIgnore},
		{"", "", HookIgnore},
	}
	for _, tt := range tests {
		if got := HookActionFor(tt.op, tt.sub); got != tt.want {
			t.Errorf("HookActionFor(%q, %q) = %v, want %v", tt.op, tt.sub, got, tt.want)
		}
	}
}

func TestParseHookDomain(t *testing.T) {
	tests := []struct {
		name    string
		doc     []byte
		devices []PassthroughDevice
		pending []string
	}{
		{"no passthrough", domainXML(), nil, nil},
		{"hostdev interface", domainXML(hostdevIface),
			[]PassthroughDevice{{PCI: "0000:61:00.2", MAC: "52:54:00:10:00:00", From: FromInterface}}, nil},
		{"hostdev element", domainXML(hostdevElem),
			[]PassthroughDevice{{PCI: "0000:61:00.3", From: FromHostdev}}, nil},
		{"network pool at prepare", domainXML(poolIface), nil, []string{"vf-pool"}},
		{"network pool with actual", domainXML(poolIfaceActual),
			[]PassthroughDevice{{PCI: "0000:61:00.4", MAC: "52:54:00:10:00:07", From: FromNetwork, Network: "vf-pool"}}, nil},
		{"network pool at start", domainXML(poolIfaceStarted),
			[]PassthroughDevice{{PCI: "0000:61:00.4", MAC: "52:54:00:10:00:07", From: FromInterface}}, nil},
		{"usb and gpu", domainXML(usbHostdev, gpuHostdev),
			[]PassthroughDevice{{PCI: "0000:3b:00.0", From: FromHostdev}}, nil},
		{"all shapes", domainXML(hostdevIface, poolIface, hostdevElem, gpuHostdev),
			[]PassthroughDevice{
				{PCI: "0000:61:00.2", MAC: "52:54:00:10:00:00", From: FromInterface},
				{PCI: "0000:61:00.3", From: FromHostdev},
				{PCI: "0000:3b:00.0", From: FromHostdev},
			}, []string{"vf-pool"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ParseHookDomain(tt.doc)
			if err != nil {
				t.Fatal(err)
			}
			if d.Name != "vm1" || d.UUID == "" {
				t.Errorf("name %q uuid %q", d.Name, d.UUID)
			}
			if diff := cmp.Diff(tt.devices, d.Devices); diff != "" {
				t.Errorf("devices (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.pending, d.Pending); diff != "" {
				t.Errorf("pending (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseHookDomainRejectsGarbage(t *testing.T) {
	for _, doc := range []string{"", "<domain>", "not xml", "<domain><devices><interface></domain>"} {
		if _, err := ParseHookDomain([]byte(doc)); err == nil {
			t.Errorf("ParseHookDomain(%q) accepted it", doc)
		}
	}
}

func TestPlanHook(t *testing.T) {
	ours := map[string]bool{"0000:61:00.2": true, "0000:61:00.3": true, "0000:61:00.4": true}
	managed := func(pci string) bool { return ours[pci] }
	badMAC := strings.Replace(hostdevIface, "52:54:00:10:00:00", "53:54:00:10:00:00", 1)
	noMAC := strings.Replace(hostdevIface, "<mac address='52:54:00:10:00:00'/>", "", 1)
	tests := []struct {
		name    string
		doc     []byte
		want    []HookTask
		wantErr string
	}{
		{"unmanaged domain", domainXML(gpuHostdev, usbHostdev), nil, ""},
		{"network pool not yet allocated", domainXML(poolIface), nil, ""},
		{"hostdev interface takes the domain's MAC", domainXML(hostdevIface, gpuHostdev), []HookTask{
			{Device: PassthroughDevice{PCI: "0000:61:00.2", MAC: "52:54:00:10:00:00", From: FromInterface}, MAC: "52:54:00:10:00:00"},
		}, ""},
		{"hostdev element keeps the VF's MAC", domainXML(hostdevElem), []HookTask{
			{Device: PassthroughDevice{PCI: "0000:61:00.3", From: FromHostdev}},
		}, ""},
		{"allocated pool interface", domainXML(poolIfaceActual), []HookTask{
			{Device: PassthroughDevice{PCI: "0000:61:00.4", MAC: "52:54:00:10:00:07", From: FromNetwork, Network: "vf-pool"}, MAC: "52:54:00:10:00:07"},
		}, ""},
		{"same VF twice", domainXML(hostdevIface, strings.Replace(hostdevElem, "0x3", "0x2", 1)), nil, "VF 0000:61:00.2 is used twice"},
		{"multicast MAC", domainXML(badMAC), nil, "multicast"},
		{"interface without MAC", domainXML(noMAC), nil, "has no MAC address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := ParseHookDomain(tt.doc)
			if err != nil {
				t.Fatal(err)
			}
			got, err := PlanHook(d, managed)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "vm1") {
					t.Fatalf("err = %v, want one naming vm1 and %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("tasks (-want +got):\n%s", diff)
			}
		})
	}
}
