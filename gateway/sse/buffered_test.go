package sse

import (
	"bytes"
	"io"
	"testing"
)

// countingReader counts the reads that reach the source.
type countingReader struct {
	r     io.Reader
	reads int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	return c.r.Read(p)
}

// checkBuffered reads in through c and fails when Buffered promised an
// event that the next Next did not return without reading the source. It
// returns how many times Buffered said true.
func checkBuffered(t *testing.T, in []byte, c chunking) int {
	t.Helper()
	src := &countingReader{r: c.wrap(bytes.NewReader(in))}
	r := newReader(src, 0, c.buf)
	promised := 0
	for {
		ready := r.Buffered()
		before := src.reads
		_, err := r.Next()
		if ready {
			promised++
			if src.reads != before {
				t.Fatalf("%s: Buffered said an event was at hand, but Next read the source (input %q)", c.name, in)
			}
			if err != nil && err != ErrEventTooLarge {
				t.Fatalf("%s: Buffered said an event was at hand, but Next returned %v (input %q)", c.name, err, in)
			}
		}
		if err != nil {
			return promised
		}
	}
}

func TestBuffered(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int // times Buffered is true when read in one piece
	}{
		{"data: a\n\ndata: b\n\ndata: c\n\n", 2},
		{"data: a\r\n\r\ndata: b\r\n\r\n", 1},
		{"data: a\r\rdata: b\r\r", 0}, // lone '\r' line ends: not looked for
		{"data: a\n\r\ndata: b\n\n", 1},
		{"00\n\r00\n\r0", 0}, // "\r0" waits for a '\n'
		{"00\n\r00\n\r\n0", 1},
		{"data: a\n\ndata: b\n", 0},            // the second event is not ended
		{"data: a\n\n\n\n\n", 0},               // blank lines are no event
		{"data: a\n\n: keep-alive\n\n", 1},     // a comment is an event
		{"data: a\n\ndata: b\ndata: c\n\n", 1}, // multi-line data
	} {
		if got := checkBuffered(t, []byte(tc.in), chunkings[0]); got != tc.want {
			t.Errorf("%q: Buffered true %d times, want %d", tc.in, got, tc.want)
		}
		for _, c := range chunkings[1:] {
			checkBuffered(t, []byte(tc.in), c)
		}
	}
	for _, in := range fixtureStreams(t) {
		for _, c := range chunkings {
			checkBuffered(t, in, c)
		}
	}
}
