package sse

import (
	"bytes"
	"fmt"
	"testing"
	"testing/iotest"
)

// TestReaderGrows: a Reader starts with a bufSize buffer, moves to a
// bigBufSize one once its source had more at hand than the small one holds
// (reading every event unchanged across the move), and a Reset goes back to
// the small buffer; a source that never fills the buffer keeps it small.
func TestReaderGrows(t *testing.T) {
	var in bytes.Buffer
	for i := range 60 {
		fmt.Fprintf(&in, "data: {\"n\":%d,\"pad\":%q}\n\n", i, bytes.Repeat([]byte("x"), 150))
	}
	r := NewReader(bytes.NewReader(in.Bytes()))
	if r.br.Size() != bufSize {
		t.Fatalf("starts with %d bytes of buffer, want %d", r.br.Size(), bufSize)
	}
	for i := range 60 {
		ev, err := r.Next()
		if want := fmt.Sprintf("{\"n\":%d,", i); err != nil || !bytes.HasPrefix(ev.Data, []byte(want)) {
			t.Fatalf("event %d: %q, %v", i, ev.Data, err)
		}
	}
	if r.br.Size() != bigBufSize {
		t.Fatalf("after a source with %d bytes at hand: a buffer of %d, want %d", in.Len(), r.br.Size(), bigBufSize)
	}
	r.Reset(iotest.HalfReader(bytes.NewReader(in.Bytes()[:400])))
	if r.br.Size() != bufSize {
		t.Fatalf("after Reset: %d bytes of buffer, want %d", r.br.Size(), bufSize)
	}
	slow := NewReader(iotest.OneByteReader(bytes.NewReader(in.Bytes())))
	for range 60 {
		if _, err := slow.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if slow.br.Size() != bufSize {
		t.Fatalf("a source one byte at a time grew the buffer to %d", slow.br.Size())
	}
}
