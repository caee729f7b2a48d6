package meter_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestSpoolTornTailIsLogged: the end of a segment that holds no whole
// record (a crash cut its write short, or the disk damaged its last
// records) is not sent; a crash review saw an acknowledged event go so
// without a trace. It is logged, with the bytes left behind.
func TestSpoolTornTailIsLogged(t *testing.T) {
	var logged bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })

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
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	st, err := os.Stat(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(segs[0], st.Size()-100); err != nil { // the last record cut short
		t.Fatal(err)
	}
	if s, err = meter.OpenSpool(dir, 0); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sent := 0
	if _, err := s.Drain(context.Background(), func(context.Context, []byte) error { sent++; return nil }); err != nil {
		t.Fatal(err)
	}
	if sent != 2 || !strings.Contains(logged.String(), "the end of a segment holds no whole record and is not sent") {
		t.Fatalf("sent %d of 3 (the third cut short); log:\n%s", sent, logged.String())
	}
}

// TestSpoolWriteErrorIsReported: while the spool's writes fail (its disk
// full) it says so (/readyz shows it as the spool's write_error), and says
// nothing once a write succeeds again. A crash review saw /readyz report
// the spool "accepting" while every append failed.
func TestSpoolWriteErrorIsReported(t *testing.T) {
	s, filler, big := appendOnAFullDisk(t)
	if err := s.WriteError(); err == nil || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("after a failed append the write error = %v, want the disk's", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(big); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteError(); err != nil {
		t.Fatalf("after an append succeeded the write error = %v, want none", err)
	}
}

// appendOnAFullDisk opens a spool on a small disk, fills the disk and
// appends an 8 KiB event, which fails; it returns the spool (closed when
// the test ends), the filler file (removing it frees the disk) and the
// event.
func appendOnAFullDisk(t *testing.T) (s *meter.Spool, filler string, big *usage.Event) {
	t.Helper()
	disk := metertest.SmallDisk(t, 64<<10)
	s, err := meter.OpenSpool(filepath.Join(disk, "spool"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.WriteError(); err != nil {
		t.Fatalf("a new spool's write error = %v", err)
	}
	filler = metertest.FillDisk(t, disk)
	big = testEvent(1)
	big.Metadata = map[string]string{}
	for i := range usage.MaxMetadataPairs {
		big.Metadata[fmt.Sprintf("tag%02d", i)] = strings.Repeat("x", usage.MaxMetadataValueLen)
	}
	if err := s.Append(big); err == nil {
		t.Fatal("an 8 KiB event was spooled on a full disk")
	}
	return s, filler, big
}
