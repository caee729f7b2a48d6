package meter_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

func testEvent(i int) *usage.Event {
	return &usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: uuid.NewString(),
		KeyID: uuid.NewString(), Provider: "p", Model: "m", Status: usage.StatusOK, UsageSource: usage.SourceUpstream,
		Usage: usage.Tokens{PromptTokens: int64(i)}}
}

func TestSpoolGroupCommitAndDrainInOrder(t *testing.T) {
	dir := t.TempDir()
	s, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Append(testEvent(i)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n, size, age := s.Stats(); n != 200 || size == 0 || age <= 0 {
		t.Fatalf("Stats = %d events, %d bytes, %s", n, size, age)
	}
	// Publishing fails after 50: those stay published, the rest spooled.
	var got []int64
	fail := errors.New("nats down")
	n, err := s.Drain(context.Background(), func(_ context.Context, data []byte) error {
		e, _ := usage.Decode(data)
		if len(got) == 50 {
			return fail
		}
		got = append(got, e.Usage.PromptTokens)
		return nil
	})
	if n != 50 || !errors.Is(err, fail) {
		t.Fatalf("Drain = %d, %v", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// A new process resumes from the cursor.
	s2, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if n, _, _ := s2.Stats(); n != 150 {
		t.Fatalf("after reopening: %d events, want 150", n)
	}
	n, err = s2.Drain(context.Background(), func(_ context.Context, data []byte) error {
		e, _ := usage.Decode(data)
		got = append(got, e.Usage.PromptTokens)
		return nil
	})
	seen := map[int64]bool{}
	for _, v := range got {
		seen[v] = true
	}
	if n != 150 || err != nil || len(got) != 200 || len(seen) != 200 {
		t.Fatalf("second Drain = %d, %v; %d published, %d distinct", n, err, len(got), len(seen))
	}
	if n, size, _ := s2.Stats(); n != 0 || size != 0 {
		t.Fatalf("drained spool still counts %d events, %d bytes", n, size)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("finished segments were not removed: %v", segs)
	}
}

func TestSpoolCap(t *testing.T) {
	s, err := meter.OpenSpool(t.TempDir(), 600)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var full error
	for i := 0; i < 10 && full == nil; i++ {
		full = s.Append(testEvent(i))
	}
	if !errors.Is(full, meter.ErrSpoolFull) {
		t.Fatalf("Append past the cap = %v, want ErrSpoolFull", full)
	}
}

// TestSpoolSurvivesKill9: a child process appends events and reports each
// acknowledged append; it is killed with SIGKILL mid-stream. Every event
// it reported is in the spool, and a torn tail is ignored.
func TestSpoolSurvivesKill9(t *testing.T) {
	if dir := os.Getenv("TOLLGATE_SPOOL_CHILD"); dir != "" {
		s, err := meter.OpenSpool(dir, 0)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		for i := 0; ; i++ {
			if err := s.Append(testEvent(i)); err != nil {
				fmt.Println("error", err)
				os.Exit(1)
			}
			fmt.Println("acked", i)
		}
	}
	dir := t.TempDir()
	acked := metertest.KillChild(t, "TestSpoolSurvivesKill9", "TOLLGATE_SPOOL_CHILD="+dir, "acked ", 300)
	s, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seen := map[int64]bool{}
	if _, err := s.Drain(context.Background(), func(_ context.Context, data []byte) error {
		e, _ := usage.Decode(data)
		seen[e.Usage.PromptTokens] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i <= acked; i++ {
		if !seen[int64(i)] {
			t.Fatalf("event %d was acknowledged before the kill but is not in the spool (%d recovered)", i, len(seen))
		}
	}
	t.Logf("%d acknowledged appends before SIGKILL, %d recovered", acked+1, len(seen))
}

// TestSpoolCountsWhatItCouldNotSaveAsUnsent: a drain whose cursor cannot be
// saved (here cursor.tmp is a directory; a full disk does the same) sends
// its records again on the next drain. Stats must count each record off
// once, when the cursor past it is durable: counted off on every send, the
// count went below the records left, to 0 or less, and the republisher,
// which drains only a spool that counts events, left the rest unsent.
func TestSpoolCountsWhatItCouldNotSaveAsUnsent(t *testing.T) {
	dir := t.TempDir()
	s, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 300 {
		if err := s.Append(testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	_, size, _ := s.Stats()
	if err := os.Mkdir(filepath.Join(dir, "cursor.tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	sent := map[int64]int{}
	send := func(limit int) func(context.Context, []byte) error {
		n := 0
		return func(_ context.Context, data []byte) error {
			if n == limit {
				return errors.New("nats down")
			}
			n++
			e, _ := usage.Decode(data)
			sent[e.Usage.PromptTokens]++
			return nil
		}
	}
	if n, err := s.Drain(context.Background(), send(-1)); n != 256 || err == nil {
		t.Fatalf("Drain with an unwritable cursor = %d, %v: want 256 sent, then the cursor's error", n, err)
	}
	if n, b, _ := s.Stats(); n != 300 || b != size {
		t.Fatalf("after a drain whose cursor was not saved: %d events, %d bytes; want all 300 (%d bytes), to be sent again", n, b, size)
	}
	// Sent again in part (NATS went down again after 100), still unsaved.
	if n, err := s.Drain(context.Background(), send(100)); n != 100 || err == nil {
		t.Fatalf("second Drain = %d, %v", n, err)
	}
	if n, _, _ := s.Stats(); n != 300 {
		t.Fatalf("after a second unsaved drain: %d events, want 300", n)
	}
	if err := os.Remove(filepath.Join(dir, "cursor.tmp")); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Drain(context.Background(), send(-1)); n != 300 || err != nil {
		t.Fatalf("Drain once the cursor can be saved = %d, %v; want all 300", n, err)
	}
	if n, b, age := s.Stats(); n != 0 || b != 0 || age != 0 {
		t.Fatalf("drained spool: %d events, %d bytes, oldest %v; want none", n, b, age)
	}
	for i := range int64(300) {
		if sent[i] == 0 {
			t.Fatalf("event %d was never sent", i)
		}
	}
}
