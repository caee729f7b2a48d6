package meter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// startCluster starts n JetStream servers on loopback, routed to each
// other as one cluster, and waits until JetStream has a meta leader.
func startCluster(t *testing.T, n int) []*server.Server {
	t.Helper()
	servers, _ := startClusterOpts(t, n)
	return servers
}

// startClusterOpts is startCluster, returning each server's options too:
// startServer(t, opts[i]) starts a stopped one again, at the same client
// and route ports, on the same store, routed to the others.
//
// No port is chosen before its server listens on it: each server binds
// random client and route ports (the server writes the ports it got back
// into its options), and routes to the servers started before it; the
// cluster gossips the rest of the mesh. Ports picked free beforehand were
// taken by another test's connection in the meantime (CI: "server n2 not
// ready" after 10 s, its route port in use).
func startClusterOpts(t *testing.T, n int) ([]*server.Server, []*server.Options) {
	t.Helper()
	servers := make([]*server.Server, n)
	opts := make([]*server.Options, n)
	var routes []string
	for i := range servers {
		opts[i] = &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
			Cluster: server.ClusterOpts{Name: "tollgate-test", Host: "127.0.0.1", Port: server.RANDOM_PORT},
			Routes:  server.RoutesFromStr(strings.Join(routes, ",")),
		}
		servers[i] = startServer(t, opts[i])
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", opts[i].Cluster.Port))
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		leaders, routed := 0, true
		for _, s := range servers {
			if s.JetStreamIsLeader() {
				leaders++
			}
			routed = routed && s.NumRoutes() >= n-1
		}
		if leaders == 1 && routed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster did not form: %d meta leaders, routed %v", leaders, routed)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A server started again lists every other one as a route: the first
	// one started knew of none.
	restart := make([]*server.Options, n)
	for i, o := range opts {
		restart[i] = o.Clone()
		var others []string
		for j, r := range routes {
			if j != i {
				others = append(others, r)
			}
		}
		restart[i].Routes = server.RoutesFromStr(strings.Join(others, ","))
	}
	return servers, restart
}

// startServer starts a JetStream server with opts, stopped at the test's
// end, and waits until it takes connections.
func startServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatalf("server %s not ready", opts.ServerName)
	}
	return s
}

// asyncErrors counts the asynchronous errors of the test's connections.
var asyncErrors atomic.Int64

