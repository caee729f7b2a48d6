package sse

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// byteCounter counts the bytes a Reader takes from its source.
type byteCounter struct {
	r io.Reader
	n int
}

func (c *byteCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// checkPending forwards in event by event, as a pass-through relay does
// (all bytes read but Pending after each event), and checks that the bytes
// forwarded after event k hold exactly the first k events, and all of the
// input at the end.
func checkPending(t *testing.T, in []byte, c chunking) {
	t.Helper()
	src := &byteCounter{r: c.wrap(bytes.NewReader(in))}
	r := newReader(src, 0, c.buf)
	var events []tev
	last := 0
	for {
		ev, err := r.Next()
		if err != nil {
			if err == io.EOF && src.n-r.Pending() != len(in) {
				t.Fatalf("%s: at the end %d of %d bytes are forwarded", c.name, src.n-r.Pending(), len(in))
			}
			return
		}
		events = append(events, toTev(ev))
		fwd := src.n - r.Pending()
		if fwd < last || fwd > src.n {
			t.Fatalf("%s: forwarded %d after %d, of %d read", c.name, fwd, last, src.n)
		}
		last = fwd
		got, err := readAll(NewReader(bytes.NewReader(in[:fwd])))
		if err != nil || !equal(got, events) {
			t.Fatalf("%s: the %d bytes forwarded after event %d hold %+v (%v), want %+v", c.name, fwd, len(events), got, err, events)
		}
	}
}

func TestPending(t *testing.T) {
	ins := [][]byte{[]byte("data: a\n\ndata: b\r\n\r\n: c\n\ndata: d")}
	for _, in := range fixtureStreams(t) {
		ins = append(ins, in)
	}
	for _, in := range ins {
		for _, c := range chunkings {
			checkPending(t, in, c)
		}
	}
}

// FuzzPending checks checkPending's property on any input and chunking.
func FuzzPending(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		for _, c := range append(fuzzChunkings, chunkings[0]) {
			checkPending(t, in, c)
		}
	})
}

// TestRestReadsWhatNextHasNot: after some events, Rest gives the input
// not yet returned in one, byte for byte, whether it is held in the
// small buffer, a big one, a long line being accumulated, or not yet read.
func TestRestReadsWhatNextHasNot(t *testing.T) {
	long := strings.Repeat("x", 3000) // longer than the small buffer
	for _, tc := range []struct{ name, first, rest string }{
		{"held", "data: a\n\n", "{\"id\": 1,\n\n \"b\": 2}\n"},
		{"a long rest", "data: a\n\n", "{\"t\":\"" + long + "\"}\n" + long},
		{"after a long event", "data: " + long + "\n\n", "{}"},
		{"nothing", "data: a\n\n", ""},
	} {
		for _, src := range []func(string) io.Reader{
			func(s string) io.Reader { return strings.NewReader(s) },
			func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		} {
			r := NewReader(src(tc.first + tc.rest))
			if _, err := r.Next(); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(r.Rest())
			if err != nil || string(got) != tc.rest {
				t.Fatalf("%s: Rest read %q, %v; want %q", tc.name, got, err, tc.rest)
			}
		}
	}
}
