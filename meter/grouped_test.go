package meter_test

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
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

// groupEvent is a valid event of customer.
func groupEvent(customer string, prompt int64) usage.Event {
	return usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer,
		KeyID: uuid.NewString(), Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions",
		Status: usage.StatusOK, HTTPStatus: 200, UsageSource: usage.SourceUpstream,
		Usage: usage.Tokens{PromptTokens: prompt, CompletionTokens: 1}}
}

// publishGroup stores lines as one group message, as a Publisher does
// (meter.HeaderEvents, one event a line, under the first event's id).
func publishGroup(t *testing.T, js jetstream.JetStream, msgID string, lines ...[]byte) {
	t.Helper()
	m := &nats.Msg{Subject: meter.DefaultSubject, Data: bytes.Join(lines, []byte{'\n'}),
		Header: nats.Header{meter.HeaderEvents: []string{strconv.Itoa(len(lines))}}}
	if _, err := js.PublishMsg(context.Background(), m, jetstream.WithMsgID(msgID)); err != nil {
		t.Fatal(err)
	}
}

// waitAllAcked waits until the workers' consumer has every message of the
// stream acknowledged.
func waitAllAcked(t *testing.T, js jetstream.JetStream, what string) *jetstream.ConsumerInfo {
	t.Helper()
	cons, err := js.Consumer(context.Background(), meter.DefaultStreamName, "tollgate-meter")
	if err != nil {
		t.Fatal(err)
	}
	var ci *jetstream.ConsumerInfo
	waitConsumer(t, cons, what, func(i *jetstream.ConsumerInfo) bool {
		ci = i
		return i.NumAckPending == 0 && i.NumPending == 0 && i.AckFloor.Stream > 0 && i.AckFloor.Stream == i.Delivered.Stream
	})
	return ci
}

// TestWorkerSetsAsideAGroupsPoisonAlone: a group holds an event that does
// not decode and one Postgres refuses (its rollup overflows). Each goes
// to the dead-letter stream alone, its own JSON with its own reason; the
// group's other events land; and the group's message is acknowledged
// once, when all four are written or set aside.
func TestWorkerSetsAsideAGroupsPoisonAlone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, url := ledgertest.NewStoreURL(t)
	js := metertest.NewStream(t)
	c, _ := store.CreateCustomer(ctx, ledger.CustomerInput{Name: "c"})
	k, _, _ := store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k"})
	now := time.Now().UTC()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO usage_hourly VALUES ($1, date_trunc('hour', $2::timestamptz), $3, 'full', '',
		1, 1, 9223372036854775000, 0, 0, 0, 0, 0, 0, 0)`, c.ID, now, k.ID); err != nil {
		t.Fatal(err)
	}
	raw := func(model string, prompt int) []byte {
		return fmt.Appendf(nil, `{"v":1,"id":%q,"time":%q,"customer_id":%q,"key_id":%q,"provider":"p","model":%q,`+
			`"endpoint":"/v1/chat/completions","stream":true,"status":"ok","http_status":200,"usage":{"prompt_tokens":%d},"usage_source":"upstream"}`,
			uuid.NewString(), now.Format(time.RFC3339Nano), c.ID, k.ID, model, prompt)
	}
	good1, undecodable, overflow, good2 := raw("m", 1), []byte(`{"v":1,"id":"`), raw("full", 1000), raw("m", 2)
	publishGroup(t, js, uuid.NewString(), good1, undecodable, overflow, good2)
	metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{})

	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var letters []usage.DeadLetter
	for deadline := time.Now().Add(10 * time.Second); len(letters) < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if letters, err = dlq.List(ctx, 0, 10); err != nil {
			t.Fatal(err)
		}
	}
	reasons := map[string]string{}
	for _, l := range letters {
		reasons[l.Data] = l.Reason
	}
	if len(letters) != 2 || !strings.Contains(reasons[string(undecodable)], "undecodable") ||
		!strings.Contains(reasons[string(overflow)], "out of range") {
		t.Fatalf("dead letters = %+v, want the undecodable event and the overflowing one, each alone with its reason", letters)
	}
	var events, prompt int64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := conn.QueryRow(ctx, `SELECT count(*), coalesce(sum(prompt_tokens), 0) FROM usage_events`).Scan(&events, &prompt); err != nil {
			t.Fatal(err)
		}
		if events >= 2 {
			break
		}
	}
	if events != 2 || prompt != 3 {
		t.Fatalf("ledger holds %d events, %d prompt tokens, want the group's two good events (1+2)", events, prompt)
	}
	if ci := waitAllAcked(t, js, "the group acknowledged"); ci.AckFloor.Stream != 1 {
		t.Fatalf("ack floor %d, want the one group message", ci.AckFloor.Stream)
	}
}

