package ovnsb

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vflag/vflag/ovs"
)

// DefaultRunDir is where OVN's daemons keep their pid files and control
// sockets (Debian, Red Hat); $OVN_RUNDIR overrides it, as for ovn-appctl.
const DefaultRunDir = "/var/run/ovn"

// RunDir is $OVN_RUNDIR, else DefaultRunDir.
func RunDir() string {
	if d := os.Getenv("OVN_RUNDIR"); d != "" {
		return d
	}
	return DefaultRunDir
}

// ErrControllerNotRunning: no ovn-controller pid file, or its process is gone.
var ErrControllerNotRunning = errors.New("ovn-controller is not running")

// ControllerSocket is ovn-controller's control socket in runDir
// (ovn-controller.<pid>.ctl, the pid from ovn-controller.pid), after
// checking that the process lives.
func ControllerSocket(runDir string) (string, error) {
	pidFile := filepath.Join(runDir, "ovn-controller.pid")
	b, err := os.ReadFile(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%w (no %s)", ErrControllerNotRunning, pidFile)
	}
	if err != nil {
		return "", fmt.Errorf("ovn-controller's pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return "", fmt.Errorf("pid file %s holds %q", pidFile, strings.TrimSpace(string(b)))
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return "", fmt.Errorf("%w (pid %d in %s is gone)", ErrControllerNotRunning, pid, pidFile)
	}
	sock := filepath.Join(runDir, fmt.Sprintf("ovn-controller.%d.ctl", pid))
	if _, err := os.Stat(sock); err != nil {
		return "", fmt.Errorf("ovn-controller's control socket: %w", err)
	}
	return sock, nil
}

// controllerCall runs one unixctl command of ovn-controller.
func controllerCall(runDir, method string) (string, error) {
	sock, err := ControllerSocket(runDir)
	if err != nil {
		return "", err
	}
	out, err := ovs.Appctl(sock, method, nil, 5*time.Second)
	if err != nil {
		return "", fmt.Errorf("ovn-controller %s: %w", method, err)
	}
	return strings.TrimSpace(out), nil
}

// ControllerStatus is ovn-controller's connection to the Southbound:
// "connected" or "not connected" ("ovn-appctl -t ovn-controller
// connection-status", over its control socket: no shell, no ovn-appctl).
func ControllerStatus(runDir string) (string, error) {
	return controllerCall(runDir, "connection-status")
}

// ControllerVersion is the first line of ovn-controller's version
// ("ovn-appctl -t ovn-controller version": "ovn-controller 23.03.1").
func ControllerVersion(runDir string) (string, error) {
	out, err := controllerCall(runDir, "version")
	first, _, _ := strings.Cut(out, "\n")
	return first, err
}
