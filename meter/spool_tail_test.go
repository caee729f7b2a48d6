package meter_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter"
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
