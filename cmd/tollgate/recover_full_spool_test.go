package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/journal"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestRecoveryWaitsForAFullSpool: a gateway whose spool filled its disk
// during a NATS outage, killed, exited at every start: the requests its
// journal recovered could be neither published (behind the spool) nor
// spooled, and recover's error was fatal, so the spool that filled the
// disk was never drained (a crash review: a restart loop until disk was
// freed by hand). The start goes on; the journal keeps the requests; once
// the disk has room they are recorded and the journal forgets them.
func TestRecoveryWaitsForAFullSpool(t *testing.T) {
	old := recoveryRetry
	recoveryRetry = 20 * time.Millisecond
	t.Cleanup(func() { recoveryRetry = old })
	ctx := context.Background()
	js := metertest.NewStream(t)
	disk := metertest.SmallDisk(t, 256<<10)
	spool, err := meter.OpenSpool(filepath.Join(disk, "spool"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer spool.Close()
	dead, err := meter.OpenSpool(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	event := func() usage.Event {
		return usage.Event{Version: usage.SchemaVersion, ID: uuid.Must(uuid.NewV7()).String(), Time: time.Now().UTC(),
			CustomerID: uuid.NewString(), KeyID: uuid.NewString(), RequestID: uuid.NewString(), Provider: "sim", Model: "sim-small",
			Endpoint: "/v1/chat/completions", Status: usage.StatusCrashed, UsageSource: usage.SourceEstimated}
	}
	spooled := event() // an event of the outage, waiting in the spool
	if err := spool.Append(&spooled); err != nil {
		t.Fatal(err)
	}
	filler := metertest.FillDisk(t, disk)

	// A request in flight at the crash, in the journal.
	jdir := t.TempDir()
	j, _, err := journal.Open(jdir)
	if err != nil {
		t.Fatal(err)
	}
	inFlight := event()
	// Tags enough that its record needs disk the spool's last page has not
	// (8 KiB of them).
	inFlight.Metadata = map[string]string{}
	for i := range usage.MaxMetadataPairs {
		inFlight.Metadata[fmt.Sprintf("tag%02d", i)] = strings.Repeat("x", usage.MaxMetadataValueLen)
	}
	j.Begin(&inFlight, []byte(`{"model":"sim-small"}`))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j, crashed, err := journal.Open(jdir)
	if err != nil || len(crashed) != 1 {
		t.Fatalf("reopened journal: %d requests, %v; want the one in flight", len(crashed), err)
	}
	segments := func() int {
		n, _ := filepath.Glob(filepath.Join(jdir, "*.journal"))
		return len(n)
	}
	before := segments()

	a := &app{log: slog.New(slog.DiscardHandler), journal: j,
		sink: meter.NewDurablePublisher(meter.NewPublisher(js, meter.StreamConfig{}, 0), spool, dead, func() bool { return true }, 0, slog.New(slog.DiscardHandler), nil)}
	defer func() {
		for _, s := range a.stops {
			_ = s.stop(ctx)
		}
		_ = j.Close()
	}()
	if err := a.recordRecovered(ctx, []usage.Event{crashed[0].Event}); err != nil {
		t.Fatalf("recovery with the spool's disk full = %v: want the start to go on", err)
	}
	time.Sleep(100 * time.Millisecond) // a few retries, the disk still full
	if segments() != before {
		t.Fatalf("the journal forgot the recovered request before it was recorded (%d segments, %d before)", segments(), before)
	}

	// The disk has room again and the republisher drains the spool.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	drain := func() {
		t.Helper()
		send := func(ctx context.Context, data []byte) error {
			e, err := usage.Decode(data)
			if err != nil {
				return err
			}
			return pub.PublishData(ctx, e.ID, data)
		}
		if _, err := spool.Drain(ctx, send); err != nil {
			t.Fatal(err)
		}
	}
	drain()
	deadline := time.Now().Add(10 * time.Second)
	for segments() >= before {
		if time.Now().After(deadline) {
			t.Fatalf("the recovered request was not recorded once the disk had room (%d journal segments)", segments())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A retry that ran while the spool still held the outage's event put
	// the recovered one behind it: the republisher's next drain sends it.
	drain()
	s, err := js.Stream(ctx, meter.DefaultStreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs != 2 {
		t.Fatalf("the usage stream holds %v messages (%v), want the spooled event and the recovered one", info.State.Msgs, err)
	}
}