func connectAll(t *testing.T, servers []*server.Server) jetstream.JetStream {
	t.Helper()
	var urls []string
	for _, s := range servers {
		urls = append(urls, s.ClientURL())
	}
	// Slow-consumer drops on a pull subscription (more messages than
	// asked for around a leader change) end in redeliveries: counted, not
	// printed by nats.go's default handler.
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) { asyncErrors.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// TestClusterNodeLossUnderLoad runs an R3 usage stream on a 3-node
// JetStream cluster, kills the stream's leader while publishers and a
// worker are busy, and checks that the ledger holds every event exactly
// once. Publishes that fail during the leader election are retried with
// the same event id, as the gateway's spool does.
func TestClusterNodeLossUnderLoad(t *testing.T) {
	const events, publishers = 3000, 8
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	servers := startCluster(t, 3)
	store := ledgertest.NewStore(t)
	js := connectAll(t, servers)
	scfg := meter.StreamConfig{Replicas: 3}
	// JetStream API calls wait as long as their context allows for an
	// answer that a dying server never sends: each gets 5s, as the client's
	// default gives a context without a deadline (as in cmd/tollgate).
	for {
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := meter.EnsureStream(sctx, js, scfg)
		scancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("EnsureStream R3: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The worker, set up again (as cmd/tollgate's runWorker does) when it
	// loses its consumer.
	wctx, wstop := context.WithCancel(ctx)
	workerDone := make(chan struct{})
	go func() {
		defer close(workerDone)
		wjs := connectAll(t, servers)
		for wctx.Err() == nil {
			sctx, scancel := context.WithTimeout(wctx, 5*time.Second)
			w, err := meter.NewWorker(sctx, wjs, store, meter.WorkerConfig{Stream: scfg, BatchSize: 100,
				BatchWait: 10 * time.Millisecond, AckWait: 2 * time.Second})
			scancel()
			if err == nil {
				err = w.Run(wctx)
			}
			if err != nil && wctx.Err() == nil {
				t.Logf("worker: %v; starting again", err)
				time.Sleep(200 * time.Millisecond)
			}
		}
	}()

	began := time.Now()
	customer, key := uuid.NewString(), uuid.NewString()
	var published, retries atomic.Int64
	var wg sync.WaitGroup
	var failed error
	var failOnce sync.Once
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pub := meter.NewPublisher(connectAll(t, servers), scfg, time.Second)
			for i := p; i < events; i += publishers {
				e := usage.Event{Version: usage.SchemaVersion, ID: uuid.NewString(), Time: time.Now().UTC(),
					CustomerID: customer, KeyID: key, Provider: "sim", Model: "sim-small", Endpoint: "/v1/chat/completions",
					Status: usage.StatusOK, UsageSource: usage.SourceUpstream,
					Usage: usage.Tokens{PromptTokens: int64(i), CompletionTokens: 1}}
				for err := pub.Publish(ctx, &e); err != nil; err = pub.Publish(ctx, &e) {
					if ctx.Err() != nil {
						failOnce.Do(func() { failed = fmt.Errorf("event %d never acknowledged: %w", i, err) })
						return
					}
					retries.Add(1)
					time.Sleep(50 * time.Millisecond)
				}
				published.Add(1)
			}
		}()
	}

	// Kill the stream's leader once a third of the events are in.
	for published.Load() < events/3 {
		time.Sleep(5 * time.Millisecond)
	}
	sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
	defer scancel()
	info, err := js.Stream(sctx, "TOLLGATE_USAGE")
	if err != nil {
		t.Fatal(err)
	}
	si, err := info.Info(sctx)
	if err != nil || si.Cluster == nil {
		t.Fatalf("stream info: %v %+v", err, si)
	}
	killed := ""
	for _, s := range servers {
		if s.Name() == si.Cluster.Leader {
			killed = s.Name()
			s.Shutdown()
		}
	}
	if killed == "" {
		t.Fatalf("stream leader %q is none of the servers", si.Cluster.Leader)
	}
	t.Logf("killed stream leader %s after %d events, at %s", killed, published.Load(), time.Since(began).Round(time.Millisecond))

	wg.Wait()
	if failed != nil {
		t.Fatal(failed)
	}
	t.Logf("all %d events acknowledged by JetStream at %s", events, time.Since(began).Round(time.Millisecond))
	want := ledger.UsageRow{Requests: events, PromptTokens: events * (events - 1) / 2, CompletionTokens: events}
	check := func() (ledger.UsageRow, bool) {
		page, err := store.Usage(ctx, ledger.UsageQuery{CustomerID: customer, GroupBy: "customer"})
		if err != nil {
			t.Fatal(err)
		}
		var got ledger.UsageRow
		if len(page.Data) == 1 {
			got = page.Data[0]
		}
		return got, got.Requests == want.Requests && got.PromptTokens == want.PromptTokens &&
			got.CompletionTokens == want.CompletionTokens
	}
	for {
		got, ok := check()
		if ok {
			break
		}
		if ctx.Err() != nil || got.Requests > events {
			t.Fatalf("ledger holds %+v, want %d events, %d prompt tokens; consumer: %s", got, want.Requests,
				want.PromptTokens, consumerState(js))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("ledger complete at %s", time.Since(began).Round(time.Millisecond))
	// Let redeliveries of batches whose acks were lost land; the ledger
	// must not count them.
	time.Sleep(2500 * time.Millisecond)
	if got, ok := check(); !ok {
		t.Fatalf("after redeliveries the ledger holds %+v, want %d events", got, want.Requests)
	}
	wstop()
	<-workerDone
	t.Logf("%d events, each once; %d publishes retried during the election; %d async NATS errors (slow consumer)",
		events, retries.Load(), asyncErrors.Load())
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("ran out of time")
	}
}

// consumerState describes the meter's consumer, for a failure message.
func consumerState(js jetstream.JetStream) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, "TOLLGATE_USAGE", "tollgate-meter")
	if err != nil {
		return err.Error()
	}
	ci, err := c.Info(ctx)
	if err != nil {
		return err.Error()
	}
	leader := ""
	if ci.Cluster != nil {
		leader = ci.Cluster.Leader
	}
	return fmt.Sprintf("leader %s, %d pending, %d unacknowledged, %d pulls waiting, delivered %d",
		leader, ci.NumPending, ci.NumAckPending, ci.NumWaiting, ci.Delivered.Stream)
}
