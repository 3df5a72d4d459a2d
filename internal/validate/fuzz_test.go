package validate

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
)

// FuzzParseTCRead: a traffic_class or ttl file reads as unset or a
// non-negative number, which reads the same bare and in MLNX_OFED's
// "Global tclass=N" form.
func FuzzParseTCRead(f *testing.F) {
	for _, s := range []string{"Global tclass=106", "106", "", "\n", "Global tclass=-1", "tclass=1=2", "x", " 7 \n", "99999999999999999999", "=", "Global ttl=64\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseTCRead(s)
		if err != nil {
			if v != nil || !strings.Contains(err.Error(), "unparsable value") {
				t.Fatalf("parseTCRead(%q) = %v, %v", s, v, err)
			}
			return
		}
		if v == nil {
			return
		}
		if *v < 0 {
			t.Fatalf("parseTCRead(%q) = %d", s, *v)
		}
		for _, form := range []string{strconv.Itoa(*v), "Global tclass=" + strconv.Itoa(*v) + "\n"} {
			if w, err := parseTCRead(form); err != nil || w == nil || *w != *v {
				t.Fatalf("parseTCRead(%q) = %d, but parseTCRead(%q) = %v, %v", s, *v, form, w, err)
			}
		}
	})
}

// FuzzParseRoCEMode: a mode is RoCEv1 or RoCEv2, a fixed point of
// ParseRoCEMode; the error quotes what it refuses.
func FuzzParseRoCEMode(f *testing.F) {
	for _, s := range []string{"v1", "v2", "1", "2", "IB/RoCE v1", "RoCE v2", "roce V2\n", "v3", "", "RoCE v1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseRoCEMode(s)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("ParseRoCEMode(%q): the error does not quote the value: %v", s, err)
			}
			return
		}
		if m != RoCEv1 && m != RoCEv2 {
			t.Fatalf("ParseRoCEMode(%q) = %q", s, m)
		}
		if again, err := ParseRoCEMode(m); err != nil || again != m {
			t.Fatalf("ParseRoCEMode(%q) = %q, %v", m, again, err)
		}
	})
}

// FuzzParseIperf3: iperf3 -J output reads as a rate that JSON carries
// (finite), summarized as formatBits says, or as an error naming iperf3.
func FuzzParseIperf3(f *testing.F) {
	for _, s := range []string{
		`{"end":{"sum_sent":{"bits_per_second":2e9},"sum_received":{"bits_per_second":1.5e9}}}`,
		`{"end":{"sum_sent":{"bits_per_second":9.41e8,"bytes":588251136},"sum_received":{"bits_per_second":0}}}`,
		`{"error":"unable to connect to server: Connection refused"}`,
		`{"start":{},"intervals":[],"end":{}}`,
		`{"error":5}`, `{"end":{"sum_received":{"bits_per_second":1e400}}}`, `[]`, `null`, ``, `{"end":{"sum_sent":{"bytes":-1}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, out []byte) {
		r, err := parseIperf3(out)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "iperf3: ") {
				t.Fatalf("parseIperf3(%q): %v", out, err)
			}
			return
		}
		if math.IsNaN(r.BitsPerSecond) || math.IsInf(r.BitsPerSecond, 0) {
			t.Fatalf("parseIperf3(%q) = %v", out, r.BitsPerSecond)
		}
		if r.Summary != "iperf3 "+formatBits(r.BitsPerSecond) {
			t.Fatalf("parseIperf3(%q): summary %q for %v", out, r.Summary, r.BitsPerSecond)
		}
		b, err := json.Marshal(r)
		var back LoadResult
		if err != nil || json.Unmarshal(b, &back) != nil || back != r {
			t.Fatalf("parseIperf3(%q) = %+v: not carried by JSON (%s, %v)", out, r, b, err)
		}
	})
}

// FuzzParseSendBW: ib_send_bw's result reads as a finite, non-negative
// bandwidth in the unit its header names, or not at all: a NaN or Inf
// would pass validate's "no bandwidth" check.
func FuzzParseSendBW(f *testing.F) {
	head := " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
	for _, s := range []string{
		head + " 65536      1000             60.12              58.34  		   0.000933\n",
		head + " 65536      500              0.00               0.000000  		   0.000000\n",
		" #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n 65536 1000 9.87 9.80 0.018\n",
		"Couldn't connect to 10.0.0.1:18515\n",
		head + " 65536 1000 60.12 NaN 0.0\n",
		head + " 65536 1000 60.12 +Inf 0.0\n",
		head + " 65536 1000 60.12 -3 0.0\n",
		" BW average[\n 1 2 3 4 5\n",
		head + " x 1 2 3 4\n 1 2 3 0x1p-2 5\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, out string) {
		bw, unit, ok := ParseSendBW(out)
		if !ok {
			if bw != 0 || unit != "" {
				t.Fatalf("ParseSendBW(%q) = %v, %q, false", out, bw, unit)
			}
			return
		}
		if math.IsNaN(bw) || math.IsInf(bw, 0) || bw < 0 {
			t.Fatalf("ParseSendBW(%q) = %v %s: not a bandwidth", out, bw, unit)
		}
		if unit == "" || strings.ContainsAny(unit, "]\n") || !strings.Contains(out, "BW average["+unit+"]") {
			t.Fatalf("ParseSendBW(%q): unit %q", out, unit)
		}
	})
}
