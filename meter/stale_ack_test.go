package meter_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// heldStore is the ledger with its writes held: a write says on begun
// that it has begun, then waits for release (or its context) before
// writing.
type heldStore struct {
	meter.Store
	begun   chan struct{}
	release chan struct{}
}

func (s heldStore) WriteEvents(ctx context.Context, events []usage.Event) (int, error) {
	select {
	case s.begun <- struct{}{}:
	default:
	}
	select {
	case <-s.release:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return s.Store.WriteEvents(ctx, events)
}

// TestAWorkerDoesNotAcknowledgeANewStreamsEvents: a worker's write of a
// batch was held (Postgres slow) while the usage stream was deleted, or
// NATS came back empty, and the stream and its consumer were made again,
// as a worker makes them; new events took the old batch's stream
// sequences, and were delivered to a worker killed before writing them.
// JetStream takes an acknowledgement by stream sequence alone (nats-server
// consumer.go, processAckMsg): once the held write committed, the
// worker's acknowledgements of its old batch acknowledged the new events,
// which were never delivered again: in neither the ledger nor the
// dead-letter stream (10 of 10 lost). A worker acknowledges nothing of a
// stream that is gone now; the new events are delivered again and
// written, once.
func TestAWorkerDoesNotAcknowledgeANewStreamsEvents(t *testing.T) {
	t.Run("the stream deleted", func(t *testing.T) {
		js := metertest.NewStream(t)
		testStaleAcks(t, js, func() (jetstream.JetStream, func()) {
			if err := js.DeleteStream(context.Background(), meter.DefaultStreamName); err != nil {
				t.Fatal(err)
			}
			return js, func() {}
		})
	})
	t.Run("NATS back empty", func(t *testing.T) {
		addr, start := emptyNATS(t)
		srv := start()
		defer func() { srv.Shutdown() }()
		nc, err := nats.Connect("nats://"+addr, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := meter.EnsureStream(context.Background(), js, meter.StreamConfig{}); err != nil {
			t.Fatal(err)
		}
		testStaleAcks(t, js, func() (jetstream.JetStream, func()) {
			reconnects := nc.Stats().Reconnects
			srv.Shutdown()
			srv.WaitForShutdown()
			srv = start() // the same address, its store lost
			waitReconnect(t, nc, reconnects, 10*time.Second)
			return js, func() {}
		})
	})
	// Only the reconnect tells: another worker made the stream and its
	// consumer again on the empty server before this worker's connection
	// came back, so its pulls find a consumer and nothing it hears raises
	// a doubt. The stream it acknowledges to must still be asked for after
	// the reconnect.
	t.Run("NATS back empty, the stream made again before the worker reconnects", func(t *testing.T) {
		addr, start := emptyNATS(t)
		srv := start()
		defer func() { srv.Shutdown() }()
		const wait = 5 * time.Second // the worker's reconnect wait: time to make the stream again first
		nc, err := nats.Connect("nats://"+addr, nats.MaxReconnects(-1), nats.ReconnectWait(wait), nats.ReconnectJitter(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := meter.EnsureStream(context.Background(), js, meter.StreamConfig{}); err != nil {
			t.Fatal(err)
		}
		// The other workers and the gateway, on a connection that comes
		// back at once.
		other, err := nats.Connect("nats://"+addr, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		ojs, err := jetstream.New(other)
		if err != nil {
			t.Fatal(err)
		}
		testStaleAcks(t, js, func() (jetstream.JetStream, func()) {
			reconnects, otherReconnects := nc.Stats().Reconnects, other.Stats().Reconnects
			srv.Shutdown()
			srv.WaitForShutdown()
			srv = start()
			waitReconnect(t, other, otherReconnects, 10*time.Second)
			return ojs, func() {
				if nc.Stats().Reconnects != reconnects {
					t.Fatalf("the held worker's connection came back before the others were done (reconnect wait %v)", wait)
				}
				waitReconnect(t, nc, reconnects, 10*wait)
			}
		})
	})
}

// emptyNATS returns a free address and start, which starts an embedded
// JetStream server there with a new, empty store each time.
func emptyNATS(t *testing.T) (addr string, start func() *meter.Embedded) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = l.Addr().String()
	l.Close()
	return addr, func() *meter.Embedded {
		e, err := meter.StartEmbedded(t.TempDir(), addr, meter.SyncPolicy{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
}

// waitReconnect waits until nc has reconnected since it had reconnected
// reconnects times, and is up.
func waitReconnect(t *testing.T, nc *nats.Conn, reconnects uint64, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); nc.Stats().Reconnects == reconnects || !nc.IsConnected(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the connection did not reconnect to the new server")
		}
	}
}

// testStaleAcks runs TestAWorkerDoesNotAcknowledgeANewStreamsEvents on js,
// whose usage stream lose loses (with its consumer) while a worker's
// write is held. lose returns the JetStream the other workers and the
// gateway reach (js itself, or another connection when the held worker's
// is still away), and back, which returns once the held worker's
// connection is up again.
func testStaleAcks(t *testing.T, js jetstream.JetStream, lose func() (others jetstream.JetStream, back func())) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, dbURL := ledgertest.NewStoreURL(t)
	const n = 10
	held := heldStore{Store: store, begun: make(chan struct{}, 1), release: make(chan struct{})}
	old := metertest.StartWorker(t, ctx, js, held,
		meter.WorkerConfig{BatchSize: n, BatchWait: 100 * time.Millisecond, WriteLanes: 1, AckWait: 30 * time.Second})
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	oldIDs := publishEvents(t, ctx, pub, n)
	select {
	case <-held.begun:
	case <-time.After(10 * time.Second):
		t.Fatal("the worker did not begin writing its batch")
	}

	// The stream and its consumer are made again (the consumer as a
	// worker makes it), and the new events take the old batch's
	// sequences.
	others, back := lose()
	if _, err := meter.EnsureStream(ctx, others, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	cfg := meter.WorkerConfig{BatchSize: n, BatchWait: 20 * time.Millisecond, AckWait: 3 * time.Second}
	if _, err := meter.NewWorker(ctx, others, store, cfg); err != nil {
		t.Fatal(err)
	}
	newIDs := publishEvents(t, ctx, meter.NewPublisher(others, meter.StreamConfig{}, 0), n)
	// A worker is delivered them and killed before writing them: their
	// ack wait runs out, and JetStream delivers them again. (The held
	// worker's subscription may have taken some of them first.)
	cons, err := others.Consumer(ctx, meter.DefaultStreamName, "tollgate-meter")
	if err != nil {
		t.Fatal(err)
	}
	b, err := cons.Fetch(n, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	delivered := 0
	for m := range b.Messages() {
		if md, err := m.Metadata(); err != nil || md.Sequence.Stream > n {
			t.Fatalf("new event at stream sequence %v (%v); want one of the old batch's, 1 to %d", md, err, n)
		}
		delivered++
	}
	if delivered == 0 {
		t.Fatal("no new event delivered to the killed worker")
	}

	back()
	close(held.release) // the held write commits, and the worker acknowledges what it may
	select {
	case <-old: // its consumer was lost: its Run ends once its write is done
	case <-time.After(30 * time.Second):
		// Still running, it takes the new stream for its own: what it
		// acknowledged is told by the ledger below.
		t.Error("the worker whose stream was made again did not stop")
	}
	metertest.StartWorker(t, ctx, others, store, cfg) // the service's next worker

	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	written := func(ids []string) (rows, distinct int) {
		t.Helper()
		if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT id) FROM usage_events WHERE id = ANY($1::uuid[])`,
			ids).Scan(&rows, &distinct); err != nil {
			t.Fatal(err)
		}
		return rows, distinct
	}
	var rows, distinct int
	for deadline := time.Now().Add(3*cfg.AckWait + 10*time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if rows, distinct = written(newIDs); distinct == n {
			break
		}
	}
	letters, err := mustDLQ(t, others).List(ctx, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if rows != n || distinct != n {
		t.Errorf("the ledger holds %d rows of %d of the %d new events (%d delivered to the killed worker), %d dead letters; "+
			"want each once: the rest were acknowledged by the old batch's acknowledgements and lost",
			rows, distinct, n, delivered, len(letters))
	}
	if rows, distinct := written(oldIDs); rows != n || distinct != n {
		t.Errorf("the ledger holds %d rows of %d of the %d events of the held batch; want each once: its commit is not skipped",
			rows, distinct, n)
	}
	if len(letters) != 0 {
		t.Errorf("%d dead letters; want none: no event was refused", len(letters))
	}
}

// mustDLQ returns the dead-letter stream of js's usage stream.
func mustDLQ(t *testing.T, js jetstream.JetStream) *meter.DLQ {
	t.Helper()
	dlq, err := meter.EnsureDLQ(context.Background(), js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return dlq
}
