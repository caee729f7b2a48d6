package meter_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"log/slog"
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
// month; an event of the current month is neither.
func TestALateEventOfAPastMonth(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := ledgertest.NewStore(t)
	adm, err := api.NewAdmin(store, "late-token", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(adm.Handler())
	defer srv.Close()
	c := api.NewClient(srv.URL, "late-token", nil)
	cust, err := c.CreateCustomer(ctx, ledger.CustomerInput{Name: "late", Currency: "USD"})
	if err != nil {
		t.Fatal(err)
	}
	key, err := c.CreateKey(ctx, cust.ID, ledger.KeyInput{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "2",
		EffectiveFrom: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		t.Fatal(err)
	}

	var logs metertest.LockedBuffer
	obs := &lateObserver{}
	js := metertest.NewStream(t)
	metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{BatchWait: 5 * time.Millisecond, Observer: obs,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)

	// The last day of the month before last, 23:59:59.9 UTC: a month
	// over and (its statement issued) closed, whatever day the test runs.
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, -2, 0)
	next := month.AddDate(0, 1, 0)
	began := next.Add(-100 * time.Millisecond)
	event := func(at time.Time) usage.Event {
		return usage.Event{Version: 1, ID: uuid.NewString(), Time: at, CustomerID: cust.ID, KeyID: key.ID,
			Provider: "sim", Model: "m", Endpoint: "/v1/chat/completions", Stream: true, Status: usage.StatusOK,
			UsageSource: usage.SourceUpstream, DurationMillis: 3000, // ended after midnight
			Usage: usage.Tokens{PromptTokens: 1000000, CompletionTokens: 1000000}}
	}
	late, current := event(began), event(now)
	for _, e := range []*usage.Event{&late, &current} {
		if err := pub.Publish(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err1 := c.Event(ctx, late.ID)
		_, err2 := c.Event(ctx, current.ID)
		if err1 == nil && err2 == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("events not stored: %v, %v", err1, err2)
		}
		time.Sleep(50 * time.Millisecond)
	}

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
	rec, err := c.Reconcile(ctx, month, next)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Clean || rec.Events != 1 {
		t.Errorf("reconciliation of %s: clean %v, %d events; want clean, 1", period, rec.Clean, rec.Events)
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
