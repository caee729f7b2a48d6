package meter_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// killedMeterEnv tells a child of TestMetersKilledMidBatchWriteEachEventOnce
// it is one: "<after|before> <NATS url> <database url>".
const killedMeterEnv = "TOLLGATE_TEST_KILLED_METER"

// committedThenHang is an Observer that says when the worker has
// committed a batch, and then holds its lane: the kill lands after the
// commit and before the batch's acks.
type committedThenHang struct{ redeliveries }

func (*committedThenHang) BatchWritten(int, int, time.Duration) {
	fmt.Println("committed 0")
	select {}
}

// writingThenHang is a Store that says when it is given a batch, and holds
// it: the kill lands before the commit.
type writingThenHang struct{ meter.Store }

func (writingThenHang) WriteEvents(context.Context, []usage.Event) (int, error) {
	fmt.Println("writing 0")
	select {}
}

// runKilledMeter is the child: a meter worker on the parent's NATS and
// database, which stops at its first batch (see spec) until it is killed.
func runKilledMeter(spec string) {
	f := strings.Fields(spec)
	ctx := context.Background()
	store, err := ledger.OpenExisting(ctx, f[2])
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	nc, err := nats.Connect(f[1])
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	js, _ := jetstream.New(nc)
	cfg := meter.WorkerConfig{BatchSize: 40, AckWait: 2 * time.Second}
	var s meter.Store = store
	if f[0] == "after" {
		cfg.Observer = &committedThenHang{}
	} else {
		s = writingThenHang{store}
	}
	w, err := meter.NewWorker(ctx, js, s, cfg)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	_ = w.Run(ctx)
}

// TestMetersKilledMidBatchWriteEachEventOnce: meter processes sharing the
// durable consumer with two workers that stay up are killed with SIGKILL,
// one after another while events are published, each at its first batch:
// after the ledger's commit and before the acks, or before the commit.
// Every event published is in the ledger once (events, ids, rollups), and
// none in the dead-letter stream.
func TestMetersKilledMidBatchWriteEachEventOnce(t *testing.T) {
	if spec := os.Getenv(killedMeterEnv); spec != "" {
		runKilledMeter(spec)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, dbURL := ledgertest.NewStoreURL(t)
	srv := metertest.NewServer(t)
	js := metertest.Connect(t, srv)
	if _, err := meter.EnsureStream(ctx, js, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	cfg := meter.WorkerConfig{BatchSize: 40, AckWait: 2 * time.Second}
	for range 2 {
		metertest.StartWorker(t, ctx, js, store, cfg)
	}
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	customer, key := uuid.NewString(), uuid.NewString()
	// The publisher runs until the kills are done: each child must be
	// delivered a batch.
	var published, completion int64
	killed := make(chan struct{})
	var pwg sync.WaitGroup
	pwg.Go(func() {
		for i := int64(0); ; i++ {
			select {
			case <-killed:
				return
			case <-time.After(time.Millisecond): // a steady flow, not a burst the live workers take at once
			}
			e := &usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer, KeyID: key,
				Provider: "p", Model: "m", Status: usage.StatusOK, UsageSource: usage.SourceUpstream,
				Usage: usage.Tokens{PromptTokens: 1, CompletionTokens: i % 7}}
			// Sent again until acknowledged, as the gateway's spool does:
			// a copy stored before a lost PubAck is dropped as a duplicate.
			for pub.Publish(ctx, e) != nil {
				select {
				case <-killed:
					t.Error("an event was never acknowledged")
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
			published, completion = published+1, completion+i%7
		}
	})
	for i := range 8 {
		mode, line := "after", "committed"
		if i%2 == 1 {
			mode, line = "before", "writing"
		}
		// The child says "<line> 0" once, then hangs.
		if got := metertest.KillChild(t, "TestMetersKilledMidBatchWriteEachEventOnce",
			killedMeterEnv+"="+mode+" "+srv.ClientURL()+" "+dbURL, line+" ", 0); got != 0 {
			t.Fatalf("kill %d (%s the commit): the child never had a batch", i, mode)
		}
	}
	close(killed)
	pwg.Wait()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var rows, ids, tokens int64
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := conn.QueryRow(ctx, `SELECT count(*), coalesce(sum(completion_tokens), 0), (SELECT count(*) FROM event_ids)
			FROM usage_events`).Scan(&rows, &tokens, &ids); err != nil {
			t.Fatal(err)
		}
		if rows >= published || time.Now().After(deadline) {
			break
		}
	}
	if rows != published || ids != published || tokens != completion {
		t.Fatalf("the ledger holds %d events (%d ids) with %d completion tokens; %d were published with %d",
			rows, ids, tokens, published, completion)
	}
	page, err := store.Usage(ctx, ledger.UsageQuery{CustomerID: customer})
	if err != nil || len(page.Data) != 1 || page.Data[0].Requests != published {
		t.Fatalf("usage = %+v, %v; want %d requests", page.Data, err, published)
	}
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if letters, err := dlq.List(ctx, 0, 10); err != nil || len(letters) != 0 {
		t.Fatalf("dead letters = %+v, %v", letters, err)
	}
	t.Logf("%d events published through 8 meters killed mid-batch", published)
}
