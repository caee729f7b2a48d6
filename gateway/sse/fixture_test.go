package sse

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/fixture"
)

// fixtureStreams returns the bytes of every recorded .sse stream, by path.
func fixtureStreams(tb testing.TB) map[string][]byte {
	tb.Helper()
	dir, err := fixture.Dir()
	if err != nil {
		tb.Fatal(err)
	}
	names, err := fixture.Streams(dir, "")
	if err != nil {
		tb.Fatal(err)
	}
	if len(names) == 0 {
		tb.Fatalf("no .sse streams under %s", dir)
	}
	out := make(map[string][]byte, len(names))
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			tb.Fatal(err)
		}
		out[name] = b
	}
	return out
}

// TestFixtures reads every recorded stream: it must parse without error, the
// same whatever the chunking, agree with the naive reference and, on type
// and data, with go-sse (see goSSETypeData for the accounted differences),
// and survive AppendEvent and a second read with every field intact.
func TestFixtures(t *testing.T) {
	for name, in := range fixtureStreams(t) {
		t.Run(name, func(t *testing.T) {
			want, err := parse(in, chunkings[0], 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 {
				t.Fatal("no events")
			}
			for _, c := range chunkings[1:] {
				if got, err := parse(in, c, 0); err != nil || !equal(got, want) {
					t.Errorf("%s: %d events, %v; plain read has %d", c.name, len(got), err, len(want))
				}
			}
			if ref := refParse(in); !equal(ref, want) {
				t.Errorf("reference parser disagrees:\n got %+v\nwant %+v", want, ref)
			}
			ours, _ := ourTypeData(in)
			theirs, err := goSSETypeData(in)
			if err != nil {
				t.Fatalf("go-sse: %v", err)
			}
			if len(ours) != len(theirs) {
				t.Fatalf("%d events, go-sse has %d", len(ours), len(theirs))
			}
			for i := range ours {
				if ours[i] != theirs[i] {
					t.Fatalf("event %d: %+v, go-sse has %+v", i, ours[i], theirs[i])
				}
			}
			var out []byte
			for _, ev := range want {
				out = AppendEvent(out, ev.event())
			}
			if again, err := parse(out, chunkings[0], 0); err != nil || !equal(again, want) {
				t.Errorf("after AppendEvent: %d events, %v; want %d", len(again), err, len(want))
			}
		})
	}
}
