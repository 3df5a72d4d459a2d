package sim

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
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
	// changed: a sync changed the namespace since the open (close then
	// marks what it left there).
	changed bool
	// fullSyncs counts the full syncs (tests).
	fullSyncs int
	// noMark: the next full sync ignores the namespace's mark.
	noMark bool
	// inflight holds, per netdev name, the done channel of the last delta
	// started for it (startDelta): a later delta that names it waits for
	// it, one that does not goes ahead (Host.syncMirror).
	inflight map[string]chan struct{}
	// graves: a delta parked a mirror (park) that no batch deletion has
	// swept since; close sweeps it.
	graves atomic.Bool
}

func newMirror(path string) *mirror { return &mirror{path: path} }

// close stops the timer and, when this Host changed the namespace, marks
// what it left there for the next open.
func (m *mirror) close() {
	if m.timer != nil {
		m.timer.Stop()
	}
	m.settle()
	if m.graves.Load() {
		_ = m.sweep()
	}
	if m.changed && m.synced != nil {
		_ = m.writeMark(m.synced)
	}
}

// deltaTo is what differs between the last target (m.synced) and want:
// each netdev whose wanted state changed, nil for one that is gone.
func (m *mirror) deltaTo(want map[string]mirrorWant) map[string]*mirrorWant {
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
	return delta
}

// settle waits until every delta started (startDelta) is done: a sync
// that lists or compares the whole namespace must see their links.
func (m *mirror) settle() {
	for _, c := range m.inflight {
		<-c
	}
}

// startDelta is the part of a delta sync done under h.mmu: the netdevs
// whose wanted state differs from the target of the syncs before it, the
// target moved to want, and this delta's turn on each of its netdevs
// (after the delta before it that names the same one). It returns a nil
// delta when nothing changed; wait blocks until the turn comes, and the
// caller closes done once its netlink calls are over (without h.mmu), then
// ends the delta with endDelta.
func (m *mirror) startDelta(want map[string]mirrorWant) (delta map[string]*mirrorWant, wait func(), done chan struct{}) {
	if delta = m.deltaTo(want); len(delta) == 0 {
		return nil, nil, nil
	}
	m.synced = want
	done = make(chan struct{})
	var before []chan struct{}
	if m.inflight == nil {
		m.inflight = map[string]chan struct{}{}
	}
	for name := range delta {
		if c := m.inflight[name]; c != nil {
			before = append(before, c)
		}
		m.inflight[name] = done
	}
	return delta, func() {
		for _, c := range before {
			<-c
		}
	}, done
}

// endDelta is the part of a delta sync done under h.mmu once it applied:
// the turns it held are released, and a failure drops the target (the
// next sync is a full one: the namespace is not what any mark says).
func (m *mirror) endDelta(delta map[string]*mirrorWant, done chan struct{}, err error) {
	for name := range delta {
		if m.inflight[name] == done {
			delete(m.inflight, name)
		}
	}
	if err != nil {
		m.synced = nil
		_ = m.writeMark(nil)
		return
	}
	m.changed = true
}

// sync brings the namespace in line with want: in full the first time (and
// after a failure) unless the namespace's mark says a sync left it so,
// then only for the netdevs whose wanted state changed since the last
// successful sync.
func (m *mirror) sync(want map[string]mirrorWant) error {
	m.settle()
	var err error
	if m.synced == nil {
		if !m.noMark && m.marked(want) {
			m.synced = want
			return nil
		}
		m.noMark = false
		m.fullSyncs++
		err = m.apply(want, nil)
	} else {
		delta := m.deltaTo(want)
		if len(delta) == 0 {
			return nil
		}
		err = m.apply(nil, delta)
	}
	if err != nil {
		m.synced = nil
		_ = m.writeMark(nil) // the namespace is not what any mark says
		return err
	}
	m.synced, m.changed = want, true
	return nil
}

// The mark is the ifalias of the namespace's lo: a hash of the netdevs a
// sync mirrored (name, up, MAC) and a hash of the ifindexes of every link
// in the namespace right after. An open whose wanted mirrors hash the same,
// in a namespace whose links are the same ones, skips its full sync (a dump
// of every link, the larger part of opening a host with a few hundred
// mirrors). A link deleted or added since (by anyone: ovs-vswitchd adding
// a bridge, a mirror deleted by hand, a namespace made anew, which has no
// mark) changes the ifindexes and the next open syncs in full; a link's
// flags or MAC changed in the namespace by hand are not seen by the mark.
// The ifindexes come from a stats dump that asks for no statistics: a few
// bytes per link, where a link dump costs the kernel every attribute.
const markPrefix = "vflag-sim-mirror 1 "