// TestWorkerHoldsAnEstimateWhoseExactEventIsInAGroup: a request's exact
// event went in a group, under another event's id, and was delivered to a
// worker that has not written it (killed, say) when the gateway's crash
// recovery publishes its estimate, within the duplicate window. JetStream
// keeps both (the group's id is not the event's), so the window's rule
// alone would write the estimate at once, and the ledger, keeping the
// first event of an id, would bill it in place of the exact one. The
// worker reads the groups before the estimate and holds it until the
// group is written: the exact event is billed.
func TestWorkerHoldsAnEstimateWhoseExactEventIsInAGroup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	cfg := meter.WorkerConfig{AckWait: time.Minute}
	if _, err := meter.NewWorker(ctx, js, store, cfg); err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, meter.DefaultStreamName, "tollgate-meter")
	if err != nil {
		t.Fatal(err)
	}
	customer := uuid.NewString()
	other, exact := groupEvent(customer, 7), groupEvent(customer, 1000)
	exact.Usage.CompletionTokens = 321
	encode := func(e usage.Event) []byte {
		b, err := e.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	publishGroup(t, js, other.ID, encode(other), encode(exact))
	b, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second)) // the first worker takes the group and dies
	if err != nil {
		t.Fatal(err)
	}
	var held jetstream.Msg
	for m := range b.Messages() {
		held = m
	}
	if held == nil {
		t.Fatalf("the group was not delivered: %v", b.Error())
	}
	estimate := exact
	estimate.Status, estimate.UsageSource = usage.StatusCrashed, usage.SourceEstimated
	estimate.Usage = usage.Tokens{PromptTokens: 900, CompletionTokens: 50}
	estimate.Error = "the gateway process stopped mid-request (a crash or a kill); usage estimated"
	if err := meter.NewPublisher(js, meter.StreamConfig{}, 0).Publish(ctx, &estimate); err != nil {
		t.Fatal(err)
	}

	metertest.StartWorker(t, ctx, js, store, cfg)
	waitConsumer(t, cons, "the estimate delivered", func(ci *jetstream.ConsumerInfo) bool { return ci.Delivered.Stream >= 2 })
	time.Sleep(300 * time.Millisecond) // time to write it, had it been released
	if err := held.Nak(); err != nil {
		t.Fatal(err)
	}
	waitAllAcked(t, js, "the group and the estimate acknowledged")
	got, err := store.Event(ctx, exact.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != usage.StatusOK || got.Usage.PromptTokens != 1000 || got.Usage.CompletionTokens != 321 {
		t.Fatalf("ledger holds %s %+v for the request, want the exact event (ok, 1000+321 tokens), not the crashed estimate",
			got.Status, got.Usage)
	}
	if row := waitUsage(t, store, customer, 2); row.PromptTokens != 1007 {
		t.Fatalf("usage = %+v, want the group's two events", row)
	}
}

