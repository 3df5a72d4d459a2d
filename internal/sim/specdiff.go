package sim

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"time"
)

// SpecChange is one field in which a config's sim section differs from the
// spec a simulated host was created from (both with defaults filled in).
type SpecChange struct {
	Path   string // under sim:, as in the config: "nics[0].pfs[1].netdev"
	Saved  string // the host's value
	Config string // the config's value
}

func (c SpecChange) String() string {
	return fmt.Sprintf("%s: %s in the simulated host, %s in the config", c.Path, c.Saved, c.Config)
}

// Reconcile compares spec (a config's sim section) with the spec the host
// was created from. The latencies, which only time later operations, and
// the switch's peers, which only answer later neighbour lookups, are
// taken over in place (latency says whether they changed); every other
// difference is returned (nics, mirror_netns), and the host keeps its saved
// spec for those: a different NIC set needs the host re-created (Reset). A
// nil spec is no difference.
func (h *Host) Reconcile(spec *Spec) (changes []SpecChange, latency bool, err error) {
	if spec == nil {
		return nil, false, nil
	}
	norm, err := validate(spec)
	if err != nil {
		return nil, false, err
	}
	err = h.update(func(st *state, _ int64) (bool, error) {
		changes = diffSpec(st.Spec, *norm)
		kept := changes[:0]
		for _, c := range changes {
			if !strings.HasPrefix(c.Path, "latency.") && !strings.HasPrefix(c.Path, "switch_peers") {
				kept = append(kept, c)
			}
		}
		changes = kept
		// switch_peers only answer later ARP/ND: taken over too.
		peers := !slices.Equal(st.Spec.SwitchPeers, norm.SwitchPeers)
		st.Spec.SwitchPeers = norm.SwitchPeers
		if st.Spec.Latency == norm.Latency {
			return peers, nil
		}
		st.Spec.Latency = norm.Latency
		latency = true
		return true, nil
	})
	return changes, latency, err
}

// Reset re-creates the host from spec: every simulated kernel object (VFs,
// bonds, representors, modes, counters, dmesg) of the saved host is gone, as
// after a cold boot into a different machine. The caller makes sure nothing
// outside the host still refers to them (vflag: an empty journal). Mirrored
// veths follow: those of netdevs the new host lacks are removed; with a
// different mirror_netns the old namespace's are removed and the new one
// filled.
func (h *Host) Reset(spec *Spec) error {
	norm, err := validate(spec)
	if err != nil {
		return err
	}
	h.mmu.Lock()
	defer h.mmu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errClosed
	}
	if err := h.flock(syscall.LOCK_EX); err != nil {
		return err
	}
	h.st = newState(norm, h.now().UnixNano())
	err = h.save()
	h.funlock()
	if err != nil {
		return err
	}
	if h.mirror != nil && h.mirror.path != norm.MirrorNetns {
		// Empty the old namespace of this host's mirrors (gone with it
		// when it no longer exists).
		if err := h.mirror.sync(map[string]mirrorWant{}); err != nil && !isNoNetns(err) {
			return fmt.Errorf("sim: remove mirrors from %s: %w", h.mirror.path, err)
		}
		h.mirror.close()
		h.mirror = nil
	}
	if h.mirror == nil && norm.MirrorNetns != "" {
		h.mirror = newMirror(norm.MirrorNetns)
	}
	if h.mirror != nil {
		// A full sync: the namespace may hold anything.
		h.mirror.synced, h.mirror.noMark = nil, true
		return h.syncMirrorLocked()
	}
	return nil
}

// diffSpec lists the leaf fields in which two normalized specs differ, by
// their config paths (yaml tags).
func diffSpec(saved, cfg Spec) []SpecChange {
	var out []SpecChange
	diffValue("", reflect.ValueOf(saved), reflect.ValueOf(cfg), &out)
	return out
}

var durationType = reflect.TypeOf(time.Duration(0))

func diffValue(path string, a, b reflect.Value, out *[]SpecChange) {
	switch {
	case a.Type() == durationType:
		if a.Int() != b.Int() {
			*out = append(*out, SpecChange{Path: path, Saved: showDuration(a), Config: showDuration(b)})
		}
	case a.Kind() == reflect.Struct:
		t := a.Type()
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			p := name
			if path != "" {
				p = path + "." + name
			}
			diffValue(p, a.Field(i), b.Field(i), out)
		}
	case a.Kind() == reflect.Slice && a.Type().Elem().Kind() == reflect.Struct:
		n := min(a.Len(), b.Len())
		for i := 0; i < n; i++ {
			diffValue(fmt.Sprintf("%s[%d]", path, i), a.Index(i), b.Index(i), out)
		}
		if a.Len() != b.Len() {
			*out = append(*out, SpecChange{Path: path, Saved: fmt.Sprintf("%d entries", a.Len()), Config: fmt.Sprintf("%d entries", b.Len())})
		}
	case a.Kind() == reflect.Slice:
		if fmt.Sprint(a.Interface()) != fmt.Sprint(b.Interface()) {
			*out = append(*out, SpecChange{Path: path, Saved: showList(a), Config: showList(b)})
		}
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			*out = append(*out, SpecChange{Path: path, Saved: showScalar(a), Config: showScalar(b)})
		}
	}
}

func showDuration(v reflect.Value) string {
	if v.Int() == 0 {
		return "0 (none)"
	}
	return time.Duration(v.Int()).String()
}

func showList(v reflect.Value) string {
	parts := make([]string, v.Len())
	for i := range parts {
		parts[i] = fmt.Sprint(v.Index(i).Interface())
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func showScalar(v reflect.Value) string {
	if v.Kind() == reflect.String && v.String() == "" {
		return `"" (unset)`
	}
	return fmt.Sprint(v.Interface())
}

// isNoNetns: the mirror's namespace does not exist (any more).
func isNoNetns(err error) bool { return errors.Is(err, fs.ErrNotExist) }
