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
// port again). known is false when the log says neither, or cannot be read.
func FlowAPI(logPath, port string) (ok, known bool) {
	ok, known = FlowAPIs(logPath)[port]
	return ok, known
}

// FlowAPIs is FlowAPI for every port the log names, in one read.
func FlowAPIs(logPath string) map[string]bool {
	out := map[string]bool{}
	const tag = "|netdev_offload|INFO|"
	ScanLogTail(logPath, func(line string) {
		_, msg, found := strings.Cut(line, tag)
		if !found {
			return
		}
		if port, _, found := strings.Cut(msg, ": Assigned flow API"); found {
			out[port] = true
		} else if port, _, found := strings.Cut(msg, ": No suitable flow API found"); found {
			out[port] = false
		}
	})
	return out
}

// LogReadable tells whether ovs-vswitchd's log can be opened for reading
// (nil), or why not.
func LogReadable(logPath string) error {
	f, err := os.Open(logPath)
	if err != nil {
		return err
	}
	return f.Close()
}

// ScanLogTail calls fn with each line of the last vswitchdLogTail bytes of
// ovs-vswitchd's log, oldest first; nothing when it cannot be read.
func ScanLogTail(logPath string, fn func(line string)) {
	f, err := os.Open(logPath)
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	if st, err := f.Stat(); err == nil && st.Size() > vswitchdLogTail {
		if _, err := f.Seek(st.Size()-vswitchdLogTail, 0); err != nil {
			return
		}
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fn(sc.Text())
	}
}
