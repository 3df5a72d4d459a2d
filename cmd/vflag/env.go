package main

import (
	"context"
	"log/slog"

	"github.com/vflag/vflag/eswitch"
	"github.com/vflag/vflag/internal/config"
	"github.com/vflag/vflag/internal/host"
	"github.com/vflag/vflag/internal/pipeline"
	"github.com/vflag/vflag/internal/sysfs"
	"github.com/vflag/vflag/libvirtx"
	"github.com/vflag/vflag/ovs"
	"github.com/vflag/vflag/sriov"
)

// env is one command's pipeline run and host.
type env struct {
	*pipeline.Env
	h   *host.Host
	cfg *config.Config
	k   eswitch.Kernel
	fs  sysfs.FS
	pci sriov.Host
	log *slog.Logger
}

func newEnv(cfg *config.Config, h *host.Host, log *slog.Logger) *env {
	pe := pipeline.New(cfg, h, log)
	return &env{Env: pe, h: h, cfg: pe.Config(), k: h.Kernel, fs: h.FS, pci: h.PCI, log: log}
}

func (e *env) ovsClient(ctx context.Context) (*ovs.Client, error) { return e.h.OVS(ctx) }
func (e *env) virtConn() (*libvirtx.Conn, error)                  { return e.h.Virt() }
func (e *env) close()                                             { e.h.Close() }

func (e *env) modeOf(pf eswitch.PF) string {
	m, _ := e.k.EswitchMode(pf.Devlink)
	return m
}