// TestWorkerSetsAsideAMalformedGroupWhole: a message whose Tollgate-Events
// header does not match its lines, is not a count, or asks for more events
// than a group may hold (meter.MaxGroupEvents) is set aside whole, as one
// dead letter with its reason and all its bytes, not line by line: a
// publisher with the subject's rights could otherwise send a few hundred
// KiB of empty lines under "Tollgate-Events: 2" and have the worker set
// aside each alone (thousands of dead letters, the stream held up behind
// them). A well-formed group behind them lands.
func TestWorkerSetsAsideAMalformedGroupWhole(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	customer := uuid.NewString()
	publishRaw := func(header string, data []byte) {
		m := &nats.Msg{Subject: meter.DefaultSubject, Data: data, Header: nats.Header{meter.HeaderEvents: []string{header}}}
		if _, err := js.PublishMsg(ctx, m, jetstream.WithMsgID(uuid.NewString())); err != nil {
			t.Fatal(err)
		}
	}
	encode := func(e usage.Event) []byte {
		b, err := e.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	empty := bytes.Repeat([]byte{'\n'}, 5000)
	publishRaw("2", empty) // 5,001 empty lines under a count of 2
	noCount := encode(groupEvent(customer, 1))
	publishRaw("abc", noCount) // no count
	over := bytes.Repeat(append(encode(groupEvent(customer, 1)), '\n'), meter.MaxGroupEvents+1)
	over = over[:len(over)-1]
	publishRaw(strconv.Itoa(meter.MaxGroupEvents+1), over) // more than a group holds
	good1, good2 := groupEvent(customer, 10), groupEvent(customer, 20)
	publishGroup(t, js, good1.ID, encode(good1), encode(good2))
	metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{})

	if row := waitUsage(t, store, customer, 2); row.PromptTokens != 30 {
		t.Fatalf("usage = %+v, want the well-formed group's two events (10+20 prompt tokens) alone", row)
	}
	waitAllAcked(t, js, "the malformed groups set aside and the good one written")
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	letters, err := dlq.List(ctx, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 3 {
		t.Fatalf("%d dead letters, want 3: each malformed group set aside whole", len(letters))
	}
	for i, want := range [][]byte{empty, noCount, over} {
		l := letters[i]
		if !strings.Contains(l.Reason, "group") || len(l.Data) != len(want) {
			t.Errorf("dead letter %d: reason %q, %d bytes; want a malformed group's reason and its %d bytes", i, l.Reason, len(l.Data), len(want))
		}
	}
}

// TestWorkerCountsAGroupAsItsEventsInABatch: BatchSize caps a batch's
// events, a group counting as the events it carries, not as one message:
// four full groups stored before the worker starts, with a BatchSize of
// two groups, are written two groups a transaction at most, each event
// once. (A BatchSize that is not a whole number of groups can be passed
// by up to two groups' events, read ahead and added before the check.)
func TestWorkerCountsAGroupAsItsEventsInABatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js := metertest.NewStream(t)
	customer := uuid.NewString()
	const groups, size = 4, 16 // meter's maxGroupEvents
	for range groups {
		lines := make([][]byte, size)
		first := ""
		for i := range lines {
			e := groupEvent(customer, 1)
			if i == 0 {
				first = e.ID
			}
			var err error
			if lines[i], err = e.AppendJSON(nil); err != nil {
				t.Fatal(err)
			}
		}
		publishGroup(t, js, first, lines...)
	}
	ledgerStore := ledgertest.NewStore(t)
	store := &batchSizes{Store: ledgerStore, sizes: make(chan int, groups*size), gate: make(chan struct{}), held: make(chan struct{})}
	close(store.gate)
	const batch = 2 * size
	done := metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{BatchSize: batch, WriteLanes: 1, BatchWait: time.Second})
	waitUsage(t, ledgerStore, customer, groups*size)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	close(store.sizes)
	for n := range store.sizes {
		if n > batch {
			t.Errorf("a batch of %d events; BatchSize is %d", n, batch)
		}
	}
}
