package sse

import (
	"bytes"
	"io"
	"testing"
)

// fuzzSeeds are handcrafted edge cases for the fuzz corpora, beside the
// recorded streams.
var fuzzSeeds = []string{
	"", "\n", "\r", "\r\n", "\n\r", ":", "data", "data:", "data: x", "data: x\r",
	"data: a\r\r\ndata: b\n\n", "\xEF\xBB\xBFdata: x\n\n", "\n\xEF\xBB\xBFdata: x\n\n",
	"\xEF\xBB\xBF", "event: e\n\n", "event:\n\n", "id: a\x00b\ndata: x\n\n", "retry: 1\n\n",
	"data: a\n\n{\n  \"error\": 1\n}", ": keep-alive\r\n\r\n", "dataa: x\n\n", "eventx: y\n\n",
}

// fuzzChunkings are the chunkings FuzzReader compares with a plain read:
// the two that hit the most buffer boundaries, so that executions stay fast.
var fuzzChunkings = []chunking{chunkings[5], chunkings[6]}

// FuzzReader checks that no input makes a Reader panic or fail, that every
// chunking reads the same events, that a naive reading of the spec agrees on
// every field, and that go-sse agrees on type and data (see goSSETypeData).
func FuzzReader(f *testing.F) {
	for _, in := range fixtureStreams(f) {
		f.Add(in)
	}
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		want, err := parse(in, chunkings[0], 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range fuzzChunkings {
			if got, err := parse(in, c, 0); err != nil || !equal(got, want) {
				t.Fatalf("%s: got %+v, %v\nwant %+v", c.name, got, err, want)
			}
			checkBuffered(t, in, c)
		}
		checkBuffered(t, in, chunkings[0])
		if ref := refParse(in); !equal(ref, want) {
			t.Fatalf("reference parser:\n got %+v\nwant %+v", want, ref)
		}
		ours, _ := ourTypeData(in)
		theirs, err := goSSETypeData(in)
		if err != nil {
			t.Fatalf("go-sse: %v", err)
		}
		if len(ours) != len(theirs) {
			t.Fatalf("%d events %+v, go-sse has %d %+v", len(ours), ours, len(theirs), theirs)
		}
		for i := range ours {
			if ours[i] != theirs[i] {
				t.Fatalf("event %d: %+v, go-sse has %+v", i, ours[i], theirs[i])
			}
		}
		// A small limit must fail cleanly, never panic.
		r := newReader(bytes.NewReader(in), 8, 16)
		for {
			if _, err := r.Next(); err != nil {
				if err != io.EOF && err != ErrEventTooLarge {
					t.Fatal(err)
				}
				break
			}
		}
	})
}

// FuzzRoundTrip checks that AppendEvent then Reader gives back Type, Data,
// ID, Retry and Comment (normalized as AppendEvent documents), with the event
// between two others so that its framing is checked too.
func FuzzRoundTrip(f *testing.F) {
	for _, in := range fixtureStreams(f) {
		evs, _ := parse(in, chunkings[0], 0)
		for _, ev := range evs[:min(len(evs), 3)] {
			f.Add(ev.Type, ev.Data, ev.ID, ev.Retry, ev.Comment, uint8(0))
		}
	}
	for _, s := range fuzzSeeds {
		f.Add(s, s, s, s, s, uint8(7))
	}
	f.Fuzz(func(t *testing.T, typ, data, id, retry, comment string, flags uint8) {
		ev := tev{Type: typ, Data: data, ID: id, Retry: retry, Comment: comment,
			HasID: flags&1 != 0, HasData: flags&2 != 0, HasComment: flags&4 != 0}
		checkRoundTrip(t, []tev{ev, {Data: "x", Comment: "between"}, ev})
	})
}
