package meter_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// waitLetters waits up to 10 s for the dead-letter stream to hold want
// letters and returns what it holds then.
func waitLetters(t *testing.T, ctx context.Context, dlq *meter.DLQ, want int) []usage.DeadLetter {
	t.Helper()
	var letters []usage.DeadLetter
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		if letters, err = dlq.List(ctx, 0, 100); err == nil && len(letters) >= want {
			break
		}
	}
	return letters
}

// TestDeadLetterSurvivesAUsageStreamMadeAgain: a dead letter's message id
// was "dlq-<stream>-<sequence>", and a usage stream deleted and made again
// (an operator's `nats stream rm`, a JetStream store lost; the workers make
// it again) numbers its messages from 1 again. A poison message at a
// sequence already set aside within the dead-letter stream's duplicate
// window was dropped by it as a resend, and acknowledged: lost, in neither
// the ledger nor the dead-letter stream.
func TestDeadLetterSurvivesAUsageStreamMadeAgain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := metertest.StartWorker(t, wctx, js, store, meter.WorkerConfig{})
	if _, err := js.Publish(ctx, meter.DefaultSubject, []byte(`{"v":99,"first":true}`)); err != nil {
		t.Fatal(err)
	}
	if letters := waitLetters(t, ctx, dlq, 1); len(letters) != 1 {
		t.Fatalf("dead letters %+v, want the first poison", letters)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, meter.DefaultStreamName); err != nil {
		t.Fatal(err)
	}
	if _, err := meter.EnsureStream(ctx, js, meter.StreamConfig{}); err != nil {
		t.Fatal(err)
	}
	metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{})
	second := `{"v":99,"second":true}` // sequence 1 again
	if _, err := js.Publish(ctx, meter.DefaultSubject, []byte(second)); err != nil {
		t.Fatal(err)
	}
	letters := waitLetters(t, ctx, dlq, 2)
	if len(letters) != 2 || letters[1].Data != second {
		t.Fatalf("dead letters %+v; want both poisons, the second (%s) too", letters, second)
	}
}

// TestWorkerMakesTheDeadLetterStreamAgain: with the dead-letter stream
// gone (deleted by an operator), a poison message was retried forever in
// the worker's decode stage, and no event behind it reached the ledger.
func TestWorkerMakesTheDeadLetterStreamAgain(t *testing.T) {
	ctx, store, js := meteredWorker(t)
	if err := js.DeleteStream(ctx, meter.DLQStream); err != nil {
		t.Fatal(err)
	}
	customer, key := uuid.NewString(), uuid.NewString()
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	good := func() {
		e := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer, KeyID: key,
			Provider: "p", Model: "m", Status: usage.StatusOK, UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 1}}
		if err := pub.Publish(ctx, &e); err != nil {
			t.Fatal(err)
		}
	}
	good()
	if _, err := js.Publish(ctx, meter.DefaultSubject, []byte(`{"v":99}`)); err != nil {
		t.Fatal(err)
	}
	good()
	waitUsage(t, store, customer, 2)
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if letters := waitLetters(t, ctx, dlq, 1); len(letters) != 1 || letters[0].Data != `{"v":99}` {
		t.Fatalf("dead letters %+v, want the poison", letters)
	}
}

// TestEventTimeIsBoundedInUTC: Validate bounded an event's year in the
// time's own offset, so "9999-12-31T23:00:00-05:00" (10000-01-01T04:00Z)
// passed, and was stored; from then on the customer's request log could
// not be encoded (encoding/json refuses years beyond 9999), the API
// answering 500 for every page holding it. And an event of 9999 UTC was
// charged but listed by no request log, usage query or export, which all
// end at 9999 (as the admin API's times do). Such events are set aside
// with the reason; the customer's log stays readable and complete.
func TestEventTimeIsBoundedInUTC(t *testing.T) {
	ctx, store, js := meteredWorker(t)
	customer, key := uuid.NewString(), uuid.NewString()
	raw := func(at string) []byte {
		return fmt.Appendf(nil, `{"v":1,"id":%q,"time":%q,"customer_id":%q,"key_id":%q,"provider":"p","model":"m",`+
			`"endpoint":"/v1/chat/completions","stream":true,"status":"ok","http_status":200,"usage":{"prompt_tokens":1},"usage_source":"upstream"}`,
			uuid.NewString(), at, customer, key)
	}
	far := raw("9999-12-31T23:00:00-05:00")
	for _, m := range [][]byte{far, raw("2000-01-01T00:30:00+01:00"), raw("9999-06-01T00:00:00Z"), raw(time.Now().UTC().Format(time.RFC3339Nano))} {
		if _, err := js.Publish(ctx, meter.DefaultSubject, m); err != nil {
			t.Fatal(err)
		}
	}
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	letters := waitLetters(t, ctx, dlq, 3)
	if len(letters) != 3 || letters[0].Data != string(far) || !strings.Contains(letters[0].Reason, "out of range") {
		t.Fatalf("dead letters %+v; want the events outside the years 2000-9998 UTC, with the reason", letters)
	}
	waitUsage(t, store, customer, 1)
	page, err := store.Requests(ctx, ledger.RequestQuery{CustomerID: customer})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(page); err != nil || len(page.Data) != 1 {
		t.Fatalf("the customer's request log: %d events, %v; want the one stored, readable", len(page.Data), err)
	}
}

