package api_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// newDLQServer is a server whose admin API serves a dead-letter stream of
// its own, and deadLetter, which sets data aside with reason and returns
// its sequence.
func newDLQServer(t *testing.T) (s *server, deadLetter func(data, reason string) uint64) {
	t.Helper()
	ctx := context.Background()
	js := metertest.NewStream(t)
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	noErr(t, "EnsureDLQ", err)
	s = newServerWith(t, func(a *api.Admin) { a.SetDeadLetters(dlq) })
	return s, func(data, reason string) uint64 {
		t.Helper()
		msg := nats.NewMsg(meter.DLQSubject)
		msg.Data = []byte(data)
		msg.Header.Set(meter.HeaderReason, reason)
		ack, err := js.PublishMsg(ctx, msg)
		noErr(t, "publish a dead letter", err)
		return ack.Sequence
	}
}
