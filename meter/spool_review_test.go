package meter_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate-dev/tollgate/meter"
)

// TestSpoolTornTailIsNotCountedAsUnsentBytes: a kill -9 mid-write leaves
// a torn record at the end of the spool's segment (its Append never
// returned). OpenSpool counted the segment's whole size, torn bytes
// included, as bytes not yet published, but only its intact records as
// events; Drain then sent the records and removed the segment, taking off
// only the records' bytes. The spool reported bytes waiting with no event
// left, until the next restart: capacity (maxBytes, and Accepting's size
// check) was lost by every torn write.
func TestSpoolTornTailIsNotCountedAsUnsentBytes(t *testing.T) {
	dir := t.TempDir()
	s, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.Append(testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The kill -9 mid-write: a record header and part of its data.
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := make([]byte, 8+4000)
	torn[2], torn[3] = 0x30, 0x00 // length 12288, crc 0: 4000 bytes of it written
	if _, err := f.Write(torn); err != nil {
		t.Fatal(err)
	}
	f.Close()

	s2, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	n, b, _ := s2.Stats()
	t.Logf("after the restart: %d events, %d bytes", n, b)
	if sent, err := s2.Drain(context.Background(), func(context.Context, []byte) error { return nil }); sent != 3 || err != nil {
		t.Fatalf("Drain = %d, %v", sent, err)
	}
	if n, b, _ := s2.Stats(); n != 0 || b != 0 {
		t.Errorf("drained spool: %d events, %d bytes; want none", n, b)
	}
}

// TestSpoolRotationDuringADrain: the writer starts a new segment
// (openSegment, from commit once a segment is full, or from torn), setting
// segNum and segSize, while Drain reads the pair as "the active segment,
// read up to its fsync'd size": they were set without s.mu, a data race
// that go test -race ./meter/ (make race, part of make test) reports here.
// A new segNum with the old segment's 64 MiB size would let a drain read
// records of the new segment whose appends have not returned, the window
// TestSpoolTornWhileDraining closed.
func TestSpoolRotationDuringADrain(t *testing.T) {
	s, err := meter.OpenSpool(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			_, _ = s.Drain(ctx, func(context.Context, []byte) error { return nil })
		}
	}()
	rec := make([]byte, 8<<20)
	for i := range rec {
		rec[i] = 'x'
	}
	for range 10 { // 80 MiB: the first segment fills and the writer rotates
		if err := s.AppendRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	<-done
}
