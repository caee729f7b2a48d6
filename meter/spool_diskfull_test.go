package meter_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestSpoolAfterADiskFull: NATS is unreachable, so the
// gateway spools; the disk fills up (the spool itself filling it is the
// usual way), one append fails part-way through its record, and the
// operator frees space. Every append after that returns nil, that is the
// events are durable and the gateway told its clients they were metered.
// Once NATS is back, all of them must reach the usage stream. (Found by a
// review: the torn record hid every later one, and the drain deleted the
// segment.)
func TestSpoolAfterADiskFull(t *testing.T) {
	ctx := context.Background()
	disk := metertest.SmallDisk(t, 256<<10)
	dir := filepath.Join(disk, "spool")
	s, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	var acked []string
	for i := range 3 {
		e := testEvent(i)
		if err := s.Append(e); err != nil {
			t.Fatal(err)
		}
		acked = append(acked, e.ID)
	}
	filler := metertest.FillDisk(t, disk)
	var failed error
	for i := 3; failed == nil && i < 1000; i++ {
		e := testEvent(i)
		if failed = s.Append(e); failed == nil {
			acked = append(acked, e.ID)
		}
	}
	if !errors.Is(failed, syscall.ENOSPC) {
		t.Fatalf("an append on a full disk = %v, want ENOSPC", failed)
	}
	t.Logf("append on the full disk: %v (%d events acknowledged before it)", failed, len(acked))
	// The operator frees the disk; the gateway goes on spooling.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for i := 1000; i < 1010; i++ {
		e := testEvent(i)
		if err := s.Append(e); err != nil {
			t.Fatalf("append after the disk was freed: %v", err)
		}
		acked = append(acked, e.ID)
	}

	// NATS comes back: the republisher drains the spool into the stream.
	js := metertest.NewStream(t)
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	dead, err := meter.OpenSpool(filepath.Join(disk, "dead"), 0)
	if err != nil {
		t.Fatal(err)
	}
	r := meter.NewRepublisher(s, dead, pub, js, meter.StreamConfig{}, func() bool { return true }, 20*time.Millisecond, slog.Default())
	r.Start()
	time.Sleep(500 * time.Millisecond)
	_ = r.Stop(ctx)
	// And the gateway restarts later (a deploy): what the spool left is
	// republished by the next process.
	_ = s.Close()
	_ = dead.Close()
	s2, err := meter.OpenSpool(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	dead2, _ := meter.OpenSpool(filepath.Join(disk, "dead"), 0)
	r2 := meter.NewRepublisher(s2, dead2, pub, js, meter.StreamConfig{}, func() bool { return true }, 20*time.Millisecond, slog.Default())
	r2.Start()
	time.Sleep(500 * time.Millisecond)
	_ = r2.Stop(ctx)
	left, _, _ := s2.Stats()
	segs, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	_ = s2.Close()
	_ = dead2.Close()

	st, err := js.Stream(ctx, "TOLLGATE_USAGE")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	inStream := map[string]bool{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err == nil {
			inStream[m.Header.Get("Nats-Msg-Id")] = true
		}
	}
	var lost int
	for _, id := range acked {
		if !inStream[id] {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d events the spool acknowledged (fsync'd) never reached the usage stream; the spool now counts %d events and holds segments %v",
			lost, len(acked), left, segs)
	}
}
