package meter_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/usage"
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

// TestSpoolCorruptRecordMidSegmentKeepsTheRecordsAfterIt: a flipped byte
// inside a record in the middle of a segment (bit rot, a bad sector: not a
// crash, which tears only the tail) ended the segment's scan there, both
// in OpenSpool's count and in Drain, which then removed the segment as
// finished: every acknowledged record after the bad one was dropped
// without a word. The bad record cannot be sent; the records after it must
// be.
func TestSpoolCorruptRecordMidSegmentKeepsTheRecordsAfterIt(t *testing.T) {
	// Flip a byte in the data of the 4th record, and one in the length of
	// the 7th.
	dir, _ := damagedSpool(t, 10, func(b []byte, at []int) {
		b[at[3]+20] ^= 0xff
		b[at[6]+1] ^= 0x40
	})
	s2, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if n, _, _ := s2.Stats(); n != 8 {
		t.Errorf("after the restart: %d events waiting, want 8 (10, 2 of them corrupt)", n)
	}
	var got []int64
	if _, err := s2.Drain(context.Background(), func(_ context.Context, data []byte) error {
		e, _ := usage.Decode(data)
		got = append(got, e.Usage.PromptTokens)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []int64{0, 1, 2, 4, 5, 7, 8, 9}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("drained %v, want %v", got, want)
	}
	if n, b, _ := s2.Stats(); n != 0 || b != 0 {
		t.Errorf("drained spool: %d events, %d bytes; want none", n, b)
	}
}

// TestSpoolCursorAheadOfEverySegment: a spool directory whose cursor names
// a segment later than any on disk (its segments removed by hand, or lost,
// the cursor kept) opened its new segment numbered from 1, behind the
// cursor: Drain skips a segment before the cursor's, so every event
// appended from then on stayed on disk, never sent, and Stats did not
// count them after a restart either.
func TestSpoolCursorAheadOfEverySegment(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cursor"), []byte(`{"segment":7,"offset":1234}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 3 {
		if err := s.Append(testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	if sent, err := s.Drain(context.Background(), func(context.Context, []byte) error { return nil }); sent != 3 || err != nil {
		t.Fatalf("Drain = %d, %v; want 3 sent", sent, err)
	}
}

// TestSpoolZeroFilledTailIsNoRecords: a power loss can leave a segment's
// tail as zeros (the size grown, the data block not written). Eight zero
// bytes read as a record of no data whose crc (0) matches: 512 phantom
// events per 4 KiB, counted as waiting and sent on, to be dead-lettered as
// invalid usage events.
func TestSpoolZeroFilledTailIsNoRecords(t *testing.T) {
	dir := t.TempDir()
	s, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Append(testEvent(1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s2, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if n, _, _ := s2.Stats(); n != 1 {
		t.Errorf("after the restart: %d events waiting, want 1", n)
	}
	var empty int
	sent, err := s2.Drain(context.Background(), func(_ context.Context, data []byte) error {
		if len(data) == 0 {
			empty++
		}
		return nil
	})
	if sent != 1 || empty != 0 || err != nil {
		t.Errorf("Drain = %d sent (%d empty), %v; want the 1 event", sent, empty, err)
	}
}

// TestSpoolSetsACorruptRecordAsideOnce: bytes damaged on disk handed to
// DrainSkipping's skipped were handed again by the next drain when the
// record after them could not be sent (the cursor stayed before them), so
// they reached the dead-letter stream twice once JetStream's duplicate
// window had passed (found by code review).
func TestSpoolSetsACorruptRecordAsideOnce(t *testing.T) {
	dir, _ := damagedSpool(t, 3, func(b []byte, at []int) { b[at[1]+20] ^= 0xff })
	s2, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	skips, sends := 0, 0
	skipped := func(context.Context, []byte, string) error { skips++; return nil }
	failThird := func(_ context.Context, data []byte) error {
		if e, _ := usage.Decode(data); e.Usage.PromptTokens == 2 && sends == 1 {
			sends++
			return errors.New("NATS is away")
		}
		sends++
		return nil
	}
	if _, err := s2.DrainSkipping(context.Background(), failThird, skipped); err == nil {
		t.Fatal("the first drain sent the record after the damaged one, which was to fail")
	}
	if _, err := s2.DrainSkipping(context.Background(), failThird, skipped); err != nil {
		t.Fatal(err)
	}
	if skips != 1 || sends != 3 {
		t.Errorf("the damaged bytes were set aside %d times (want 1); %d sends (want 3: the first, the failed third, the third again)", skips, sends)
	}
}

// damagedSpool spools n events (testEvent(0) to testEvent(n-1)) in a new
// directory, closes the spool, and lets damage change its last segment's
// bytes, given each record's offset in them, as a disk might. It returns
// the directory and the events.
func damagedSpool(t *testing.T, n int, damage func(b []byte, at []int)) (string, []*usage.Event) {
	t.Helper()
	dir := t.TempDir()
	s, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	events := make([]*usage.Event, n)
	for i := range events {
		events[i] = testEvent(i)
		if err := s.Append(events[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	b, err := os.ReadFile(segs[len(segs)-1])
	if err != nil {
		t.Fatal(err)
	}
	var at []int
	for off := 0; off < len(b); off += 8 + int(binary.BigEndian.Uint32(b[off:])) {
		at = append(at, off)
	}
	damage(b, at)
	if err := os.WriteFile(segs[len(segs)-1], b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, events
}
