package meter

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestTheEstimatesScanDoesNotSplitAMalformedGroup: the check that holds a
// crash estimate while a group before it carries its id (clearOfGroups)
// reads a group as the worker does (groupSize): a message whose
// Tollgate-Events header is no count of 1 to 16, or does not match its
// lines, is set aside whole by the worker, carries no event it writes,
// and is not split. It split every such message line by line, decoding
// each: anyone allowed to publish on the usage subject made it split and
// decode a million lines a message (1 MiB of newlines, about 0.8 s of CPU
// and a million allocations), up to maxGroupScan messages a check, which
// the worker's loop runs while it holds an estimate behind a backlog: the
// very split the worker was bounded against (no message makes it split
// more than 16 lines).
func TestTheEstimatesScanDoesNotSplitAMalformedGroup(t *testing.T) {
	_, _, js, stream := gateServer(t)
	ctx := context.Background()
	hostile := bytes.Repeat([]byte{'\n'}, 200_000)
	const messages = 4
	for range messages {
		m := &nats.Msg{Subject: DefaultSubject, Data: hostile, Header: nats.Header{HeaderEvents: []string{"2"}}}
		if _, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(uuid.NewString())); err != nil {
			t.Fatal(err)
		}
	}
	estimate, err := js.Publish(ctx, DefaultSubject, []byte("{}"), jetstream.WithMsgID(uuid.NewString()))
	if err != nil {
		t.Fatal(err)
	}
	w := &Worker{usage: stream}
	e := &estimates{pending: pending{events: []usage.Event{{ID: uuid.NewString()}}}, seqs: []uint64{estimate.Sequence}}
	allocs := testing.AllocsPerRun(1, func() {
		if n := w.clearOfGroups(ctx, 1, e, 0, 1); n != 1 {
			t.Fatalf("clearOfGroups = %d; want 1: no group before the estimate carries its id", n)
		}
	})
	if allocs > 10_000 {
		t.Fatalf("the scan of %d malformed groups (%d newlines each) made %.0f allocations; want them not split (under 10,000)",
			messages, len(hostile), allocs)
	}
}
