package pathsafe

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// MaxComponent bounds an encoded component, in bytes. NAME_MAX is 255; the
// rest leaves room for what is put beside it (atomicfile's
// ".<name>.tmp-<random>", ".json").
const MaxComponent = 200

// keep reports whether b stands for itself in an encoded component. The set
// is url.PathEscape's unescaped set (the encoding of earlier releases), so
// the state of a domain named like "vm-1", "web_01" or "db.prod" keeps its
// path across the upgrade. Everything else, '%' included, becomes %XX.
func keep(b byte) bool {
	switch {
	case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		return true
	}
	return strings.IndexByte("-_.~$&+,:;=@", b) >= 0
}

const hexDigits = "0123456789ABCDEF"

// Component encodes name as one path component that stays in its directory:
// never empty, ".", ".." or hidden (a leading '.' is encoded: "." and ".."
// become "%2E" and "%2E."), no '/', NUL or control character, at most
// MaxComponent bytes. The encoding is injective and Decode reverses it. An
// empty name, or one whose encoding is longer than MaxComponent, is refused.
func Component(name string) (string, error) {
	if name == "" {
		return "", errors.New("empty name")
	}
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		if keep(c) && !(i == 0 && c == '.') {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
		if b.Len() > MaxComponent {
			return "", fmt.Errorf("name of %d bytes is too long to keep state under (at most %d bytes once encoded)", len(name), MaxComponent)
		}
	}
	return b.String(), nil
}

// Decode reverses Component. It accepts only what Component produces (so a
// file that is not one of vflag's, such as a temporary ".x.tmp-1", is not
// taken for a name).
func Decode(component string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(component); i++ {
		c := component[i]
		if c != '%' {
			if !keep(c) || (i == 0 && c == '.') {
				return "", false
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(component) {
			return "", false
		}
		hi, lo := strings.IndexByte(hexDigits, component[i+1]), strings.IndexByte(hexDigits, component[i+2])
		if hi < 0 || lo < 0 {
			return "", false
		}
		d := byte(hi<<4 | lo)
		if keep(d) && !(i == 0 && d == '.') {
			return "", false // not canonical: Component leaves it as is
		}
		b.WriteByte(d)
		i += 2
	}
	name := b.String()
	if name == "" {
		return "", false
	}
	return name, true
}

// Join is dir/Component(name): the path of name's state under dir, which
// never leaves dir. what names the kind of name for the error ("domain").
func Join(dir, what, name string) (string, error) {
	c, err := Component(name)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", what, truncate(name), err)
	}
	return filepath.Join(dir, c), nil
}

// truncate keeps an error message readable for a very long name.
func truncate(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:61] + "..."
}
