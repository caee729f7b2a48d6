package sse

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"testing/iotest"
)

// pieces returns each of its pieces in one read, then io.EOF: a source
// whose writes arrive as given.
type pieces struct{ p [][]byte }

func (s *pieces) Read(b []byte) (int, error) {
	if len(s.p) == 0 {
		return 0, io.EOF
	}
	n := copy(b, s.p[0])
	if s.p[0] = s.p[0][n:]; len(s.p[0]) == 0 {
		s.p = s.p[1:]
	}
	return n, nil
}

// chatEvents is n chat-chunk-sized events, each about size bytes.
func chatEvents(n, size int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "data: {\"n\":%d,\"pad\":%q}\n\n", i, bytes.Repeat([]byte("x"), size-24)) // size bytes while i < 10
	}
	return b.Bytes()
}

// flushes is where a relay that flushes when neither Buffered nor Cut
// says more is at hand flushes, reading src: the number of events sent by
// each flush.
func flushes(t *testing.T, src io.Reader) []int {
	t.Helper()
	r := NewReader(src)
	var out []int
	held := 0
	for {
		_, err := r.Next()
		if err == io.EOF {
			if held > 0 {
				out = append(out, held)
			}
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if held++; !r.Buffered() && !r.Cut() {
			out = append(out, held)
			held = 0
		}
	}
}

// TestCutKeepsABurstInOneFlush: a source with a whole short stream at hand
// (4 KiB, more than the Reader's first 1 KiB buffer) is relayed in one
// flush, not one for the first buffer and one for the rest; a source
// whose writes come one event at a time is flushed at each, as is one
// that sent exactly a buffer's worth of whole events and then paused.
func TestCutKeepsABurstInOneFlush(t *testing.T) {
	burst := chatEvents(12, 330)
	if got := flushes(t, bytes.NewReader(burst)); len(got) != 1 || got[0] != 12 {
		t.Errorf("a burst of 12 events at hand: flushed as %v, want one flush of 12", got)
	}
	var paced [][]byte
	for ev := range bytes.SplitAfterSeq(burst, []byte("\n\n")) {
		if len(ev) > 0 {
			paced = append(paced, ev)
		}
	}
	if got := flushes(t, &pieces{p: paced}); len(got) != 12 {
		t.Errorf("events one write each: flushed as %v, want 12 flushes of 1", got)
	}
	exact := chatEvents(4, 256) // 4 events of 256 bytes fill the 1 KiB buffer exactly
	if len(exact) != bufSize {
		t.Fatalf("exact is %d bytes, want %d", len(exact), bufSize)
	}
	if got := flushes(t, &pieces{p: [][]byte{exact, chatEvents(2, 256)}}); len(got) != 2 || got[0] != 4 {
		t.Errorf("a buffer's worth of whole events, then a pause: flushed as %v, want 4 then 2", got)
	}
	if got := flushes(t, iotest.HalfReader(bytes.NewReader(burst))); sum(got) != 12 {
		t.Errorf("half reads: flushed %v, want 12 events in all", got)
	}
}

// TestCutPromisesNoEventWithoutARead: Cut says the source had more at
// hand, not that an event is buffered: with none buffered, the next Next
// reads the source.
func TestCutPromisesNoEventWithoutARead(t *testing.T) {
	src := &countingReader{r: bytes.NewReader(chatEvents(12, 330))}
	r := NewReader(src)
	cuts := 0
	for {
		cut := r.Cut() && !r.Buffered()
		before := src.reads
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if cut {
			cuts++
			if src.reads == before {
				t.Errorf("Cut said a read was cut short, but Next read nothing more")
			}
		}
	}
	if cuts != 1 {
		t.Errorf("Cut was true before %d reads, want 1 (the first buffer's end)", cuts)
	}
}

// TestSourceEnded: SourceEnded is false until the source has returned
// io.EOF, which a source may return with its last bytes.
func TestSourceEnded(t *testing.T) {
	in := chatEvents(3, 100)
	r := NewReader(iotest.DataErrReader(&pieces{p: [][]byte{in[:200], in[200:]}}))
	for i := range 3 {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		if ended := r.SourceEnded(); ended != (i == 2) {
			t.Errorf("after event %d of 3, the last read with the last bytes and EOF together: SourceEnded %v", i+1, ended)
		}
	}
	r.Reset(bytes.NewReader(in))
	for range 3 {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if r.SourceEnded() {
		t.Error("a source that has not returned EOF yet: SourceEnded")
	}
	if _, err := r.Next(); err != io.EOF || !r.SourceEnded() {
		t.Errorf("at the end: %v, SourceEnded %v", err, r.SourceEnded())
	}
	r.Reset(bytes.NewReader(in))
	if r.SourceEnded() {
		t.Error("after Reset: SourceEnded")
	}
}

func sum(v []int) int {
	n := 0
	for _, x := range v {
		n += x
	}
	return n
}

// TestCutNotAfterTheSourceEnded: a buffer filled by the source's last
// read, mid-line, with its end: nothing more comes, so it is not Cut.
func TestCutNotAfterTheSourceEnded(t *testing.T) {
	in := append(chatEvents(3, 256), bytes.Repeat([]byte("x"), 256)...) // 1 KiB, its last line unended
	r := NewReader(iotest.DataErrReader(bytes.NewReader(in)))
	for range 3 {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if r.Cut() {
		t.Error("the source ended with the buffer's last bytes: Cut")
	}
}
