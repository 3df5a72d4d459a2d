package main

// `vflag hook qemu`: the libvirt qemu hook (/etc/libvirt/hooks/qemu.d/vflag).
// The command is cmd/internal/hookcli's (shared with vflag-hook, which the
// installed hook scripts prefer), the logic internal/hook's.

import (
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/vflag/vflag/cmd/internal/hookcli"
)

func (a *app) hookCommand() *cobra.Command { return hookcli.Command(a.hookEnv()) }

// hookEnv is what the hook commands take from this invocation.
func (a *app) hookEnv() hookcli.Env {
	return hookcli.Env{
		StateDir:   a.stateDir,
		LoadConfig: a.loadConfig,
		OpenHost:   a.openHost,
		Log:        func() *slog.Logger { return a.log },
		Stderr:     a.stderr,
		StopAfter:  func() int { return a.v.GetInt("stop-after") },
		FailAt:     func() string { return a.v.GetString("fail-at") },
	}
}

// hookArgsAreLibvirts: see hookcli.ArgsAreLibvirts.
func hookArgsAreLibvirts(args []string) error { return hookcli.ArgsAreLibvirts(args) }
