package meter_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestTheServiceGoesOnAfterTheUsageStreamIsDeleted: the usage stream is
// deleted under a running meter service (a worker's Run ends, with
// errStreamReplaced when JetStream's advisory of the deletion reaches it,
// or with its consumer's loss when its NATS user may not subscribe to the
// advisory subject). The service sets the stream and a worker up again by
// itself, and the new stream's events are written and acknowledged
// (within seconds of a 30 s ack wait): a worker whose gate stayed shut, or
// a service that gave up on errStreamReplaced, would leave them pending.
func TestTheServiceGoesOnAfterTheUsageStreamIsDeleted(t *testing.T) {
	t.Run("advisory allowed", func(t *testing.T) { testServiceAfterDeletion(t, false) })
	t.Run("advisory denied", func(t *testing.T) { testServiceAfterDeletion(t, true) })
}

func testServiceAfterDeletion(t *testing.T, denyAdvisory bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sub := &server.SubjectPermission{Allow: []string{">"}}
	if denyAdvisory {
		sub.Deny = []string{"$JS.EVENT.ADVISORY.>"}
	}
	srv := metertest.NewServerWith(t, &server.Options{JetStream: true, StoreDir: t.TempDir(),
		Users: []*server.User{{Username: "meter", Password: "pw",
			Permissions: &server.Permissions{Publish: &server.SubjectPermission{Allow: []string{">"}}, Subscribe: sub}}}})
	var denied atomic.Bool
	nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("meter", "pw"),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			if errors.Is(err, nats.ErrPermissionViolation) {
				denied.Store(true)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	store := ledgertest.NewStore(t)
	svc := meter.NewService(js, store, meter.WorkerConfig{BatchSize: 5, BatchWait: 20 * time.Millisecond, AckWait: 30 * time.Second})
	svc.Start()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = svc.Stop(ctx)
	}()
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	customer := uuid.NewString()
	const n = 5
	publishFor(t, ctx, pub, customer, n, 15*time.Second) // once the service has made the stream
	waitUsage(t, store, customer, n)
	waitAcked(t, ctx, js, n, 15*time.Second)
	if denied.Load() != denyAdvisory {
		t.Fatalf("permission violation seen: %v; want %v (the worker subscribes to the advisory subject)", denied.Load(), denyAdvisory)
	}

	if err := js.DeleteStream(ctx, meter.DefaultStreamName); err != nil {
		t.Fatal(err)
	}
	publishFor(t, ctx, pub, customer, n, 15*time.Second) // once the service has made the stream again
	waitUsage(t, store, customer, 2*n)
	waitAcked(t, ctx, js, n, 15*time.Second) // the new stream numbers its events from 1
}