func wantHash(want map[string]mirrorWant) uint64 {
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	slices.Sort(names)
	h := fnv.New64a()
	for _, n := range names {
		w := want[n]
		fmt.Fprintf(h, "%s %v %s\n", n, w.up, w.mac)
	}
	return h.Sum64()
}

func markOf(want map[string]mirrorWant, links uint64) string {
	return fmt.Sprintf("%swant=%016x links=%016x", markPrefix, wantHash(want), links)
}

// lo opens the mirror namespace, a netlink handle in it and its lo, where
// the mark lives; done closes the namespace and the handle.
func (m *mirror) lo() (ns netns.NsHandle, nh *netlink.Handle, lo netlink.Link, done func(), err error) {
	if ns, err = netns.GetFromPath(m.path); err != nil {
		return ns, nil, nil, nil, err
	}
	if nh, err = netlink.NewHandleAt(ns, unix.NETLINK_ROUTE); err != nil {
		_ = ns.Close()
		return ns, nil, nil, nil, err
	}
	done = func() { _ = nh.Close(); _ = ns.Close() }
	if lo, err = nh.LinkByName("lo"); err != nil {
		done()
		return ns, nil, nil, nil, err
	}
	return ns, nh, lo, done, nil
}

// marked tells whether the namespace's mark says it holds want.
func (m *mirror) marked(want map[string]mirrorWant) bool {
	ns, _, lo, done, err := m.lo()
	if err != nil {
		return false
	}
	defer done()
	if !strings.HasPrefix(lo.Attrs().Alias, markPrefix) {
		return false
	}
	links, err := linkSetHash(ns)
	return err == nil && lo.Attrs().Alias == markOf(want, links)
}

// writeMark marks the namespace as holding want (nil: clears the mark).
func (m *mirror) writeMark(want map[string]mirrorWant) error {
	ns, nh, lo, done, err := m.lo()
	if err != nil {
		return err
	}
	defer done()
	mark := ""
	if want != nil {
		links, err := linkSetHash(ns)
		if err != nil {
			return err
		}
		mark = markOf(want, links)
	}
	if lo.Attrs().Alias == mark {
		return nil
	}
	return nh.LinkSetAlias(lo, mark)
}

// ifStatsMsg is struct if_stats_msg (linux/if_link.h).
type ifStatsMsg struct {
	filterMask uint32
}

func (*ifStatsMsg) Len() int { return 12 }

func (r *ifStatsMsg) Serialize() []byte {
	b := make([]byte, 12) // family, pad1, pad2, ifindex 0: every link
	nl.NativeEndian().PutUint32(b[8:], r.filterMask)
	return b
}

// linkSetHash hashes the ifindexes of the namespace's links, from an
// RTM_GETSTATS dump for IFLA_STATS_LINK_XSTATS alone (which a veth, lo
// or OVS's devices have none of: one 12-byte header per link).
func linkSetHash(ns netns.NsHandle) (uint64, error) {
	sock, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return 0, err
	}
	defer func() { _ = sock.Close() }()
	req := nl.NewNetlinkRequest(unix.RTM_GETSTATS, unix.NLM_F_DUMP)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: {Socket: sock}}
	req.AddData(&ifStatsMsg{filterMask: 1 << (unix.IFLA_STATS_LINK_XSTATS - 1)})
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWSTATS)
	if err != nil {
		return 0, err
	}
	idx := make([]uint32, 0, len(msgs))
	for _, b := range msgs {
		if len(b) < 12 {
			return 0, fmt.Errorf("stats dump: short message")
		}
		idx = append(idx, nl.NativeEndian().Uint32(b[4:8]))
	}
	slices.Sort(idx)
	h := fnv.New64a()
	for _, i := range idx {
		fmt.Fprintf(h, "%d\n", i)
	}
	return h.Sum64(), nil
}

// in6AddrGenModeNone is IN6_ADDR_GEN_MODE_NONE (linux/if_link.h): the
// kernel makes no IPv6 link-local address on the link.
const in6AddrGenModeNone = 1

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

// syncMirrorLocked brings the namespace in line with the state. h.mu (and
// h.mmu, where another goroutine may sync) is held and h.st is loaded.
// Netdevs still being created are synced by a timer when they appear.
func (h *Host) syncMirrorLocked() error {
	m, want := h.mirrorWantLocked()
	if m == nil {
		return nil
	}
	return h.mirrorSync(m, want)
}

