package sim

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// mirror keeps one real veth per simulated netdev in a network namespace, so
// that a real ovs-vswitchd there can open "p0", "bond0" or "eth5". The end
// named like the simulated netdev is what OVS opens; its peer is named
// mirrorPeer(name). Both ends are up exactly when the simulated netdev is
// administratively up, and the sim-side end carries the simulated MAC.
type mirror struct {
	path  string
	timer *time.Timer
	// synced is what the namespace was last made to match; nil until the
	// first full sync and after any failure. With it, a sync touches only
	// the netdevs whose wanted state changed instead of listing and
	// checking every link (which made each simulated write O(netdevs)
	// netlink calls).
	synced map[string]mirrorWant
}

func newMirror(path string) *mirror { return &mirror{path: path} }

func (m *mirror) close() {
	if m.timer != nil {
		m.timer.Stop()
	}
}

// sync brings the namespace in line with want: in full the first time (and
// after a failure), then only for the netdevs whose wanted state changed
// since the last successful sync.
func (m *mirror) sync(want map[string]mirrorWant) error {
	var err error
	if m.synced == nil {
		err = m.apply(want, nil)
	} else {
		delta := map[string]*mirrorWant{}
		for name, w := range want {
			if old, ok := m.synced[name]; !ok || old != w {
				delta[name] = &w
			}
		}
		for name := range m.synced {
			if _, ok := want[name]; !ok {
				delta[name] = nil
			}
		}
		if len(delta) == 0 {
			return nil
		}
		err = m.apply(nil, delta)
	}
	if err != nil {
		m.synced = nil
		return err
	}
	m.synced = want
	return nil
}

// mirrorPeer names the peer of a mirrored netdev: "sv" and 8 hex digits.
func mirrorPeer(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	return fmt.Sprintf("sv%08x", h.Sum32())
}

type mirrorWant struct {
	up  bool
	mac string
}

// syncMirrorLocked brings the namespace in line with the state. h.mu is held
// and h.st is loaded. Netdevs still being created are synced by a timer when
// they appear.
func (h *Host) syncMirrorLocked() error {
	m := h.mirror
	if m == nil || h.st == nil {
		return nil
	}
	now := h.now().UnixNano()
	want := map[string]mirrorWant{}
	var next int64
	for _, nd := range h.st.Netdevs {
		if nd.Role == roleLo {
			continue
		}
		if !nd.visible(now) {
			if next == 0 || nd.ReadyAt < next {
				next = nd.ReadyAt
			}
			continue
		}
		want[nd.Name] = mirrorWant{up: nd.AdminUp, mac: nd.MAC}
	}
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
	if next != 0 {
		m.timer = time.AfterFunc(time.Duration(next-now)+time.Millisecond, h.mirrorTick)
	}
	if err := m.sync(want); err != nil {
		return fmt.Errorf("sim: mirror into %s: %w", m.path, err)
	}
	return nil
}

func (h *Host) mirrorTick() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	if err := h.flock(syscall.LOCK_SH); err != nil {
		return
	}
	err := h.reload()
	h.funlock()
	if err == nil {
		_ = h.syncMirrorLocked()
	}
}

// apply makes the namespace match want (full: every link is listed and
// checked), or, with delta, only the named netdevs (nil: the netdev is gone).
func (m *mirror) apply(want map[string]mirrorWant, delta map[string]*mirrorWant) error {
	ns, err := netns.GetFromPath(m.path)
	if err != nil {
		return err
	}
	defer ns.Close()
	nh, err := netlink.NewHandleAt(ns)
	if err != nil {
		return err
	}
	defer nh.Close()
	have := map[string]netlink.Link{}
	if delta == nil {
		links, err := nh.LinkList()
		if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
			return err
		}
		for _, l := range links {
			have[l.Attrs().Name] = l
		}
	} else {
		want = map[string]mirrorWant{}
		for name, w := range delta {
			for _, n := range []string{name, mirrorPeer(name)} {
				if l, err := nh.LinkByName(n); err == nil {
					have[n] = l
				}
			}
			if w != nil {
				want[name] = *w
			}
		}
	}
	var errs []error
	// Remove mirrors of netdevs that are gone (deleting one end removes both).
	for name, l := range have {
		if _, ok := want[name]; ok || l.Type() != "veth" {
			continue
		}
		if _, ours := have[mirrorPeer(name)]; ours {
			if err := nh.LinkDel(l); err != nil && !errors.Is(err, syscall.ENODEV) {
				errs = append(errs, fmt.Errorf("delete %s: %w", name, err))
			}
		}
	}
	for name, w := range want {
		mac, _ := net.ParseMAC(w.mac)
		l, ok := have[name]
		if !ok {
			v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, HardwareAddr: mac}, PeerName: mirrorPeer(name)}
			if err := nh.LinkAdd(v); err != nil && !errors.Is(err, syscall.EEXIST) {
				errs = append(errs, fmt.Errorf("add veth %s: %w", name, err))
				continue
			}
			if l, err = nh.LinkByName(name); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", name, err))
				continue
			}
		} else if _, ours := have[mirrorPeer(name)]; !ours {
			errs = append(errs, fmt.Errorf("%s exists in the namespace and is not a mirror", name))
			continue
		}
		if mac != nil && l.Attrs().HardwareAddr.String() != mac.String() {
			if err := nh.LinkSetHardwareAddr(l, mac); err != nil {
				errs = append(errs, fmt.Errorf("%s: set address: %w", name, err))
			}
		}
		peer, err := nh.LinkByName(mirrorPeer(name))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: peer: %w", name, err))
			continue
		}
		for _, x := range []netlink.Link{l, peer} {
			if (x.Attrs().Flags&net.FlagUp != 0) == w.up {
				continue
			}
			if w.up {
				err = nh.LinkSetUp(x)
			} else {
				err = nh.LinkSetDown(x)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: set up=%v: %w", x.Attrs().Name, w.up, err))
			}
		}
	}
	return errors.Join(errs...)
}
