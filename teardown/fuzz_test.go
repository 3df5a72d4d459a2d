package teardown

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzDecodeJournal: whatever journal.json holds, decodeJournal does not
// panic, and what it accepts survives the journal's own encoder: decoding
// the encoding gives the same entries, and encoding those again the same
// bytes.
func FuzzDecodeJournal(f *testing.F) {
	entry := `{"kind":"kv.set","id":"kv.set/a","summary":"a: 1 -> 2","record":{"x":1},"state":"applied","run":"r","batch":2,"time":"2026-11-22T10:00:00Z"}`
	for _, s := range []string{
		``,
		`{"version":1,"entries":[]}`,
		`{"version":1,"entries":[` + entry + `]}`,
		`{"version":1,"entries":[` + entry + `,{"kind":"vf.mac","id":"vf.mac/0000:61:00.2","record":{"pf":"ens1f0np0","vf":0,"prior":"00:00:00:00:00:00"},"state":"pending","run":"2026-11-22T10:00:01Z-4242","time":"2026-11-22T10:00:01.123456789+01:00"}]}`,
		`{"version":1,"entries":[{"kind":"k","id":"i","record":"\u00e9\ud800","state":"pending","run":"","time":"0001-01-01T00:00:00Z"}]}`,
		`{"version":1,"entries":[` + entry + `]} {}`,
		`{"version":2,"entries":[` + entry + `]}`,
		`{"version":1,"entries":[{"kind":"k","id":"i","record":{ "a" : [1, 2.50, -0, 1e3] },"state":"applied","time":"2026-11-22T10:00:00-00:00"}]}`,
		"{\"version\":1,\"entries\":[{\"kind\":\"k\",\"id\":\"i\",\"record\":\"\xff\",\"state\":\"applied\",\"time\":\"2026-11-22T10:00:00Z\"}]}",
		// An open entry (a run that has not ended changed it) and a settled record.
		`{"version":1,"entries":[{"kind":"kv.set","id":"kv.set/a","record":{"x":1},"state":"applied","run":"r2","time":"2026-11-22T10:00:00Z",` +
			`"open":{"run":"r2","before":` + entry + `,"capture":{"x": 2},"redo":true}}],"settled":{"config": {"a": [1, 2]}}}`,
		`{"version":1,"entries":[{"kind":"kv.set","id":"kv.set/a","record":{"x":1},"state":"applied","run":"r","time":"2026-11-22T10:00:00Z","open":{"run":"r2","removed":true}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		jf, err := decodeJournal(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatalf("decodeJournal(%q): an error without text", data)
			}
			return
		}
		es := jf.Entries
		enc, err := encodeJournal(es, jf.Settled)
		if err != nil {
			t.Fatalf("decodeJournal(%q) gave entries the encoder refuses: %v", data, err)
		}
		backFile, err := decodeJournal(enc)
		if err != nil {
			t.Fatalf("the encoding of decodeJournal(%q) does not decode: %v\n%s", data, err, enc)
		}
		back := backFile.Entries
		if !bytes.Equal(backFile.Settled, jf.Settled) {
			t.Fatalf("decodeJournal(%q): the settled record changed in a round trip:\n%s\n%s", data, jf.Settled, backFile.Settled)
		}
		if len(back) != len(es) {
			t.Fatalf("decodeJournal(%q): %d entries, %d after a round trip", data, len(es), len(back))
		}
		for i := range es {
			if !sameEntry(es[i], back[i]) {
				t.Fatalf("decodeJournal(%q): entry %d changed in a round trip:\n%#v\n%#v", data, i, es[i], back[i])
			}
		}
		again, err := encodeJournal(back, backFile.Settled)
		if err != nil || !bytes.Equal(again, enc) {
			t.Fatalf("decodeJournal(%q): the encoding is no fixed point (%v):\n%s\n%s", data, err, enc, again)
		}
	})
}

// sameEntry compares entries, times by instant (a decoded time's location
// is the local zone where the offset matches it).
func sameEntry(a, b Entry) bool {
	if (a.Open == nil) != (b.Open == nil) {
		return false
	}
	if a.Open != nil {
		x, y := a.Open, b.Open
		if x.Run != y.Run || x.Redo != y.Redo || x.Removed != y.Removed || x.Undone != y.Undone ||
			!bytes.Equal(x.Capture, y.Capture) || (x.Before == nil) != (y.Before == nil) ||
			x.Before != nil && !sameEntry(*x.Before, *y.Before) {
			return false
		}
	}
	return a.Kind == b.Kind && a.ID == b.ID && a.Summary == b.Summary && a.State == b.State &&
		a.Run == b.Run && a.Batch == b.Batch && a.Time.Equal(b.Time) &&
		bytes.Equal(a.Record, b.Record) && json.Valid(a.Record)
}
