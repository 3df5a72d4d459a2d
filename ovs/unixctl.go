package ovs

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// DefaultRunDir is where Open vSwitch keeps its pid files and control
// sockets.
const DefaultRunDir = "/var/run/openvswitch"

// RunDirOf is the run directory of the daemons behind an OVSDB endpoint:
// the directory of a "unix:" socket, else DefaultRunDir.
func RunDirOf(endpoint string) string {
	if p, ok := strings.CutPrefix(endpoint, "unix:"); ok && filepath.IsAbs(p) {
		return filepath.Dir(p)
	}
	return DefaultRunDir
}

// VswitchdSocket is ovs-vswitchd's control socket in runDir:
// ovs-vswitchd.<pid>.ctl, the pid read from ovs-vswitchd.pid, or
// ovs-vswitchd.ctl where the daemon was started with --unixctl naming it so.
func VswitchdSocket(runDir string) (string, error) {
	pidFile := filepath.Join(runDir, "ovs-vswitchd.pid")
	pidData, err := os.ReadFile(pidFile)
	if err != nil {
		return "", fmt.Errorf("ovs-vswitchd's pid file: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidData)))
	if err != nil || pid <= 0 {
		return "", fmt.Errorf("pid file %s holds %q", pidFile, strings.TrimSpace(string(pidData)))
	}
	sock := filepath.Join(runDir, fmt.Sprintf("ovs-vswitchd.%d.ctl", pid))
	if _, err := os.Stat(sock); err != nil {
		if alt := filepath.Join(runDir, "ovs-vswitchd.ctl"); fileExists(alt) {
			return alt, nil
		}
		return "", fmt.Errorf("ovs-vswitchd's control socket: %w", err)
	}
	return sock, nil
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Appctl runs one unixctl command of the daemon listening on sock and
// returns its text output ("ovs-appctl -t $sock $method $params..."):
// JSON-RPC 1.0, one request, one reply. No shell, no ovs-appctl binary.
func Appctl(sock, method string, params []string, timeout time.Duration) (string, error) {
	c, err := net.DialTimeout("unix", sock, timeout)
	if err != nil {
		return "", fmt.Errorf("ovs-appctl %s: %w", method, err)
	}
	defer func() { _ = c.Close() }()
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", fmt.Errorf("ovs-appctl %s: %w", method, err)
	}
	if params == nil {
		params = []string{}
	}
	req := struct {
		Method string   `json:"method"`
		Params []string `json:"params"`
		ID     int      `json:"id"`
	}{method, params, 0}
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return "", fmt.Errorf("ovs-appctl %s: send: %w", method, err)
	}
	var reply struct {
		Result *string          `json:"result"`
		Error  *json.RawMessage `json:"error"`
	}
	if err := json.NewDecoder(c).Decode(&reply); err != nil {
		return "", fmt.Errorf("ovs-appctl %s: reply from %s: %w", method, sock, err)
	}
	if reply.Error != nil && string(*reply.Error) != "null" {
		var msg string
		if json.Unmarshal(*reply.Error, &msg) != nil {
			msg = string(*reply.Error)
		}
		return "", fmt.Errorf("ovs-appctl %s: %w: %s", method, ErrAppctl, strings.TrimSpace(msg))
	}
	if reply.Result == nil {
		return "", fmt.Errorf("ovs-appctl %s: reply without a result", method)
	}
	return *reply.Result, nil
}

// ErrAppctl marks a command that ovs-vswitchd answered with an error.
var ErrAppctl = errors.New("ovs-vswitchd refused the command")

// DPFlow is one datapath flow as "ovs-appctl dpctl/dump-flows -m" prints
// it (ovs-dpctl(8); lib/dpctl.c format_dpif_flow): "ufid:U, MATCH,
// packets:N, bytes:N, used:T[, flags:F][, offloaded:yes|partial][, dp:tc|ovs],
// actions:A".
type DPFlow struct {
	UFID    string `json:"ufid,omitempty"`
	Match   string `json:"match"`
	InPort  string `json:"in_port"`
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	Used    string `json:"used"`
	// Offloaded is "yes" (in hardware), "partial" (the datapath runs it
	// with hardware help) or "" (not offloaded).
	Offloaded string `json:"offloaded,omitempty"`
	// DP is the datapath layer that holds the flow: "tc" or "ovs" (the
	// kernel datapath); "" when ovs-vswitchd did not say.
	DP      string `json:"dp,omitempty"`
	Actions string `json:"actions"`
}

// ParseDumpFlows reads the output of "dpctl/dump-flows -m", one flow a
// line; a line it cannot read is an error naming it.
func ParseDumpFlows(out string) ([]DPFlow, error) {
	var flows []DPFlow
	for i, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		// The userspace datapath heads each thread's flows with
		// "flow-dump from the main thread:" / "flow-dump from pmd on cpu core: N".
		if line == "" || strings.HasPrefix(line, "flow-dump from ") {
			continue
		}
		f, err := parseDPFlow(line)
		if err != nil {
			return nil, fmt.Errorf("dpctl/dump-flows line %d %q: %w", i+1, line, err)
		}
		flows = append(flows, f)
	}
	return flows, nil
}

func parseDPFlow(line string) (DPFlow, error) {
	var f DPFlow
	head, actions, ok := strings.Cut(line, ", actions:")
	if !ok {
		return f, errors.New("no actions")
	}
	f.Actions = actions
	if i := strings.Index(f.Actions, ", dp-extra-info:"); i >= 0 {
		f.Actions = f.Actions[:i]
	}
	if u, rest, ok := strings.Cut(head, ", "); ok && strings.HasPrefix(u, "ufid:") {
		f.UFID, head = strings.TrimPrefix(u, "ufid:"), rest
	}
	i := strings.LastIndex(head, ", packets:")
	if i < 0 {
		return f, errors.New("no packets")
	}
	f.Match = head[:i]
	for _, kv := range strings.Split(head[i+2:], ", ") {
		k, v, _ := strings.Cut(kv, ":")
		var err error
		switch k {
		case "packets":
			f.Packets, err = strconv.ParseUint(v, 10, 64)
		case "bytes":
			f.Bytes, err = strconv.ParseUint(v, 10, 64)
		case "used":
			f.Used = v
		case "offloaded":
			f.Offloaded = v
		case "dp":
			f.DP = v
		}
		if err != nil {
			return f, fmt.Errorf("%s: %w", k, err)
		}
	}
	f.InPort = matchField(f.Match, "in_port")
	return f, nil
}

// matchField is the value of key(...) in a flow's match, "" when absent.
func matchField(match, key string) string {
	for s := match; ; {
		j := strings.Index(s, key+"(")
		if j < 0 {
			return ""
		}
		if j == 0 || s[j-1] == ',' {
			rest := s[j+len(key)+1:]
			if k := strings.IndexByte(rest, ')'); k >= 0 {
				return rest[:k]
			}
			return ""
		}
		s = s[j+1:]
	}
}
