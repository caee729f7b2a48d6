package meter_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// TestSpoolDrainsPastAnUnsavableCursor: a drain whose cursor cannot be
// saved (here cursor.tmp is a directory; a disk the spool itself filled
// during an outage does the same) sent 256 records and stopped, so every
// later drain sent the same 256 for ever and the events behind them never
// reached JetStream (a review: 567 events spooled, NATS back for 20 s, 311
// still unsent, until disk was freed by hand). It now sends on, and says
// the cursor could not be saved; this process sends nothing twice, and
// Stats counts the records off once; a restart before the cursor is saved
// sends them again (JetStream and the ledger drop them).
func TestSpoolDrainsPastAnUnsavableCursor(t *testing.T) {
	dir := t.TempDir()
	s, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 600
	for i := range n {
		if err := s.Append(testEvent(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "cursor.tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	sent := map[int64]int{}
	send := func(limit int) func(context.Context, []byte) error {
		k := 0
		return func(_ context.Context, data []byte) error {
			if k == limit {
				return errors.New("nats down")
			}
			k++
			e, _ := usage.Decode(data)
			sent[e.Usage.PromptTokens]++
			return nil
		}
	}
	// NATS goes down again after 100, then stays up.
	if got, err := s.Drain(context.Background(), send(100)); got != 100 || err == nil || !strings.Contains(err.Error(), "nats down") {
		t.Fatalf("Drain with NATS failing after 100 = %d, %v", got, err)
	}
	if got, err := s.Drain(context.Background(), send(-1)); got != n-100 || err == nil || !strings.Contains(err.Error(), "cursor could not be saved") {
		t.Fatalf("Drain with an unwritable cursor = %d, %v: want the other %d sent, and the cursor's error", got, err, n-100)
	}
	if got, err := s.Drain(context.Background(), send(-1)); got != 0 || err == nil {
		t.Fatalf("a drain after all was sent = %d, %v: want none sent again, and the cursor's error", got, err)
	}
	for i := range int64(n) {
		if sent[i] != 1 {
			t.Fatalf("event %d was sent %d times, want once", i, sent[i])
		}
	}
	if c, b, age := s.Stats(); c != 0 || b != 0 || age != 0 {
		t.Fatalf("after every record was sent: %d events, %d bytes, oldest %v; want none", c, b, age)
	}
	// A restart before the cursor is saved counts them again and sends
	// them again.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = meter.OpenSpool(dir, 0); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if c, _, _ := s.Stats(); c != n {
		t.Fatalf("after a restart with the cursor unsaved: %d events, want %d", c, n)
	}
	if err := os.Remove(filepath.Join(dir, "cursor.tmp")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Drain(context.Background(), send(-1)); got != n || err != nil {
		t.Fatalf("Drain once the cursor can be saved = %d, %v; want all %d", got, err, n)
	}
	if c, b, age := s.Stats(); c != 0 || b != 0 || age != 0 {
		t.Fatalf("drained spool: %d events, %d bytes, oldest %v; want none", c, b, age)
	}
}

// TestSpoolInUseIsRefused: a spool directory another open Spool holds (a
// second gateway's spool linked or mounted to the first's) is refused, as
// the crash journal is: two would drain each other's segments away.
func TestSpoolInUseIsRefused(t *testing.T) {
	dir := t.TempDir()
	s, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "spool")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if second, err := meter.OpenSpool(link, 0); err == nil || !strings.Contains(err.Error(), "in use by another process") {
		if second != nil {
			second.Close()
		}
		t.Fatalf("a second OpenSpool of a spool in use = %v, want it refused", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := meter.OpenSpool(link, 0)
	if err != nil {
		t.Fatalf("OpenSpool once the first closed = %v", err)
	}
	again.Close()
}
