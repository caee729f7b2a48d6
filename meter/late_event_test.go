package meter_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// lateObserver counts what the worker reports of events dated in a past
// month; the rest it ignores.
type lateObserver struct{ late atomic.Int64 }

func (o *lateObserver) LateEvent()                           { o.late.Add(1) }
func (o *lateObserver) Published(time.Duration, error)       {}
func (o *lateObserver) BatchWritten(int, int, time.Duration) {}
func (o *lateObserver) DeadLetter(string)                    {}
func (o *lateObserver) Redelivered()                         {}
func (o *lateObserver) ConsumerPending(uint64, uint64)       {}
func (o *lateObserver) TrimFailed()                          {}
func (o *lateObserver) EstimatesHeld(int)                    {}

// billingRig is a ledger served by the admin API (a real HTTP server over
// a fresh database) and a meter worker taking events from a real
// JetStream stream, with a customer, its key and a price for model "m"
// of 1 (input) and 2 (output) USD per million tokens from 2020.
type billingRig struct {
	t    *testing.T
	ctx  context.Context
	c    *api.Client
	url  string // the admin API's
	cust ledger.Customer
	key  api.CreatedKey
	pub  *meter.Publisher
	logs *metertest.LockedBuffer
	obs  *lateObserver
}

func newBillingRig(t *testing.T) *billingRig {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	store := ledgertest.NewStore(t)
	adm, err := api.NewAdmin(store, "rig-token", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(adm.Handler())
	t.Cleanup(srv.Close)
	r := &billingRig{t: t, ctx: ctx, c: api.NewClient(srv.URL, "rig-token", nil), url: srv.URL, logs: &metertest.LockedBuffer{}, obs: &lateObserver{}}
	if r.cust, err = r.c.CreateCustomer(ctx, ledger.CustomerInput{Name: "rig", Currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	if r.key, err = r.c.CreateKey(ctx, r.cust.ID, ledger.KeyInput{Name: "k"}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.c.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "2",
		EffectiveFrom: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	js := metertest.NewStream(t)
	metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{BatchWait: 5 * time.Millisecond, Observer: r.obs,
		Logger: slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	t.Cleanup(cancel) // before StartWorker's cleanup waits for the worker
	r.pub = meter.NewPublisher(js, meter.StreamConfig{}, 0)
	return r
}

// event is a streamed request of the rig's key to "m", begun at at and
// lasting ms milliseconds: a million prompt and a million completion
// tokens (3 USD at the rig's price).
func (r *billingRig) event(at time.Time, ms int64) usage.Event {
	return usage.Event{Version: 1, ID: uuid.NewString(), Time: at, CustomerID: r.cust.ID, KeyID: r.key.ID,
		Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions", Stream: true, Status: usage.StatusOK,
		UsageSource: usage.SourceUpstream, DurationMillis: ms, Usage: usage.Tokens{PromptTokens: 1000000, CompletionTokens: 1000000}}
}

// deliver publishes es, as a gateway (or its spool) does, and waits until
// the admin API shows each.
func (r *billingRig) deliver(es ...*usage.Event) {
	r.t.Helper()
	for _, e := range es {
		if err := r.pub.Publish(r.ctx, e); err != nil {
			r.t.Fatal(err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, e := range es {
		for {
			_, err := r.c.Event(r.ctx, e.ID)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				r.t.Fatalf("event %s not stored: %v", e.ID, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// statementTotal is the exact total of the customer's statement of
// period ("0" when it has no section).
func (r *billingRig) statementTotal(period string) string {
	r.t.Helper()
	st, err := r.c.Statement(r.ctx, r.cust.ID, period)
	if err != nil {
		r.t.Fatal(err)
	}
	if len(st.Sections) == 0 {
		return "0"
	}
	return st.Sections[0].ExactTotal
}

// TestALateEventOfAPastMonth (a finance review of time boundaries): a
// stream that began at 23:59:59.9 on a month's last day and ended after
// midnight belongs to the month it began in, in every report read through
// the admin API (statement, export, usage by hour, day and month,
// reconciliation). Delivered weeks later (a spool drained late, a
// dead letter replayed, a gateway's clock behind), it moves that month's
// statement, as docs/billing.md says ("What moves a past statement"); but
// the meter stored it with no word: no log, no metric, so a statement
// already issued moved unseen until someone re-ran its export. Now the
// meter counts such an event (Observer.LateEvent,
// tollgate_meter_late_events_total) and logs a warning naming it and its
// month; an event of the current month is neither. Reconciliation, clean,
// did not tell either: it now counts the events and entries of its range
// recorded more than an hour after their month was over (late_events,
// late_entries: here the event, and a payment dated back into the month)
// and when the last row of the range was recorded (last_recorded_at).
func TestALateEventOfAPastMonth(t *testing.T) {
	r := newBillingRig(t)
	ctx, c, cust := r.ctx, r.c, r.cust
	logs, obs := r.logs, r.obs

	// The last day of the month before last, 23:59:59.9 UTC: a month
	// over and (its statement issued) closed, whatever day the test runs.
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, -2, 0)
	next := month.AddDate(0, 1, 0)
	began := next.Add(-100 * time.Millisecond)
	late, current := r.event(began, 3000), r.event(now, 3000) // ended after midnight
	r.deliver(&late, &current)

	period, nextPeriod := month.Format("2006-01"), next.Format("2006-01")
	st, err := c.Statement(ctx, cust.ID, period)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Sections) != 1 || st.Sections[0].ExactTotal != "3" || st.Sections[0].Lines[0].Usage.Requests != 1 {
		t.Errorf("statement of %s: %+v; want the stream begun on its last day, 3 USD", period, st.Sections)
	}
	if st, err = c.Statement(ctx, cust.ID, nextPeriod); err != nil {
		t.Fatal(err)
	}
	for _, s := range st.Sections {
		if s.ExactTotal != "0" {
			t.Errorf("statement of %s charges %s: the stream that ended in it began in %s", nextPeriod, s.ExactTotal, period)
		}
	}

	var out bytes.Buffer
	if _, err := c.Export(ctx, began.Add(-time.Hour), next.Add(time.Hour), &out); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil || len(rows) != 2 {
		t.Fatalf("export of the hours around midnight: %d rows (%v); want the header and the late event", len(rows), err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	if got := rows[1][col["time"]]; got != began.Format("2006-01-02T15:04:05.000000Z") {
		t.Errorf("export dates the event %s; want %s, when it began", got, began.Format(time.RFC3339Nano))
	}
	if got, err := time.Parse(time.RFC3339Nano, rows[1][col["recorded_at"]]); err != nil || !got.After(next) {
		t.Errorf("export's recorded_at %q (%v): want after %s, the time the row moved the closed month", rows[1][col["recorded_at"]], err, next)
	}

	for _, g := range []struct{ by, want string }{
		{"hour", began.Truncate(time.Hour).Format("2006-01-02T15:00:00Z")},
		{"day", began.Format("2006-01-02")},
		{"month", period},
	} {
		rows, err := c.UsageAll(ctx, ledger.UsageQuery{CustomerID: cust.ID, From: month, To: next.AddDate(0, 0, 1), GroupBy: g.by})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].Period != g.want || rows[0].Cost != "3" {
			t.Errorf("usage by %s: %+v; want one group %s of cost 3", g.by, rows, g.want)
		}
	}
	// A payment received in that month, recorded now (dated back).
	if _, err := c.AddEntry(ctx, cust.ID, "credit", ledger.EntryInput{Amount: "5", EffectiveAt: month.AddDate(0, 0, 3)}); err != nil {
		t.Fatal(err)
	}
	// Reconciliation is clean (the ledger agrees with itself), and says
	// which rows of the range were recorded after its month was over, and
	// the last time one was: a statement or export of the month made
	// before then has changed since.
	before := time.Now().Add(-time.Second)
	req, _ := http.NewRequest("GET", r.url+"/admin/v1/reconciliation?from="+month.Format(time.RFC3339)+"&to="+next.Format(time.RFC3339), nil)
	req.Header.Set("Authorization", "Bearer rig-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Clean          bool       `json:"clean"`
		Events         int64      `json:"events"`
		LateEvents     *int64     `json:"late_events"`
		LateEntries    *int64     `json:"late_entries"`
		LastRecordedAt *time.Time `json:"last_recorded_at"`
	}
	err = json.NewDecoder(resp.Body).Decode(&rec)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Clean || rec.Events != 1 {
		t.Errorf("reconciliation of %s: clean %v, %d events; want clean, 1", period, rec.Clean, rec.Events)
	}
	if rec.LateEvents == nil || *rec.LateEvents != 1 || rec.LateEntries == nil || *rec.LateEntries != 1 ||
		rec.LastRecordedAt == nil || rec.LastRecordedAt.Before(before.Add(-time.Minute)) {
		t.Errorf("reconciliation of %s: late_events %v, late_entries %v, last_recorded_at %v; want 1, 1 and about now",
			period, rec.LateEvents, rec.LateEntries, rec.LastRecordedAt)
	}
	if rec, err := c.Reconcile(ctx, next, next.AddDate(0, 1, 0)); err != nil || rec.Events != 0 {
		t.Errorf("reconciliation of %s: %+v, %v; want no events", nextPeriod, rec, err)
	}

	if n := obs.late.Load(); n != 1 {
		t.Errorf("the worker reported %d late events; want 1, the event of %s", n, period)
	}
	text := logs.String()
	if !strings.Contains(text, late.ID) || !strings.Contains(text, "period="+period) {
		t.Errorf("the worker's logs do not name the late event %s of %s:\n%s", late.ID, period, text)
	}
	if strings.Contains(text, current.ID) {
		t.Errorf("the worker's logs name the event of the current month %s:\n%s", current.ID, text)
	}
}

// TestABackdatedPriceMovesAPastStatementOnlyWhenRerated (a finance review
// of time boundaries): a price version made through the admin API with an
// effective time in a closed month is accepted (it is how a missing price
// is added before re-rating), and moves no stored event: the month's
// statement stands until `rerate` is run over it. An event of that month
// delivered after it (a spool drained late) is rated by it, as every
// event is by the price in force at its time; re-rating then brings the
// rest to it, with a rerate entry dated at each event's time (in the
// month's statement, recorded now). A price version made while a request
// is in flight, effective after the request began, does not apply to it:
// the request is rated at its start, and re-rating leaves it so.
func TestABackdatedPriceMovesAPastStatementOnlyWhenRerated(t *testing.T) {
	r := newBillingRig(t)
	ctx, c := r.ctx, r.c
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, -2, 0)
	next, period := month.AddDate(0, 1, 0), month.Format("2006-01")
	at := month.AddDate(0, 0, 10) // the 11th, 00:00
	first := r.event(at, 2000)
	r.deliver(&first)
	if got := r.statementTotal(period); got != "3" {
		t.Fatalf("statement of %s: %s; want 3", period, got)
	}

	backdated, err := c.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "10", Output: "20",
		EffectiveFrom: at.Add(-time.Hour)})
	if err != nil {
		t.Fatalf("a price version effective in a closed month: %v", err)
	}
	if got := r.statementTotal(period); got != "3" {
		t.Errorf("statement of %s after a back-dated price: %s; want 3, as it was (no event moves until re-rated)", period, got)
	}
	second := r.event(at, 2000) // the same instant, delivered late
	r.deliver(&second)
	e1, err1 := c.Event(ctx, first.ID)
	e2, err2 := c.Event(ctx, second.ID)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if e1.Cost != "3" || e2.Cost != "30" || e2.PriceID != backdated.ID {
		t.Errorf("before re-rating: the first event costs %s, the late one %s (price %d); want 3 and 30 (price %d, in force at its time)",
			e1.Cost, e2.Cost, e2.PriceID, backdated.ID)
	}
	if got := r.statementTotal(period); got != "33" {
		t.Errorf("statement of %s with the late event: %s; want 33", period, got)
	}

	res, err := c.Rerate(ctx, month, next, nil)
	if err != nil || res.Adjusted != 1 {
		t.Fatalf("rerate %s: %+v, %v; want the first event adjusted", period, res, err)
	}
	if got := r.statementTotal(period); got != "60" {
		t.Errorf("statement of %s after re-rating: %s; want 60", period, got)
	}
	entries, err := c.Entries(ctx, r.cust.ID, month, next)
	if err != nil || len(entries) != 1 || entries[0].Kind != "rerate" || !entries[0].EffectiveAt.Equal(at) || entries[0].Amount != "-27" {
		t.Errorf("entries of %s after re-rating: %+v, %v; want one rerate entry of -27 at %s", period, entries, err, at)
	}
	if rec, err := c.Reconcile(ctx, month, next); err != nil || !rec.Clean {
		t.Errorf("reconciliation of %s: %+v, %v; want clean", period, rec, err)
	}

	// In flight: begun a second before a price version that takes effect
	// half a second later, and delivered after it was made.
	begun := time.Now().UTC().Add(-time.Second)
	inFlight := r.event(begun, 1500)
	if _, err := c.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "100", Output: "200",
		EffectiveFrom: begun.Add(500 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	r.deliver(&inFlight)
	if e, err := c.Event(ctx, inFlight.ID); err != nil || e.Cost != "30" || e.PriceID != backdated.ID {
		t.Errorf("a request in flight as a price version took effect: %+v, %v; want rated at its start, 30 by price %d", e, err, backdated.ID)
	}
	if res, err := c.Rerate(ctx, begun.Add(-time.Hour), begun.Add(time.Hour), nil); err != nil || res.Adjusted != 0 {
		t.Errorf("re-rating the request in flight: %+v, %v; want nothing adjusted", res, err)
	}
}