// TestDeadLetterOfAnOutsizedMessageIDIsKept: a message whose Nats-Msg-Id
// (copied into the dead letter's Tollgate-Event-Id) and data together
// passed the server's max_payload could never be set aside: setAside
// retried it forever in the decode stage, and no event behind it reached
// the ledger.
func TestDeadLetterOfAnOutsizedMessageIDIsKept(t *testing.T) {
	ctx, store, js := meteredWorker(t)
	// The longest message id JetStream takes (its headers are at most 64 KiB).
	msg := nats.NewMsg(meter.DefaultSubject)
	msg.Data = []byte("xxx not an event")
	for n := 64 << 10; ; n-- {
		msg.Header.Set(nats.MsgIdHdr, strings.Repeat("i", n))
		if _, err := js.PublishMsg(ctx, msg); err == nil {
			break
		}
	}
	customer := uuid.NewString()
	e := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer, KeyID: uuid.NewString(),
		Provider: "p", Model: "m", Status: usage.StatusOK, UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 1}}
	if err := meter.NewPublisher(js, meter.StreamConfig{}, 0).Publish(ctx, &e); err != nil {
		t.Fatal(err)
	}
	waitUsage(t, store, customer, 1)
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if letters := waitLetters(t, ctx, dlq, 1); len(letters) != 1 || !strings.HasPrefix(letters[0].Data, "xxx") {
		t.Fatalf("%d dead letters; want the outsized message", len(letters))
	}
}

// TestReplayKeepsTheEventID: a dead letter replayed went back to the usage
// stream with the Nats-Msg-Id "<event id>-replay-<seq>"; set aside again
// (the cause not fixed yet), its dead letter named that as its event id,
// and each replay added a suffix, so the operator's list no longer showed
// which event it was. And a replay of an event the ledger holds already
// (set aside when the ledger could not be asked) charges nothing again.
func TestReplayKeepsTheEventID(t *testing.T) {
	ctx, store, js := meteredWorker(t)
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	customer := uuid.NewString()
	billed := usage.Event{Version: 1, ID: uuid.NewString(), Time: time.Now(), CustomerID: customer, KeyID: uuid.NewString(),
		Provider: "p", Model: "m", Status: usage.StatusOK, UsageSource: usage.SourceUpstream, Usage: usage.Tokens{PromptTokens: 5}}
	if n, err := store.WriteEvents(ctx, []usage.Event{billed}); err != nil || n != 1 {
		t.Fatalf("WriteEvents = %d, %v", n, err)
	}
	data, err := json.Marshal(billed)
	if err != nil {
		t.Fatal(err)
	}
	// Set aside by a worker that could not ask the ledger (TestMaxDeliverCheckDoesNotStallTheBatch).
	letter := nats.NewMsg(meter.DLQSubject)
	letter.Data = data
	letter.Header.Set(meter.HeaderReason, "delivered 21 times without being written")
	letter.Header.Set("Tollgate-Event-Id", billed.ID)
	if _, err := js.PublishMsg(ctx, letter); err != nil {
		t.Fatal(err)
	}
	poisonID := uuid.NewString()
	poison := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	if err := poison.PublishData(ctx, poisonID, []byte(`{"v":99}`)); err != nil {
		t.Fatal(err)
	}
	letters := waitLetters(t, ctx, dlq, 2)
	if len(letters) != 2 || letters[1].EventID != poisonID {
		t.Fatalf("dead letters %+v; want the billed event's and the poison's", letters)
	}
	for round := range 2 {
		if n, err := dlq.Replay(ctx, nil); err != nil || n != len(letters) {
			t.Fatalf("replay %d = %d, %v", round, n, err)
		}
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if letters, err = dlq.List(ctx, 0, 10); err == nil && len(letters) == 1 {
				break
			}
		}
		if len(letters) != 1 || letters[0].EventID != poisonID {
			t.Fatalf("after replay %d: dead letters %+v; want the poison alone, as event %s", round, letters, poisonID)
		}
	}
	if row := waitUsage(t, store, customer, 1); row.PromptTokens != 5 {
		t.Fatalf("usage %+v; want the billed event once", row)
	}
}