// syncMirror is syncMirrorLocked for a caller holding neither lock: it
// holds h.mmu throughout but h.mu only to read the state, so that the
// host's other calls (another PF's read, another PF's mode change) do not
// wait for this change's veths, as in the kernel they do not wait for its
// netdevs. The state is read once h.mmu is held: a sync never goes back to
// a state older than the one synced before it.
//
// A delta (the usual sync: the netdevs one change made or removed) holds
// h.mmu only to take its turn: its netlink calls run without it, so the
// veths of one PF's mode change (a hundred representors) do not hold up
// another PF's bond, while a later delta that names one of its netdevs
// still waits for it (startDelta). A full sync holds h.mmu throughout.
func (h *Host) syncMirror() error {
	h.mmu.Lock()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		h.mmu.Unlock()
		return nil
	}
	if h.st == nil {
		// Dropped by a failed update meanwhile: the file holds the state.
		if err := h.reload(); err != nil {
			h.mu.Unlock()
			h.mmu.Unlock()
			return err
		}
	}
	m, want := h.mirrorWantLocked()
	h.mu.Unlock()
	if m == nil {
		h.mmu.Unlock()
		return nil
	}
	if m.synced == nil {
		defer h.mmu.Unlock()
		return h.mirrorSync(m, want)
	}
	delta, wait, done := m.startDelta(want)
	h.mmu.Unlock()
	if delta == nil {
		return nil
	}
	wait()
	err := m.apply(nil, delta)
	close(done)
	h.mmu.Lock()
	m.endDelta(delta, done, err)
	h.mmu.Unlock()
	return h.explainMirror(m, err)
}

