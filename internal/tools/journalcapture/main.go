// Command journalcapture writes a journal fixture for the journal
// compatibility test (cmd/vflag/journal_compat_test.go): it runs a built
// vflag binary's `up` on a fresh simulated host with a private
// ovsdb-server/ovs-vswitchd and libvirtd (the test harnesses ovs/ovstest and
// libvirtx/virttest), then stores the journal.json that up wrote with the
// run-specific strings replaced by placeholders, byte for byte otherwise:
//
//	@OVSDB@    the private OVSDB endpoint (unix:<temp dir>/db.sock)
//	@LIBVIRT@  the private libvirt URI (qemu+unix:///system?socket=...)
//	@NETNS@    the network namespace the simulated netdevs are mirrored into
//
// The config is a template with the same placeholders; it is stored next to
// the fixture as <name>.config.yaml, and every domain its attachments name is
// defined (shut off) first. An existing fixture is never overwritten:
// fixtures are never edited, a format change adds one.
//
//	go build -o /tmp/fx/vflag ./cmd/vflag
//	go run ./internal/tools/journalcapture -vflag /tmp/fx/vflag \
//	    -config internal/pipeline/testdata/journals/NAME.config.yaml \
//	    -out internal/pipeline/testdata/journals/NAME.json
//
// With -first, a complete up of that config template comes first, and the
// captured up (of -config, with the extra arguments -up-args, exiting
// -exit) changes the host it left: the journal of a run that failed
// without rollback, for instance (-up-args "--no-rollback --fail-at ID"
// -exit 1), whose entries are open.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/vflag/vflag/internal/testbed"
	"github.com/vflag/vflag/libvirtx/virttest"
	"github.com/vflag/vflag/ovs/ovstest"
)

// Placeholders for the run-specific strings, in the config template and in
// the fixture.
const (
	phOVSDB   = "@OVSDB@"
	phLibvirt = "@LIBVIRT@"
	phNetns   = "@NETNS@"
)

func main() {
	bin := flag.String("vflag", "bin/vflag", "the vflag binary that writes the journal")
	config := flag.String("config", "", "config template (with @OVSDB@, @LIBVIRT@, @NETNS@)")
	out := flag.String("out", "", "fixture to write (must not exist)")
	raw := flag.String("raw", "", "also keep the journal as vflag wrote it (before placeholders) here")
	first := flag.String("first", "", "config template of a complete up before the captured one")
	upArgs := flag.String("up-args", "", "more arguments of the captured up, space-separated")
	exit := flag.Int("exit", 2, "the exit code the captured up must give (with --detailed-exit-codes)")
	verbose := flag.Bool("v", false, "show the daemons' logs")
	flag.Parse()
	if *config == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "usage: journalcapture -vflag BIN -config TEMPLATE -out FIXTURE [-raw FILE] [-first TEMPLATE -up-args ARGS -exit N]")
		os.Exit(2)
	}
	r := &testbed.Runner{Verbose: *verbose}
	err := capture(r, *bin, captureRun{config: *config, first: *first, upArgs: strings.Fields(*upArgs), exit: *exit}, *out, *raw)
	r.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "journalcapture: %v\n", err)
		os.Exit(1)
	}
}

// captureRun is what journalcapture runs: the captured up of config (with
// upArgs, exiting exit), after a complete up of first when set.
type captureRun struct {
	config, first string
	upArgs        []string
	exit          int
}

func capture(r *testbed.Runner, bin string, run captureRun, out, rawOut string) error {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s exists: fixtures are never rewritten, add a new one", out)
	}

	srv := ovstest.Start(r)
	virt := virttest.Start(r)
	fill := strings.NewReplacer(phOVSDB, srv.Endpoint(), phLibvirt, virt.URI(), phNetns, srv.Netns())
	unfill := strings.NewReplacer(srv.Endpoint(), phOVSDB, virt.URI(), phLibvirt, srv.Netns(), phNetns)
	dir := r.TempDir()
	cfgPath := filepath.Join(dir, "vflag.yaml")
	defined := map[string]bool{}
	// useConfig fills a template in (a placeholder (@...) is no YAML
	// scalar), defines the domains its attachments name and makes it
	// the config of the runs.
	useConfig := func(path string) error {
		tmpl, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		cfg := fill.Replace(string(tmpl))
		domains, err := attachedDomains([]byte(cfg))
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		for _, d := range domains {
			if !defined[d] {
				defined[d] = true
				virt.DefineDomain(r, d)
			}
		}
		return os.WriteFile(cfgPath, []byte(cfg), 0o600)
	}
	first := run.config
	if run.first != "" {
		first = run.first
	}
	if err := useConfig(first); err != nil {
		return err
	}
	simDir, state := filepath.Join(dir, "sim"), filepath.Join(dir, "state")
	vflag := func(want int, args ...string) error {
		all := append([]string{"--config", cfgPath, "--sim", simDir, "--state-dir", state}, args...)
		cmd := exec.Command(abs, all...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			return err
		}
		fmt.Printf("$ vflag %s  (exit %d)\n%s", strings.Join(args, " "), code, stdout.String())
		if code != want {
			return fmt.Errorf("vflag %s: exit %d, want %d\n%s", strings.Join(args, " "), code, want, stderr.String())
		}
		return nil
	}
	if run.first != "" {
		if err := vflag(2, "up", "--detailed-exit-codes"); err != nil {
			return err
		}
		if err := useConfig(run.config); err != nil {
			return err
		}
	}
	if err := vflag(run.exit, append([]string{"up", "--detailed-exit-codes"}, run.upArgs...)...); err != nil {
		return err
	}
	journal, err := os.ReadFile(filepath.Join(state, "journal.json"))
	if err != nil {
		return err
	}
	if rawOut != "" {
		if err := os.WriteFile(rawOut, journal, 0o644); err != nil {
			return err
		}
	}
	for _, ph := range []string{phOVSDB, phLibvirt, phNetns} {
		if bytes.Contains(journal, []byte(ph)) {
			return fmt.Errorf("the journal already contains the placeholder %s", ph)
		}
	}
	fixture := unfill.Replace(string(journal))
	if fill.Replace(fixture) != string(journal) {
		return errors.New("the placeholders do not substitute back to the journal vflag wrote")
	}
	// Nothing else of this run may remain: the fixture must work on another.
	for _, p := range []string{dir, srv.Dir(), virt.Dir()} {
		if strings.Contains(fixture, p) {
			return fmt.Errorf("the journal names the run's temp dir %s outside a placeholder", p)
		}
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(fixture); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%d bytes)\n", out, len(fixture))
	return vflag(0, "down")
}

// attachedDomains are the domains the config's attachments name.
func attachedDomains(cfg []byte) ([]string, error) {
	var c struct {
		Groups []struct {
			Attachments []struct {
				Domain string `yaml:"domain"`
			} `yaml:"attachments"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(cfg, &c); err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for _, g := range c.Groups {
		for _, a := range g.Attachments {
			if a.Domain != "" && !seen[a.Domain] {
				seen[a.Domain] = true
				out = append(out, a.Domain)
			}
		}
	}
	return out, nil
}