// lostAck is a delivered message whose acknowledgment never reaches
// JetStream (the worker crashed right after the dead letter's PubAck).
// fetchPoison makes a worker of cfg on js (its consumer made), publishes
// one poison message ({"v":99}, an event of a version no worker reads) and
// fetches it from the worker's consumer as the worker would: the worker,
// its consumer and the batch holding the message.
func fetchPoison(t *testing.T, ctx context.Context, js jetstream.JetStream, store meter.Store, cfg meter.WorkerConfig) (*meter.Worker, jetstream.Consumer, jetstream.MessageBatch) {
	t.Helper()
	w, err := meter.NewWorker(ctx, js, store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, meter.DefaultSubject, []byte(`{"v":99}`)); err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, meter.DefaultStreamName, "tollgate-meter")
	if err != nil {
		t.Fatal(err)
	}
	b, err := cons.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return w, cons, b
}

type lostAck struct{ jetstream.Msg }

func (lostAck) Ack() error { return nil }

// TestPoisonRedeliveredIsSetAsideOnce: a poison message set aside whose
// acknowledgment was lost is delivered again, to another worker; the
// dead-letter stream still holds it once.
func TestPoisonRedeliveredIsSetAsideOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	cfg := meter.WorkerConfig{AckWait: time.Second}
	first, cons, b := fetchPoison(t, ctx, js, store, cfg)
	for m := range b.Messages() {
		meter.SetAside(first, ctx, lostAck{m}, "undecodable (the first worker)")
	}
	metertest.StartWorker(t, ctx, js, store, cfg) // gets the redelivery once the ack wait is out
	letters := deadLettersOnceDrained(t, ctx, js, cons)
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.AckFloor.Stream != 1 { // the first delivery's ack was lost: only the redelivery's moves it
		t.Fatalf("the poison's redelivery was not acknowledged: ack floor %+v", info.AckFloor)
	}
	if len(letters) != 1 {
		t.Fatalf("dead letters %+v; want the poison once", letters)
	}
}