// mirrorWantLocked is what the namespace must hold for the state (h.mu
// held), and the mirror timer set for the netdevs still being created.
func (h *Host) mirrorWantLocked() (*mirror, map[string]mirrorWant) {
	m := h.mirror
	if m == nil || h.st == nil {
		return nil, nil
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
	return m, want
}

// mirrorSync is m.sync with the error explained.
func (h *Host) mirrorSync(m *mirror, want map[string]mirrorWant) error {
	return h.explainMirror(m, m.sync(want))
}

// explainMirror is a mirror sync's error explained (nil: nil).
func (h *Host) explainMirror(m *mirror, err error) error {
	if err != nil {
		if _, serr := os.Stat(m.path); errors.Is(serr, os.ErrNotExist) {
			return fmt.Errorf("sim: mirror_netns %s: no such network namespace: it is where ovs-vswitchd runs and opens the simulated netdevs (make simhost CONFIG=<config> makes it; README: Try it on the simulated host): %w", m.path, err)
		}
		return fmt.Errorf("sim: mirror into %s: %w", m.path, err)
	}
	return nil
}

func (h *Host) mirrorTick() {
	h.mmu.Lock()
	defer h.mmu.Unlock()
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

// deltaByName: a delta of up to this many netdevs looks each end up by
// name; a larger one (a batch of representors) reads one dump instead.
const deltaByName = 8

// apply makes the namespace match want (full: every link is listed and
// checked), or, with delta, only the named netdevs (nil: the netdev is gone).
func (m *mirror) apply(want map[string]mirrorWant, delta map[string]*mirrorWant) error {
	ns, err := netns.GetFromPath(m.path)
	if err != nil {
		return err
	}
	defer func() { _ = ns.Close() }()
	nh, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer func() { _ = nh.Close() }()
	have := map[string]netlink.Link{}
	var only map[string]bool // with a delta: the names it concerns, both ends
	if delta != nil {
		want = map[string]mirrorWant{}
		only = make(map[string]bool, 2*len(delta))
		for name, w := range delta {
			only[name], only[mirrorPeer(name)] = true, true
			if w != nil {
				want[name] = *w
			}
		}
	}
	if delta == nil || len(delta) > deltaByName {
		links, err := listLinks(ns)
		if err != nil {
			return err
		}
		for _, l := range links {
			if name := l.Attrs().Name; only == nil || only[name] {
				have[name] = l
			}
		}
	} else {
		for n := range only {
			if l, err := nh.LinkByName(n); err == nil {
				have[n] = l
			}
		}
	}
	var errs []error
	// Remove mirrors of netdevs that are gone (deleting one end removes
	// both): a small delta parks them, the rest are deleted in one batch,
	// which sweeps the parked ones too; a full sync also deletes what a
	// process parked and did not sweep (it stopped before its close).
	var gone []netlink.Link
	for name, l := range have {
		if _, ok := want[name]; ok || l.Type() != "veth" {
			continue
		}
		if _, ours := have[mirrorPeer(name)]; ours {
			gone = append(gone, l)
		} else if delta == nil && isGrave(name) && have[gravePeer(name)] != nil {
			gone = append(gone, l)
		}
	}
	if delta != nil && len(gone) <= parkMax {
		var unparked []netlink.Link
		for _, l := range gone {
			if err := m.park(nh, l, have[mirrorPeer(l.Attrs().Name)]); err != nil {
				unparked = append(unparked, l)
			}
		}
		gone = unparked
	}
	if err := m.deleteLinks(ns, nh, gone); err != nil {
		errs = append(errs, err)
	}
	for name, w := range want {
		mac, _ := net.ParseMAC(w.mac)
		l, ok := have[name]
		peer := have[mirrorPeer(name)]
		created := !ok
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
			peer = nil // created with it: read it below
		} else if peer == nil {
			errs = append(errs, fmt.Errorf("%s exists in the namespace and is not a mirror", name))
			continue
		}
		if mac != nil && l.Attrs().HardwareAddr.String() != mac.String() {
			if err := nh.LinkSetHardwareAddr(l, mac); err != nil {
				errs = append(errs, fmt.Errorf("%s: set address: %w", name, err))
			}
		}
		if peer == nil {
			if peer, err = nh.LinkByName(mirrorPeer(name)); err != nil {
				errs = append(errs, fmt.Errorf("%s: peer: %w", name, err))
				continue
			}
		}
		if created {
			// The peer stands for what is behind the netdev (a VF, whose
			// driver vflag unbinds; the wire): silent until traffic is
			// sent. With a link-local address it would send IPv6 DAD,
			// router solicitations and MLD reports at every up, which
			// ovs-vswitchd receives on the mirror and floods to every
			// port: about a second of its CPU after an up of 2 x 64 VFs,
			// which no mlx5 host has. No address, no such packets (where
			// IPv6 is off there is nothing to quiet: the error is moot).
			_ = nh.LinkSetIP6AddrGenMode(peer, in6AddrGenModeNone)
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

// listLinks dumps the namespace's links with only what a sync compares:
// index, name, MAC, flags and whether it is a veth. The kernel is asked to
// leave the statistics out, and nothing else is decoded: netlink.LinkList
// decodes every attribute of every link, which made opening a simulated
// host with a few hundred mirrors cost several milliseconds before any
// vflag work.
// rtextFilterSkipStats is RTEXT_FILTER_SKIP_STATS (linux/rtnetlink.h).
const rtextFilterSkipStats = 1 << 3

func listLinks(ns netns.NsHandle) ([]netlink.Link, error) {
	sock, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sock.Close() }()
	req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_DUMP)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: {Socket: sock}}
	req.AddData(nl.NewIfInfomsg(unix.AF_UNSPEC))
	req.AddData(nl.NewRtAttr(unix.IFLA_EXT_MASK, nl.Uint32Attr(rtextFilterSkipStats)))
	msgs, err := req.Execute(unix.NETLINK_ROUTE, unix.RTM_NEWLINK)
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return nil, err
	}
	links := make([]netlink.Link, 0, len(msgs))
	for _, m := range msgs {
		if len(m) < unix.SizeofIfInfomsg {
			continue
		}
		info := nl.DeserializeIfInfomsg(m)
		attrs, err := nl.ParseRouteAttr(m[unix.SizeofIfInfomsg:])
		if err != nil {
			return nil, err
		}
		la := netlink.LinkAttrs{Index: int(info.Index)}
		if info.Flags&unix.IFF_UP != 0 {
			la.Flags |= net.FlagUp
		}
		veth := false
		for _, a := range attrs {
			switch a.Attr.Type {
			case unix.IFLA_IFNAME:
				la.Name = string(bytes.TrimRight(a.Value, "\x00"))
			case unix.IFLA_ADDRESS:
				if slices.ContainsFunc(a.Value, func(b byte) bool { return b != 0 }) { // as netlink.LinkList
					la.HardwareAddr = net.HardwareAddr(bytes.Clone(a.Value))
				}
			case unix.IFLA_LINKINFO:
				infos, err := nl.ParseRouteAttr(a.Value)
				if err != nil {
					return nil, err
				}
				for _, i := range infos {
					if i.Attr.Type == unix.IFLA_INFO_KIND {
						veth = string(bytes.TrimRight(i.Value, "\x00")) == "veth"
					}
				}
			}
		}
		if veth {
			links = append(links, &netlink.Veth{LinkAttrs: la})
		} else {
			links = append(links, &netlink.Device{LinkAttrs: la})
		}
	}
	return links, nil
}

