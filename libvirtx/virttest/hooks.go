package virttest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Option changes how Start prepares the daemon.
type Option func(*options)

type options struct {
	captureHooks []string
	fakeVFs      []string
}

// CaptureHooks installs, for each hook driver named ("daemon", "qemu",
// "network", ...), a hook script /etc/libvirt/hooks/<driver> in the private
// configuration that records every call (its arguments and standard input)
// and exits 0. HookCalls returns the records. libvirtd looks for hook
// scripts only when it starts, so they are installed before it.
func CaptureHooks(drivers ...string) Option {
	return func(o *options) { o.captureHooks = append(o.captureHooks, drivers...) }
}

// HookCall is one call of a captured hook script.
type HookCall struct {
	// Args are the script's arguments: object name, operation,
	// sub-operation, extra ("vflag-lag0", "port-created", "begin", "-").
	Args []string
	// Stdin is what libvirt wrote to the script's standard input (the
	// hookData XML).
	Stdin string
}

// The script writes each call into two files named after the time of the
// call, the arguments one per line and standard input, and renames them
// into place when complete; HookCalls reads only complete calls.
const captureScript = `#!/bin/sh
# written by virttest: record this hook call
dir=%q
f=$(mktemp "$dir/.call-$(date +%%s%%N)-XXXXXX")
printf '%%s\n' "$@" > "$f.args"
cat > "$f.stdin"
base=${f##*/.}
mv "$f.stdin" "$dir/$base.stdin"
mv "$f.args" "$dir/$base.args"
rm -f "$f"
exit 0
`

var hookDriverOK = map[string]bool{"daemon": true, "qemu": true, "lxc": true, "libxl": true, "bhyve": true, "network": true}

func (d *Daemon) hookCallDir(driver string) string {
	return filepath.Join(d.base, "hook-calls", driver)
}

func (d *Daemon) installHooks(drivers []string) error {
	if len(drivers) == 0 {
		return nil
	}
	hooks := filepath.Join(d.base, "etc", "hooks")
	if err := os.MkdirAll(hooks, 0o755); err != nil {
		return err
	}
	for _, drv := range drivers {
		if !hookDriverOK[drv] {
			return fmt.Errorf("unknown hook driver %q", drv)
		}
		dir := d.hookCallDir(drv)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		script := fmt.Sprintf(captureScript, dir)
		if err := os.WriteFile(filepath.Join(hooks, drv), []byte(script), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// HookCalls returns the recorded calls of a hook installed by CaptureHooks,
// oldest first; none when nothing called it (or it was not installed).
func (d *Daemon) HookCalls(driver string) ([]HookCall, error) {
	dir := d.hookCallDir(driver)
	names, err := filepath.Glob(filepath.Join(dir, "call-*.args"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []HookCall
	for _, n := range names {
		args, err := os.ReadFile(n)
		if err != nil {
			return nil, err
		}
		stdin, err := os.ReadFile(strings.TrimSuffix(n, ".args") + ".stdin")
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		out = append(out, HookCall{Args: strings.Split(strings.TrimSuffix(string(args), "\n"), "\n"), Stdin: string(stdin)})
	}
	return out, nil
}

// HookOps are the operations a hook installed by CaptureHooks was called
// with for one object (a network's or domain's name), oldest first:
// "operation sub-operation" ("start begin", "stopped end").
func (d *Daemon) HookOps(driver, object string) ([]string, error) {
	calls, err := d.HookCalls(driver)
	if err != nil {
		return nil, err
	}
	var ops []string
	for _, c := range calls {
		if len(c.Args) >= 3 && c.Args[0] == object {
			ops = append(ops, c.Args[1]+" "+c.Args[2])
		}
	}
	return ops, nil
}
