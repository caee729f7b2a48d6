package meter_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/tollgate-dev/tollgate/meter"
)

// TestSpoolTornWhileDraining: the republisher drains the spool's active
// segment while the writer appends to it. A commit that fails part-way
// (here: the file-size limit, EFBIG, so that the small cursor file can
// still be written, as on a disk whose space is freed and taken by
// others) leaves whole records of its batch in the segment until torn()
// cuts them back. A drain that runs in that window sends records none of
// whose appends was acknowledged, takes them off the spool's count and
// size (which never counted them), and saves a cursor past the cut:
// records acknowledged after the cut are then read from the middle of a
// record, and hidden (and the segment deleted once it is no longer the
// active one). A drain now reads the active segment only up to its
// fsync'd size. (Found by a review of torn().)
func TestSpoolTornWhileDraining(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	s, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old) })

	var mu sync.Mutex
	drained := map[string]bool{}
	send := func(_ context.Context, data []byte) error {
		var e struct{ ID string }
		_ = json.Unmarshal(data, &e)
		mu.Lock()
		drained[e.ID] = true
		mu.Unlock()
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	var dwg sync.WaitGroup
	dwg.Go(func() {
		for ctx.Err() == nil {
			_, _ = s.Drain(ctx, send)
		}
	})

	var ackMu sync.Mutex
	var acked, failed []string
	pad := strings.Repeat("x", 200)
	limit := uint64(64 << 10)
	for round := 0; round < 300; round++ {
		limit += 8 << 10 // 8 KiB more: a batch of up to 64 records of ~500 bytes fits in part
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: old.Max}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range 64 {
			wg.Go(func() {
				e := testEvent(round*64 + i)
				e.Metadata = map[string]string{"pad": pad}
				err := s.Append(e)
				ackMu.Lock()
				if err == nil {
					acked = append(acked, e.ID)
				} else {
					failed = append(failed, e.ID)
				}
				ackMu.Unlock()
			})
		}
		wg.Wait()
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		e := testEvent(1_000_000 + i)
		if err := s.Append(e); err != nil {
			t.Fatalf("append after the limit was lifted: %v", err)
		}
		acked = append(acked, e.ID)
	}
	cancel()
	dwg.Wait()
	if cur, err := os.ReadFile(filepath.Join(dir, "cursor")); err == nil {
		segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
		for _, p := range segs {
			st, _ := os.Stat(p)
			t.Logf("segment %s: %d bytes", filepath.Base(p), st.Size())
		}
		t.Logf("cursor before the last drain: %s", cur)
	}
	if _, err := s.Drain(context.Background(), send); err != nil {
		t.Fatal(err)
	}
	events, bytes, _ := s.Stats()
	_ = s.Close()
	// A restart drains what is left.
	s2, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Drain(context.Background(), send); err != nil {
		t.Fatal(err)
	}
	_ = s2.Close()

	var sentFailed, lost int
	for _, id := range failed {
		if drained[id] {
			sentFailed++
		}
	}
	for _, id := range acked {
		if !drained[id] {
			lost++
		}
	}
	t.Logf("%d appends acknowledged, %d failed; %d failed ones were drained; spool counts %d events, %d bytes after draining",
		len(acked), len(failed), sentFailed, events, bytes)
	if lost > 0 || events != 0 || bytes != 0 {
		t.Fatalf("%d of %d acknowledged events were never drained; after draining everything the spool counts %d events, %d bytes (want 0, 0); %d records of failed appends were drained",
			lost, len(acked), events, bytes, sentFailed)
	}
}