// deleteLinks deletes mirrors in batches of deleteBatch: each batch is
// moved into this process's grave group, then one RTM_DELLINK for that
// group unregisters them together (the first batch with the mirrors parked
// before: park). Deleting them one by one costs the kernel an RCU grace
// period each (about 17 ms here: 64 representors took over a second),
// which a real eswitch mode change does not spend on veths; deleting a
// hundred in one call holds RTNL for some 50 ms, which every other card's
// netlink call in the namespace (its bond, its links) waits for, as it does
// not for a real card's mode change. Where a batch fails, its mirrors are
// deleted one by one.
func (m *mirror) deleteLinks(ns netns.NsHandle, nh *netlink.Handle, links []netlink.Link) error {
	var errs []error
	for batch := range slices.Chunk(links, deleteBatch) {
		if err := m.deleteGroup(ns, nh, batch); err == nil {
			continue
		}
		for _, l := range batch {
			if err := nh.LinkDel(l); err != nil && !errors.Is(err, syscall.ENODEV) {
				errs = append(errs, fmt.Errorf("delete %s: %w", l.Attrs().Name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// deleteBatch is how many mirrors one RTM_DELLINK deletes (deleteLinks).
const deleteBatch = 16

// Parking. A delta that removes a few netdevs (a bond, a VLAN device)
// does not delete their mirrors: that would cost a grace period each
// (above), and the grace periods of two cards' bonds deleted side by side
// would queue on the namespace's RTNL. It parks each instead: both ends
// down, renamed to grave names (the netdev's name and its peer's are free
// again at once, as the simulated netdev is gone), the mirror's end moved
// into the process's grave group. The next batch deletion (a mode
// change's representors) or the host's close deletes them with its own.

// parkMax: a delta that removes up to this many mirrors parks them; one
// that removes more deletes them in a batch.
const parkMax = deltaByName

// graveSeq numbers the parked mirrors of one process.
var graveSeq atomic.Uint32

// graveGroup is this process's grave group: the netdev group its batch
// deletions and parked mirrors use (bit 31 set and the pid keep it apart
// from the default group 0 and from other processes' groups).
func graveGroup() uint32 { return 1<<31 | uint32(os.Getpid()&0x7fffffff) }

// isGrave tells whether name is a parked mirror's end (its peer is
// gravePeer(name)): "svz", the pid's 5 and the sequence's 7 hex digits.
func isGrave(name string) bool { return len(name) == 15 && strings.HasPrefix(name, "svz") }

func gravePeer(name string) string { return "svy" + name[3:] }

// park parks mirror l (peer: its peer, nil when not read yet).
func (m *mirror) park(nh *netlink.Handle, l, peer netlink.Link) error {
	if peer == nil {
		var err error
		if peer, err = nh.LinkByName(mirrorPeer(l.Attrs().Name)); err != nil {
			return err
		}
	}
	grave := fmt.Sprintf("svz%05x%07x", os.Getpid()&0xfffff, graveSeq.Add(1)&0xfffffff)
	for _, x := range []netlink.Link{l, peer} {
		if x.Attrs().Flags&net.FlagUp != 0 {
			if err := nh.LinkSetDown(x); err != nil {
				return err
			}
		}
	}
	if err := nh.LinkSetGroup(l, int(graveGroup())); err != nil {
		return err
	}
	m.graves.Store(true)
	if err := nh.LinkSetName(l, grave); err != nil {
		return err
	}
	return nh.LinkSetName(peer, gravePeer(grave))
}

// sweep deletes the mirrors this process parked.
func (m *mirror) sweep() error {
	ns, err := netns.GetFromPath(m.path)
	if err != nil {
		return err
	}
	defer func() { _ = ns.Close() }()
	return m.deleteGroup(ns, nil, nil)
}

// deleteGroup moves links into the grave group and deletes the group:
// links and the parked mirrors.
func (m *mirror) deleteGroup(ns netns.NsHandle, nh *netlink.Handle, links []netlink.Link) error {
	group := graveGroup()
	for _, l := range links {
		if err := nh.LinkSetGroup(l, int(group)); err != nil {
			return err
		}
	}
	m.graves.Store(false)
	sock, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return err
	}
	defer func() { _ = sock.Close() }()
	req := nl.NewNetlinkRequest(unix.RTM_DELLINK, unix.NLM_F_ACK)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: {Socket: sock}}
	req.AddData(nl.NewIfInfomsg(unix.AF_UNSPEC))
	req.AddData(nl.NewRtAttr(unix.IFLA_GROUP, nl.Uint32Attr(group)))
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil && !errors.Is(err, syscall.ENODEV) {
		return err
	}
	return nil
}
