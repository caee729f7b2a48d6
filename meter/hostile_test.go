package meter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// TestHostileEventsLandOrAreSetAside: valid JSON a foreign or broken
// publisher could send, in one stream. Each event lands in the ledger
// (corrected and flagged where Normalize corrects it) or in the
// dead-letter stream with a reason; none is lost or stored twice, and
// the customer's request log stays readable.
func TestHostileEventsLandOrAreSetAside(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store, url := ledgertest.NewStoreURL(t)
	js := metertest.NewStream(t)
	customer, key := uuid.NewString(), uuid.NewString() // a customer and key the ledger never made
	raw := func(id, at, usage, extra string) string {
		return fmt.Sprintf(`{"v":1,"id":%q,"time":%q,"customer_id":%q,"key_id":%q,"provider":"p","model":"m",`+
			`"endpoint":"/v1/chat/completions","stream":true,"status":"ok","http_status":200,"usage":{%s},"usage_source":"upstream"%s}`,
			id, at, customer, key, usage, extra)
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	dup := uuid.NewString()
	many := map[string]string{}
	for i := range 100 {
		many[fmt.Sprintf("k%03d-%s", i, strings.Repeat("x", 100))] = strings.Repeat("v", 1000)
	}
	manyJSON, _ := json.Marshal(many)
	stored := []string{ // each lands once
		raw(uuid.NewString(), "9998-12-31T23:59:59.999999999Z", `"prompt_tokens":1`, ""),
		raw(uuid.NewString(), "2000-01-01T00:00:00Z", `"prompt_tokens":1`, ""),
		raw(uuid.NewString(), "2026-01-31T23:59:59.9999999Z", `"prompt_tokens":1`, ""),
		raw(uuid.NewString(), now, `"prompt_tokens":9223372036854775807,"completion_tokens":-9223372036854775808`, ""),
		raw(uuid.NewString(), now, `"prompt_tokens":1`, `,"metadata":`+string(manyJSON)),
		raw(uuid.NewString(), now, `"prompt_tokens":1`, `,"end_user":"`+strings.Repeat("\\u0000\\ud800é", 300)+`"`),
		raw(dup, now, `"prompt_tokens":1`, ""),
	}
	setAside := []string{ // each set aside once, with a reason
		raw(uuid.NewString(), now, `"prompt_tokens":1e3`, ""),
		raw(uuid.NewString(), now, `"prompt_tokens":"NaN"`, ""),
		raw(uuid.NewString(), now, `"prompt_tokens":92233720368547758070`, ""),
		raw(uuid.NewString(), now, `"prompt_tokens":1`, `,"metadata":{"a":{"b":{"c":[1]}}}`),
		raw(uuid.NewString(), "1999-12-31T23:59:59Z", `"prompt_tokens":1`, ""),
		raw(uuid.NewString(), "9999-01-01T00:00:00Z", `"prompt_tokens":1`, ""),
		strings.Replace(raw(uuid.NewString(), now, `"prompt_tokens":1`, ""), `"v":1`, `"v":2`, 1),
	}
	again := []string{ // the same id again: in another case, with other figures
		raw(strings.ToUpper(dup), now, `"prompt_tokens":500`, ""),
	}
	for _, m := range append(append(append([]string{}, stored...), setAside...), again...) {
		if _, err := js.Publish(ctx, meter.DefaultSubject, []byte(m)); err != nil {
			t.Fatal(err)
		}
	}
	metertest.StartWorker(t, ctx, js, store, meter.WorkerConfig{})
	cons, err := js.Consumer(ctx, meter.DefaultStreamName, "tollgate-meter")
	if err != nil {
		t.Fatal(err)
	}
	letters := deadLettersOnceDrained(t, ctx, js, cons)
	if len(letters) != len(setAside) {
		t.Fatalf("%d dead letters, want %d: %+v", len(letters), len(setAside), letters)
	}
	for i, l := range letters {
		if l.Data != setAside[i] || l.Reason == "" {
			t.Errorf("dead letter %d: %q (%s), want %q with a reason", i, l.Data, l.Reason, setAside[i])
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var events, ids, dupPrompt int64
	if err := conn.QueryRow(ctx, `SELECT (SELECT count(*) FROM usage_events), (SELECT count(*) FROM event_ids),
		(SELECT prompt_tokens FROM usage_events WHERE id = $1)`, dup).Scan(&events, &ids, &dupPrompt); err != nil {
		t.Fatal(err)
	}
	if events != int64(len(stored)) || ids != int64(len(stored)) || dupPrompt != 1 {
		t.Fatalf("%d events, %d ids, the repeated id's prompt %d; want %d, %d, the first's 1", events, ids, dupPrompt, len(stored), len(stored))
	}
	page, err := store.Requests(ctx, ledger.RequestQuery{CustomerID: customer, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := json.Marshal(page); err != nil || len(page.Data) != len(stored) {
		t.Fatalf("request log: %d events, %v", len(page.Data), err)
	}
	rec, err := store.Reconcile(ctx, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil || !rec.Clean {
		t.Fatalf("reconciliation %+v, %v", rec, err)
	}
}