// TestListingDeadLettersSkipsTheReplayed: List asked JetStream for every
// sequence between the dead-letter stream's first and last, one request
// each, the replayed (deleted) ones too: one old letter left behind a
// large replayed backlog made every `tollgate dlq list`, console page and
// replay walk the whole backlog again, a request per letter ever set
// aside. It now asks for the next letter present each time.
func TestListingDeadLettersSkipsTheReplayed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js := metertest.NewStream(t)
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const replayed = 500
	for i := range replayed + 2 {
		if _, err := js.Publish(ctx, meter.DLQSubject, fmt.Appendf(nil, "letter %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	s, err := js.Stream(ctx, meter.DLQStream)
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(2); seq <= replayed+1; seq++ { // as a replay removes them
		if err := s.DeleteMsg(ctx, seq); err != nil {
			t.Fatal(err)
		}
	}
	before, err := js.AccountInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	letters, err := dlq.List(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	after, err := js.AccountInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(letters) != 2 || letters[0].Data != "letter 0" || letters[1].Data != fmt.Sprintf("letter %d", replayed+1) {
		t.Fatalf("letters %+v; want the first and the last", letters)
	}
	// The account's API request count, this List's and the AccountInfo's.
	if calls := after.API.Total - before.API.Total; calls > 10 {
		t.Fatalf("listing 2 dead letters took %d JetStream API requests; want a few, not one per replayed letter", calls)
	}
}

// TestReplayAfterTheDeadLetterStreamIsMadeAgain: a replay's message id was
// "<event id>-replay-<dead-letter sequence>". A dead-letter stream made
// again (deleted by hand, then made by the next dead letter) numbers its
// letters from 1 again, so a letter of the same event replayed within the
// usage stream's duplicate window of an earlier replay had that earlier
// replay's id: JetStream dropped it as a resend, Replay counted it
// replayed and removed the letter, and the event was in neither the
// ledger nor the dead-letter stream.
func TestReplayAfterTheDeadLetterStreamIsMadeAgain(t *testing.T) {
	ctx, _, js := meteredWorker(t)
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.NewString()
	poison := func(body string) {
		msg := nats.NewMsg(meter.DefaultSubject)
		msg.Data = []byte(body)
		msg.Header.Set(meter.HeaderEventID, id)
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	poison(`{"v":99,"first":true}`)
	if letters := waitLetters(t, ctx, dlq, 1); len(letters) != 1 || letters[0].Seq != 1 {
		t.Fatalf("dead letters %+v", letters)
	}
	if n, err := dlq.Replay(ctx, []uint64{1}); err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v", n, err)
	}
	waitLetters(t, ctx, dlq, 1) // set aside again, as the cause is not fixed
	if err := js.DeleteStream(ctx, meter.DLQStream); err != nil {
		t.Fatal(err)
	}
	poison(`{"v":99,"second":true}`) // the same event's id again, into a DLQ made again
	letters := waitLetters(t, ctx, dlq, 1)
	if len(letters) != 1 || letters[0].Seq != 1 {
		t.Fatalf("dead letters %+v; want one at sequence 1 of the stream made again", letters)
	}
	if n, err := dlq.Replay(ctx, []uint64{1}); err != nil || n != 1 {
		t.Fatalf("Replay = %d, %v", n, err)
	}
	// Not fixed, so set aside once more: it must not have vanished.
	if letters := waitLetters(t, ctx, dlq, 1); len(letters) != 1 || letters[0].Data != `{"v":99,"second":true}` {
		t.Fatalf("after the replay, dead letters %+v: the replayed event is in neither the ledger nor the dead-letter stream", letters)
	}
}

// TestDeadLettersOfADeletedStream: with the dead-letter stream deleted by
// hand (it is made again by the next dead letter), `tollgate dlq list` and
// `dlq replay` answered 500 "internal error" from NATS' "stream not
// found". No stream holds no dead letters: the list is empty, a replay of
// all replays none, and a replay of a sequence is that letter not found.
func TestDeadLettersOfADeletedStream(t *testing.T) {
	ctx := context.Background()
	js := metertest.NewStream(t)
	dlq, err := meter.EnsureDLQ(ctx, js, meter.StreamConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(ctx, meter.DLQStream); err != nil {
		t.Fatal(err)
	}
	if letters, err := dlq.List(ctx, 0, 100); err != nil || len(letters) != 0 {
		t.Errorf("List = %+v, %v; want none, no error", letters, err)
	}
	if n, err := dlq.Replay(ctx, nil); err != nil || n != 0 {
		t.Errorf("Replay(all) = %d, %v; want 0, no error", n, err)
	}
	var nf *meter.NoDeadLetterError
	if _, err := dlq.Replay(ctx, []uint64{3}); !errors.As(err, &nf) || nf.Seq != 3 {
		t.Errorf("Replay(3) = %v; want dead letter 3 not found", err)
	}
	// A first `tollgate dlq replay --seq 3` (the README's example) on a
	// stream without that letter must say why and what to run, not only
	// "dead letter 3 not found".
	if _, err := dlq.Replay(ctx, []uint64{3}); err == nil || !strings.Contains(err.Error(), "replayed or removed already") ||
		!strings.Contains(err.Error(), "tollgate dlq list") {
		t.Errorf("Replay(3) = %v; want it to say the letter may be gone already and how to list those held", err)
	}
}

// meteredWorker is a usage stream of the test's own and a worker writing
// it to a ledger of its own, with the default configuration, until the
// test ends (ctx).
func meteredWorker(t *testing.T) (context.Context, *ledger.Store, jetstream.JetStream) {
	t.Helper()
	ctx := t.Context()
	store := ledgertest.NewStore(t)
	js := metertest.NewStream(t)
	metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{})
	return ctx, store, js
}
