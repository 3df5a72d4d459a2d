package ovs

import (
	"bufio"
	"os"
	"strings"
)

// DefaultVswitchdLog is where Debian's and Red Hat's packages have
// ovs-vswitchd log (--log-file).
const DefaultVswitchdLog = "/var/log/openvswitch/ovs-vswitchd.log"

// vswitchdLogTail is how much of the end of ovs-vswitchd's log is read.
const vswitchdLogTail = 1 << 20

// FlowAPI tells, from the end of ovs-vswitchd's log, what ovs-vswitchd last
// said of port's offload API when it added the port
// (lib/netdev-offload.c netdev_init_flow_api): "<port>: Assigned flow API
// 'linux_tc'." (ok) or "<port>: No suitable flow API found." (not ok: every
// flow of the port stays in the kernel datapath until ovs-vswitchd adds the
// port again). known is false when the log says neither; err says why the
// log cannot be read.
func FlowAPI(logPath, port string) (ok, known bool, err error) {
	apis, err := FlowAPIs(logPath)
	ok, known = apis[port]
	return ok, known, err
}

// FlowAPIs is FlowAPI for every port the log names, in one read.
func FlowAPIs(logPath string) (map[string]bool, error) {
	out := map[string]bool{}
	err := ScanLogTail(logPath, func(line string) {
		if port, ok, said := FlowAPILine(line); said {
			out[port] = ok
		}
	})
	return out, err
}

// FlowAPILine reads one line of ovs-vswitchd's log: said is true when it
// says whether port got a flow API (ok).
func FlowAPILine(line string) (port string, ok, said bool) {
	_, msg, found := strings.Cut(line, "|netdev_offload|INFO|")
	if !found {
		return "", false, false
	}
	if port, _, found := strings.Cut(msg, ": Assigned flow API"); found {
		return port, true, true
	}
	if port, _, found := strings.Cut(msg, ": No suitable flow API found"); found {
		return port, false, true
	}
	return "", false, false
}

// ScanLogTail calls fn with each line of the last vswitchdLogTail bytes of
// ovs-vswitchd's log, oldest first; the error says why the log cannot be
// opened or read.
func ScanLogTail(logPath string, fn func(line string)) error {
	f, err := os.Open(logPath)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if st, err := f.Stat(); err == nil && st.Size() > vswitchdLogTail {
		if _, err := f.Seek(st.Size()-vswitchdLogTail, 0); err != nil {
			return err
		}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fn(sc.Text())
	}
	return sc.Err()
}
