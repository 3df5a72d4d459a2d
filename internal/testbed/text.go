package testbed

import "strings"

// NormalizeXML drops the empty <metadata/> libvirt leaves after the last
// entry is removed, so a domain's XML compares equal to its baseline.
func NormalizeXML(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) == "<metadata/>" {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// DiffText lists, line by line, where two dumps differ ("- a" / "+ b").
func DiffText(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out = append(out, "- "+x, "+ "+y)
		}
	}
	return strings.Join(out, "\n")
}
