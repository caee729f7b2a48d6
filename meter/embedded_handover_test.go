package meter_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter"
)

// storeToHandOver makes what `tollgate serve` without a NATS URL leaves in
// its data directory after Postgres was down: an embedded store in dir
// whose usage stream holds events ids, the first of them acknowledged by
// the meter's durable consumer (in the ledger), and whose dead-letter stream holds the dead
// letters of letterIDs, the first of them replayed (deleted) since, and a
// key bucket.
func storeToHandOver(t *testing.T, dir string, ids, letterIDs []string) {
	t.Helper()
	e, js := startInProcess(t, dir, meter.SyncPolicy{}, nil)
	ctx := context.Background()
	if _, err := meter.EnsureStream(ctx, js, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	if _, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		m := nats.NewMsg(meter.DefaultSubject)
		m.Data = []byte(`{"id":"` + id + `"}`)
		m.Header.Set(nats.MsgIdHdr, id)
		m.Header.Set("Nats-Expected-Stream", meter.DefaultStreamName)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	c, err := js.CreateOrUpdateConsumer(ctx, meter.DefaultStreamName, jetstream.ConsumerConfig{Durable: "tollgate-meter", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.Next(jetstream.FetchMaxWait(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := m.DoubleAck(ctx); err != nil {
		t.Fatal(err)
	}
	for i, id := range letterIDs {
		m := nats.NewMsg(meter.DLQSubject)
		m.Data = []byte(`not json ` + id)
		m.Header.Set(meter.HeaderReason, fmt.Sprintf("reason %d", i))
		m.Header.Set(meter.HeaderEventID, id)
		m.Header.Set(nats.MsgIdHdr, "dead-"+id)
		if _, err := js.PublishMsg(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if len(letterIDs) > 0 {
		dlq, err := js.Stream(ctx, meter.DLQStream)
		if err != nil {
			t.Fatal(err)
		}
		if err := dlq.DeleteMsg(ctx, 1); err != nil { // replayed
			t.Fatal(err)
		}
	}
	// A key bucket, left behind: the meter fills the new one from the ledger.
	if _, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "handover_keys"}); err != nil {
		t.Fatal(err)
	}
	e.Shutdown()
	e.WaitForShutdown()
}

// externalNATS starts a JetStream server listening on a free port, with
// the usage and dead-letter streams unless bare, and connects to it.
func externalNATS(t *testing.T, bare bool) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	e, err := meter.StartEmbedded(t.TempDir(), "127.0.0.1:0", meter.SyncPolicy{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Shutdown)
	nc, err := nats.Connect(e.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if !bare {
		if _, err := meter.EnsureStream(context.Background(), js, meter.StreamConfig{}); err != nil {
			t.Fatal(err)
		}
		if _, err := meter.EnsureDLQ(context.Background(), js, meter.StreamConfig{}); err != nil {
			t.Fatal(err)
		}
	}
	return nc, js
}

// TestHandOverMovesTheEmbeddedStore: every usage event of an embedded
// store the meter did not acknowledge, and every dead letter left in it,
// with its reason, reach the external NATS under their ids; an event sent
// there before is dropped as a duplicate; the store directory is renamed
// and kept.
func TestHandOverMovesTheEmbeddedStore(t *testing.T) {
	data := t.TempDir()
	dir := filepath.Join(data, "jetstream")
	var ids, letters []string
	for i := range 300 { // more than one batch
		ids = append(ids, fmt.Sprintf("event-%03d", i))
	}
	for i := range 4 {
		letters = append(letters, fmt.Sprintf("letter-%d", i))
	}
	storeToHandOver(t, dir, ids, letters)
	if ok, err := meter.HasEmbeddedStore(dir); err != nil || !ok {
		t.Fatalf("HasEmbeddedStore = %v, %v; want true", ok, err)
	}

	nc, js := externalNATS(t, false)
	ctx := context.Background()
	sent := nats.NewMsg(meter.DefaultSubject) // handed over before, by a hand-over cut short
	sent.Data = []byte(`{"id":"event-007"}`)
	sent.Header.Set(nats.MsgIdHdr, "event-007")
	if _, err := js.PublishMsg(ctx, sent); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	rep, err := meter.HandOver(ctx, dir, nc, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantDir := dir + ".handed-over-20260304T050607Z"
	if rep.Events != 299 || rep.EventsKnown != 1 || rep.EventsDone != 1 || rep.DeadLetters != 3 || rep.DeadLettersKnown != 0 ||
		rep.Dir != wantDir || len(rep.Left) != 1 || rep.Left[0] != "KV_handover_keys" {
		t.Fatalf("report %+v, want 299 events (1 known, 1 done), 3 dead letters, KV_handover_keys left, dir %s", rep, wantDir)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("store directory still there (%v)", err)
	}
	if ok, _ := meter.HasEmbeddedStore(wantDir); !ok {
		t.Fatalf("no store kept in %s", wantDir)
	}

	usage, err := js.Stream(ctx, meter.DefaultStreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, _ := usage.Info(ctx)
	if info.State.Msgs != 299 {
		t.Fatalf("usage stream holds %d messages, want 299", info.State.Msgs)
	}
	seen := map[string]bool{}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := usage.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		id := m.Header.Get(nats.MsgIdHdr)
		if string(m.Data) != `{"id":"`+id+`"}` || m.Subject != meter.DefaultSubject || seen[id] || id == "event-000" {
			t.Fatalf("message %d: %s %s %q (seen before: %v)", seq, m.Subject, id, m.Data, seen[id])
		}
		seen[id] = true
	}
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := dlq.List(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("%d dead letters, want 3: %+v", len(got), got)
	}
	for i, l := range got {
		id := letters[i+1]
		if l.EventID != id || l.Reason != fmt.Sprintf("reason %d", i+1) || l.Data != "not json "+id {
			t.Fatalf("dead letter %d = %+v, want %s with reason %d", i, l, id, i+1)
		}
	}

	// Handed over again (a crash before the rename): nothing new.
	if err := os.Rename(wantDir, dir); err != nil {
		t.Fatal(err)
	}
	rep, err = meter.HandOver(ctx, dir, nc, now.Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Events != 299 || rep.EventsKnown != 299 || rep.DeadLettersKnown != 3 {
		t.Fatalf("second hand-over %+v, want all 299 events and 3 dead letters known", rep)
	}
	if info, _ := usage.Info(ctx); info.State.Msgs != 299 {
		t.Fatalf("usage stream holds %d messages after a second hand-over, want 299", info.State.Msgs)
	}
}

// TestHandOverLeavesTheStoreWithoutStreams: with no usage stream on the
// external NATS (no meter made it yet), nothing is moved and the store
// stays where it is, for the next attempt.
func TestHandOverLeavesTheStoreWithoutStreams(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "jetstream")
	storeToHandOver(t, dir, []string{"a", "b"}, nil)
	nc, _ := externalNATS(t, true)
	if _, err := meter.HandOver(context.Background(), dir, nc, time.Now(), nil); err == nil {
		t.Fatal("handed over to a NATS without the usage stream")
	}
	if ok, _ := meter.HasEmbeddedStore(dir); !ok {
		t.Fatal("the store was moved")
	}
}
