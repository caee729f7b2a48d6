package web_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// newDLQRig is a rig whose admin API serves a dead-letter stream of its
// own, and deadLetter, which dead-letters an undecodable event with
// reason and returns its sequence.
func newDLQRig(t *testing.T) (g *rig, deadLetter func(reason string) string) {
	t.Helper()
	ctx := context.Background()
	js := metertest.NewStream(t)
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	g = newRigAdmin(t, nil, nil, func(a *api.Admin) { a.SetDeadLetters(dlq) })
	return g, func(reason string) string {
		t.Helper()
		msg := nats.NewMsg(meter.DLQSubject)
		msg.Data = []byte(`{"v":7}`)
		msg.Header.Set(meter.HeaderReason, reason)
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		return strconv.FormatUint(ack.Sequence, 10)
	}
}
