package main

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// plan is one way to build a stage: a kernel ABI and the packages it takes.
type plan struct {
	abi     string // 6.1.0-56-amd64, 7.2.13+deb14-amd64; "" for a stage without a kernel
	version string // the kernel image's version
	series  string // 6.1, 7.2: linux-source-<series>
	wants   []want
}

// stage is one stage of the e2e bed whose Debian packages are resolved
// here: its plans, best first, from what the archive offers.
type stage struct {
	name  string
	about string
	plans func(idx index) ([]plan, error)
}

var stages = map[string]stage{
	"kernel": {
		name:  "kernel",
		about: "bookworm's 6.1 kernel and netdevsim built against its headers",
		plans: bookwormKernelPlans,
	},
	"kernel-sid": {
		name:  "kernel-sid",
		about: "Debian unstable's kernel (the one linux-image-amd64 names) and netdevsim built against its headers",
		plans: sidKernelPlans,
	},
	"qemu-trixie": {
		name:  "qemu-trixie",
		about: "trixie's QEMU (the igb SR-IOV NIC)",
		plans: func(index) ([]plan, error) {
			return []plan{{wants: []want{{name: "qemu-system-x86"}}}}, nil
		},
	},
}

var bookwormImageRE = regexp.MustCompile(`^linux-image-(6\.1\.0-([0-9]+)-amd64)$`)

// bookwormKernelPlans: every 6.1 ABI the archive offers an image of, the
// newest first (an ABI whose headers are not published yet falls back to
// the one before it). The headers, their -common part and kbuild are held
// to what the headers' Depends say (linux-headers-X Depends:
// linux-headers-X-common (= V), linux-kbuild-6.1 (>= V)); the image's own
// version is taken where it fits. netdevsim's source must be the image's
// upstream release.
func bookwormKernelPlans(idx index) ([]plan, error) {
	type abi struct {
		name string
		n    int
	}
	var abis []abi
	for name := range idx {
		if m := bookwormImageRE.FindStringSubmatch(name); m != nil && len(idx[name]) > 0 {
			n, _ := strconv.Atoi(m[2])
			abis = append(abis, abi{m[1], n})
		}
	}
	if len(abis) == 0 {
		return nil, errors.New("the archive offers no linux-image-6.1.0-*-amd64 (is bookworm in the apt sources? apt-get update?)")
	}
	sort.Slice(abis, func(i, j int) bool { return abis[i].n > abis[j].n })
	var plans []plan
	for _, a := range abis {
		v := idx.offered("linux-image-" + a.name)[0]
		plans = append(plans, kernelPlan(a.name, v, "6.1",
			"linux-image-"+a.name, "linux-headers-"+a.name, "linux-headers-"+strings.TrimSuffix(a.name, "-amd64")+"-common", "linux-kbuild-6.1"))
	}
	return plans, nil
}

// kernelPlan: the packages named, each preferring the image's version v,
// then linux-source-<series> at v's upstream release.
func kernelPlan(abi, v, series string, pkgs ...string) plan {
	p := plan{abi: abi, version: v, series: series}
	for _, name := range pkgs {
		p.wants = append(p.wants, want{name: name, prefer: v})
	}
	p.wants = append(p.wants, want{name: "linux-source-" + series, prefer: v, sameUpstream: upstreamOf(v)})
	return p
}

var sidImageRE = regexp.MustCompile(`^linux-image-([0-9][^ ]*-amd64)$`)

// sidKernelPlans: the ABI sid's linux-image-amd64 depends on, at the
// version it names; the image's parts (binary, modules, base) are held to
// what the image's Depends say, the headers to what theirs say.
func sidKernelPlans(idx index) ([]plan, error) {
	metas := idx.offered("linux-image-amd64")
	if len(metas) == 0 {
		return nil, errors.New("the archive offers no linux-image-amd64")
	}
	meta := idx.stanza("linux-image-amd64", metas[0])
	for _, g := range meta.depends {
		if len(g) != 1 {
			continue
		}
		m := sidImageRE.FindStringSubmatch(g[0].name)
		if m == nil || g[0].op != "=" {
			continue
		}
		v := g[0].version
		parts := strings.SplitN(upstreamOf(v), ".", 3)
		if len(parts) < 2 {
			return nil, fmt.Errorf("linux-image-amd64 %s names %s, whose version has no major.minor", metas[0], g[0])
		}
		series := parts[0] + "." + parts[1]
		a := m[1]
		p := plan{abi: a, version: v, series: series, wants: []want{{name: "linux-image-amd64", prefer: metas[0]}}}
		rest := kernelPlan(a, v, series, "linux-image-"+a, "linux-binary-"+a, "linux-modules-"+a, "linux-base-"+a, "linux-headers-"+a)
		p.wants = append(p.wants, rest.wants...)
		return []plan{p}, nil
	}
	return nil, fmt.Errorf("linux-image-amd64 %s names no linux-image-*-amd64 (= version) (Depends: %s)", metas[0], dependsText(meta))
}

func dependsText(s stanza) string {
	var gs []string
	for _, g := range s.depends {
		var as []string
		for _, a := range g {
			as = append(as, a.String())
		}
		gs = append(gs, strings.Join(as, " | "))
	}
	return strings.Join(gs, ", ")
}

// result is a resolved stage.
type result struct {
	plan  plan
	picks []pick
	// skipped: the plans before it that the archive could not satisfy.
	skipped []string
}

// resolveStage tries the stage's plans in order and takes the first the
// archive satisfies; when none is, the error is the first plan's (the
// newest kernel's), naming the others tried.
func resolveStage(st stage, idx index) (result, error) {
	plans, err := st.plans(idx)
	if err != nil {
		return result{}, err
	}
	var res result
	var first error
	for _, p := range plans {
		picks, err := resolve(idx, p.wants)
		if err == nil {
			res.plan, res.picks = p, picks
			return res, nil
		}
		if first == nil {
			first = err
		}
		res.skipped = append(res.skipped, fmt.Sprintf("%s %s: %v", p.abi, p.version, err))
	}
	if len(plans) > 1 {
		return result{}, fmt.Errorf("%w (and no older kernel ABI either: %s)", first, strings.Join(res.skipped[1:], "; "))
	}
	return result{}, first
}

// names lists every package any plan of the stage needs to see, for the
// next `apt-cache show`.
func names(st stage, idx index) []string {
	plans, err := st.plans(idx)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range plans {
		for _, w := range p.wants {
			if !seen[w.name] {
				seen[w.name] = true
				out = append(out, w.name)
			}
		}
	}
	return out
}
