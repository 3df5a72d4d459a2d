package doctor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/ovs"
)

// sbinDirs are searched after PATH: tools such as devlink, mstconfig and
// ovs-vswitchd live in sbin, which a user's PATH may lack.
var sbinDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}

// ExecRunner is the real Runner: it runs the named program directly (no
// shell), with LC_ALL=C for stable output, stdin from /dev/null and a
// timeout per command.
type ExecRunner struct {
	Timeout time.Duration // per command; default 15 s
}

// LookPath implements Runner.
func (ExecRunner) LookPath(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, '/') {
		return "", fmt.Errorf("invalid tool name %q", name)
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range sbinDirs {
		p := filepath.Join(dir, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, ErrNoTool)
}

// Output implements Runner.
func (r ExecRunner) Output(ctx context.Context, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("no command")
	}
	p, err := r.LookPath(argv[0])
	if err != nil {
		return nil, err
	}
	t := r.Timeout
	if t <= 0 {
		t = 15 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	cmd := exec.CommandContext(ctx, p, argv[1:]...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = strings.TrimSpace(string(out))
		}
		if msg != "" {
			return out, fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, firstLine(msg))
		}
		return out, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return out, nil
}

// HostProber is the real Prober: it connects as vflag does (libovsdb,
// libvirt) and closes again.
type HostProber struct{}

// OVSDB implements Prober.
func (HostProber) OVSDB(ctx context.Context, endpoint string) error {
	c, err := ovs.Connect(ctx, endpoint)
	if err != nil {
		return err
	}
	c.Close()
	return nil
}

// Libvirt implements Prober. libvirt's connect cannot be cancelled: a hung
// daemon is given up on when ctx ends (the connect goroutine is left behind).
func (HostProber) Libvirt(ctx context.Context, uri string) error {
	ch := make(chan error, 1)
	go func() {
		c, err := libvirtx.Open(uri)
		if err == nil {
			_ = c.Close()
		}
		ch <- err
	}()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return fmt.Errorf("libvirt: connect to %s: no answer: %w", uri, ctx.Err())
	}
}
