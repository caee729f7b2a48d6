package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// contract checks real answers of the admin and customer APIs against
// openapi.json, as a client generated from it reads them: each status
// must be one the operation documents, and each body (JSON, or each line
// of an application/x-ndjson answer) must fit the schema documented for
// that status. cmd/tollgate's TestOpenAPIConformance drives each operation
// once on the whole stack; these tests drive their edges (errors, nulls,
// other currencies, every grouping) on the API alone.
type contract struct {
	t      *testing.T
	doc    *openapi3.T
	router routers.Router
	opts   *openapi3filter.Options
}

func newContract(t *testing.T) *contract {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatal(err)
	}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &contract{t: t, doc: doc, router: r, opts: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true,
		AuthenticationFunc: func(context.Context, *openapi3filter.AuthenticationInput) error { return nil }}}
}

// check sends a request (with Authorization: Bearer auth when auth is not
// empty, and hdr's name, value pairs), fails the test unless its answer
// has status want and fits the document, and returns the answer's body.
func (c *contract) check(method, url, auth, body string, want int, hdr ...string) []byte {
	t := c.t
	t.Helper()
	newReq := func() *http.Request {
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		return req
	}
	resp, err := http.DefaultClient.Do(newReq())
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	what := method + " " + strings.TrimPrefix(strings.TrimPrefix(url, "http://"), resp.Request.URL.Host) + " " + body
	if resp.StatusCode != want {
		t.Errorf("%s = %d %s, want %d", what, resp.StatusCode, b, want)
	}
	req := newReq()
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		t.Errorf("%s: not an operation of openapi.json: %v", what, err)
		return b
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: c.opts}
	ct := resp.Header.Get("Content-Type")
	if strings.HasPrefix(ct, "application/x-ndjson") {
		c.checkLines(what, route, resp.StatusCode, ct, b)
		return b
	}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(b)), Options: c.opts})
	if err != nil {
		t.Errorf("%s: the %d answer breaks openapi.json: %v\n%s", what, resp.StatusCode, err, b)
	}
	return b
}

// checkLines checks each line of an application/x-ndjson answer against
// the schema the operation documents for it (kin-openapi decodes no
// ndjson itself).
func (c *contract) checkLines(what string, route *routers.Route, status int, ct string, body []byte) {
	c.t.Helper()
	r := route.Operation.Responses.Status(status)
	var mt *openapi3.MediaType
	if r != nil && r.Value != nil {
		mt = r.Value.Content.Get(ct)
	}
	if mt == nil || mt.Schema == nil {
		c.t.Errorf("%s: openapi.json documents no %s answer with status %d", what, ct, status)
		return
	}
	lines := bufio.NewScanner(bytes.NewReader(body))
	for lines.Scan() {
		var v any
		if err := json.Unmarshal(lines.Bytes(), &v); err != nil {
			c.t.Errorf("%s: a line that is not JSON: %v: %s", what, err, lines.Bytes())
			continue
		}
		if err := mt.Schema.Value.VisitJSON(v, openapi3.MultiErrors()); err != nil {
			c.t.Errorf("%s: a line breaks openapi.json: %v\n%s", what, err, lines.Bytes())
		}
	}
}

// TestOpenAPIEdgeAnswers drives every operation of the admin and customer
// APIs but the dead-letter ones (cmd/tollgate's test has NATS for them)
// at its edges, and checks each answer against openapi.json: customers
// with and without a credit limit, a JPY customer with a discount, events
// of every status and usage source, unpriced usage, refunds and reversals,
// every grouping, pages, the CSV and ndjson answers, and the errors of
// invalid input, unknown ids, conflicts and bad credentials.
func TestOpenAPIEdgeAnswers(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := newContract(t)
	adm := func(method, path, body string, want int) []byte {
		t.Helper()
		return c.check(method, s.admin+path, adminToken, body, want)
	}
	jpy, jpyKey, _ := s.customer(`{"name":"jpy","currency":"JPY","credit_limit":"1000"}`)
	usd, usdKey, usdSecret := s.customer(`{"name":"usd"}`)
	self := func(path string, want int) []byte {
		t.Helper()
		return c.check("GET", s.llm+path, usdSecret, "", want)
	}
	unknown := "00000000-0000-4000-8000-000000000000"

	// Prices and overrides.
	adm("POST", "/admin/v1/prices", `{"model":"m","currency":"USD","input":"1","output":"3","request_fee":"0.5","effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated)
	adm("POST", "/admin/v1/prices", `{"model":"m","currency":"USD","input":"1","output":"3","effective_from":"2026-01-01T00:00:00Z"}`, http.StatusConflict)
	adm("POST", "/admin/v1/prices", `{"model":"r","currency":"USD","input":"1","output":"1","reasoning":"0","effective_from":"2026-01-01T00:00:00Z","effective_to":"2030-01-01T00:00:00Z"}`, http.StatusCreated)
	adm("POST", "/admin/v1/prices", `{"model":"r","currency":"USD","input":"1","output":"1","effective_from":"2026-01-01T00:00:00Z","effective_to":"2025-01-01T00:00:00Z"}`, http.StatusBadRequest)
	adm("POST", "/admin/v1/prices", `{"model":"r","currency":"USD","input":"1","output":"1"}`, http.StatusBadRequest)
	adm("GET", "/admin/v1/prices?model=r", "", http.StatusOK)
	adm("POST", "/admin/v1/customers/"+jpy+"/overrides", `{"model":"m","price":{"currency":"JPY","input":"100","output":"300","reasoning":"400","request_fee":"1","web_search":"2"},"effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated)
	adm("POST", "/admin/v1/customers/"+jpy+"/overrides", `{"discount_percent":"33.33","effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated)
	adm("POST", "/admin/v1/customers/"+jpy+"/overrides", `{"discount_percent":"0","effective_from":"2026-02-01T00:00:00Z"}`, http.StatusCreated)
	adm("POST", "/admin/v1/customers/"+jpy+"/overrides", `{"discount_percent":"101","effective_from":"2026-03-01T00:00:00Z"}`, http.StatusBadRequest)
	adm("POST", "/admin/v1/customers/"+jpy+"/overrides", `{"model":"m","discount_percent":"5","price":{"currency":"JPY","input":"1","output":"2"},"effective_from":"2026-05-01T00:00:00Z"}`, http.StatusBadRequest)
	adm("POST", "/admin/v1/customers/"+unknown+"/overrides", `{"discount_percent":"5","effective_from":"2026-05-01T00:00:00Z"}`, http.StatusNotFound)
	adm("GET", "/admin/v1/customers/"+jpy+"/overrides", "", http.StatusOK)

	// Events: priced, discounted, unpriced, failed.
	at := time.Now().UTC().Add(-2 * time.Hour).Truncate(time.Second)
	priced := event(jpy, jpyKey, "m", at, usage.Tokens{PromptTokens: 1234, CachedTokens: 10, CompletionTokens: 77, ReasoningTokens: 5, WebSearchRequests: 1})
	priced.EndUser, priced.Metadata, priced.Deployment, priced.Attempt = "alice", map[string]string{"team": "x"}, "d1", 2
	priced.ServedModel, priced.FinishReason, priced.TTFTMillis, priced.DurationMillis = "m-2026", "stop", 12, 340
	crashed := event(jpy, jpyKey, "unpriced", at, usage.Tokens{PromptTokens: 5})
	crashed.Status, crashed.UsageSource, crashed.Error, crashed.HTTPStatus = usage.StatusCrashed, usage.SourceEstimated, "boom", 0
	cancelled := event(usd, usdKey, "m", at, usage.Tokens{PromptTokens: 100})
	cancelled.Status, cancelled.UsageSource, cancelled.HTTPStatus = usage.StatusClientCancelled, usage.SourcePartial, 499
	s.write(priced, crashed, cancelled)

	// Customers.
	adm("POST", "/admin/v1/customers", `{"name":"x","currency":"ZZZ"}`, http.StatusBadRequest)
	adm("POST", "/admin/v1/customers", `{"name":"x","credit_limit":5}`, http.StatusBadRequest)
	adm("POST", "/admin/v1/customers", `{"name":"x","credit_limit":"1e3"}`, http.StatusBadRequest)
	adm("POST", "/admin/v1/customers", `{"name":"x","credit_limit":"0.0000001"}`, http.StatusBadRequest)
	adm("POST", "/admin/v1/customers", `{"name":"x","Name":"y"}`, http.StatusBadRequest)
	adm("POST", "/admin/v1/customers", `{"name":"`+strings.Repeat("n", 257)+`"}`, http.StatusBadRequest)
	adm("POST", "/admin/v1/customers", `{"name":"prepaid","credit_limit":"0"}`, http.StatusCreated)
	adm("POST", "/admin/v1/customers", `{"name":"postpaid","credit_limit":null}`, http.StatusCreated)
	adm("POST", "/admin/v1/customers", `[]`, http.StatusBadRequest)
	adm("POST", "/admin/v1/customers", `{`, http.StatusBadRequest)
	adm("POST", "/admin/v1/customers", ``, http.StatusBadRequest)
	adm("GET", "/admin/v1/customers?limit=1", "", http.StatusOK)
	adm("GET", "/admin/v1/customers?limit=0", "", http.StatusBadRequest)
	adm("GET", "/admin/v1/customers?cursor=garbage", "", http.StatusBadRequest)
	adm("GET", "/admin/v1/customers?q=us", "", http.StatusOK)
	adm("GET", "/admin/v1/customers?nme=usd", "", http.StatusBadRequest)
	adm("GET", "/admin/v1/customers/"+strings.ToUpper(jpy), "", http.StatusOK)
	adm("GET", "/admin/v1/customers/nope", "", http.StatusBadRequest)
	adm("PATCH", "/admin/v1/customers/"+jpy, `{}`, http.StatusBadRequest)
	adm("PATCH", "/admin/v1/customers/"+usd, `{"credit_limit":"10.5"}`, http.StatusOK)
	adm("PATCH", "/admin/v1/customers/"+usd, `{"credit_limit":null}`, http.StatusOK)
	adm("PATCH", "/admin/v1/customers/"+unknown, `{"name":"z"}`, http.StatusNotFound)

	// Keys.
	limited := c.check("POST", s.admin+"/admin/v1/customers/"+jpy+"/keys", adminToken, `{"name":"lim","daily_limit":"1.5","monthly_limit":null,"rpm_limit":null,
		"expires_at":null,"allowed_models":[]}`, http.StatusCreated)
	var k struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(limited, &k); err != nil {
		t.Fatal(err)
	}
	adm("POST", "/admin/v1/customers/"+jpy+"/keys", `{"name":"k","rpm_limit":0}`, http.StatusBadRequest)
	adm("POST", "/admin/v1/customers/"+jpy+"/keys", `{"name":"k","expires_at":"2020-01-01T00:00:00Z"}`, http.StatusBadRequest)
	adm("POST", "/admin/v1/customers/"+jpy+"/keys", `{"name":" "}`, http.StatusBadRequest)
	adm("GET", "/admin/v1/customers/"+jpy+"/keys?limit=1", "", http.StatusOK)
	adm("GET", "/admin/v1/customers/"+jpy+"/keys?cursor=zz", "", http.StatusBadRequest)
	adm("GET", "/admin/v1/customers/"+unknown+"/keys", "", http.StatusNotFound)
	adm("GET", "/admin/v1/keys/"+k.ID, "", http.StatusOK)             // a limited key: with its spend
	adm("GET", "/admin/v1/customers/"+jpy+"/keys", "", http.StatusOK) // both keys, one with its spend
	adm("PATCH", "/admin/v1/keys/"+k.ID, `{"allowed_models":["m","openai/*"],"tpm_limit":1000,"max_concurrent":2}`, http.StatusOK)
	adm("PATCH", "/admin/v1/keys/"+k.ID, `{"allowed_models":null,"daily_limit":null,"tpm_limit":null,"max_concurrent":null}`, http.StatusOK)
	adm("PATCH", "/admin/v1/keys/"+k.ID, `{"daily_limit":"-1"}`, http.StatusBadRequest)
	adm("POST", "/admin/v1/keys/"+k.ID+"/revoke", "", http.StatusOK)
	adm("POST", "/admin/v1/keys/"+k.ID+"/revoke", "", http.StatusConflict)
	adm("GET", "/admin/v1/keys/"+k.ID, "", http.StatusOK)
	adm("GET", "/admin/v1/keys/"+unknown, "", http.StatusNotFound)

	// Entries, refunds, reversals, balances.
	adm("POST", "/admin/v1/events/"+priced.ID+"/refund", `{"memo":"goodwill"}`, http.StatusCreated)
	adm("POST", "/admin/v1/events/"+priced.ID+"/refund", ``, http.StatusCreated)
	adm("POST", "/admin/v1/events/"+crashed.ID+"/refund", ``, http.StatusConflict)
	adm("POST", "/admin/v1/events/"+priced.ID+"/refund", `{"idempotency_key":"x"}`, http.StatusBadRequest)
	adm("POST", "/admin/v1/customers/"+jpy+"/credits", `{"amount":"0"}`, http.StatusBadRequest)
	adm("POST", "/admin/v1/customers/"+jpy+"/credits", `{"amount":"5","effective_at":"2099-01-01T00:00:00Z"}`, http.StatusBadRequest)
	adm("POST", "/admin/v1/customers/"+jpy+"/credits", `{"amount":"5","idempotency_key":"refund:x"}`, http.StatusBadRequest)
	adm("POST", "/admin/v1/customers/"+jpy+"/credits", `{"amount":"5","idempotency_key":"k1","effective_at":"2026-01-01T00:00:00Z"}`, http.StatusCreated)
	adm("POST", "/admin/v1/customers/"+jpy+"/credits", `{"amount":"6","idempotency_key":"k1"}`, http.StatusConflict)
	adm("POST", "/admin/v1/customers/"+jpy+"/adjustments", `{"amount":"0"}`, http.StatusBadRequest)
	adm("POST", "/admin/v1/customers/"+jpy+"/adjustments", `{"amount":"-0.000001","memo":"=tiny","allow_sub_minor":true}`, http.StatusCreated)
	adm("POST", "/admin/v1/customers/"+unknown+"/adjustments", `{"amount":"1"}`, http.StatusNotFound)
	adm("POST", "/admin/v1/entries/1/reverse", ``, http.StatusCreated)
	adm("POST", "/admin/v1/entries/1/reverse", `{"memo":"again"}`, http.StatusCreated)
	adm("POST", "/admin/v1/entries/0/reverse", ``, http.StatusBadRequest)
	adm("POST", "/admin/v1/entries/99999999999999999999/reverse", ``, http.StatusBadRequest)
	adm("POST", "/admin/v1/entries/9223372036854775807/reverse", ``, http.StatusNotFound)
	adm("GET", "/admin/v1/customers/"+jpy+"/entries", "", http.StatusOK)
	adm("GET", "/admin/v1/customers/"+jpy+"/entries?limit=1", "", http.StatusOK)
	adm("GET", "/admin/v1/customers/"+jpy+"/entries?from=2026-01-01&to=2026-01-01", "", http.StatusBadRequest)
	adm("GET", "/admin/v1/customers/"+jpy+"/balance", "", http.StatusOK)
	adm("GET", "/admin/v1/customers/"+usd+"/balance", "", http.StatusOK)
	adm("GET", "/admin/v1/customers/"+unknown+"/balance", "", http.StatusNotFound)

	// Events, usage, statements, exports, reconciliation, re-rating.
	for _, e := range []string{priced.ID, crashed.ID, cancelled.ID} {
		adm("GET", "/admin/v1/events/"+e, "", http.StatusOK)
	}
	adm("GET", "/admin/v1/events/"+unknown, "", http.StatusNotFound)
	for _, g := range []string{"", "model", "key", "customer", "hour", "day", "month", "end_user", "deployment", "provider"} {
		adm("GET", "/admin/v1/usage?group_by="+g, "", http.StatusOK)
		adm("GET", "/admin/v1/usage?limit=1&customer_id="+jpy+"&group_by="+g, "", http.StatusOK)
	}
	adm("GET", "/admin/v1/usage?group_by=week", "", http.StatusBadRequest)
	adm("GET", "/admin/v1/usage?from=2026-01-01T00:30:00Z", "", http.StatusBadRequest)
	period := at.Format("2006-01")
	for _, id := range []string{jpy, usd} {
		adm("GET", "/admin/v1/customers/"+id+"/statements/"+period, "", http.StatusOK)
		adm("GET", "/admin/v1/customers/"+id+"/statements/"+period+"?format=csv", "", http.StatusOK)
	}
	adm("GET", "/admin/v1/customers/"+jpy+"/statements/1999-01", "", http.StatusOK)
	adm("GET", "/admin/v1/customers/"+jpy+"/statements/9999-12", "", http.StatusBadRequest)
	adm("GET", "/admin/v1/customers/"+jpy+"/statements/"+period+"?format=xml", "", http.StatusBadRequest)
	adm("GET", "/admin/v1/customers/"+unknown+"/statements/"+period, "", http.StatusNotFound)
	adm("GET", "/admin/v1/export?from=2026-01-01&to=2099-01-01", "", http.StatusOK)
	adm("GET", "/admin/v1/export?from=2026-01-01", "", http.StatusBadRequest)
	adm("GET", "/admin/v1/reconciliation?from=2026-01-01&to=2099-01-01", "", http.StatusOK)
	adm("GET", "/admin/v1/reconciliation", "", http.StatusBadRequest)
	adm("POST", "/admin/v1/rerate", `{"from":"2026-01-01","to":"2099-01-01"}`, http.StatusOK)
	c.check("POST", s.admin+"/admin/v1/rerate", adminToken, `{"from":"2026-01-01","to":"2099-01-01"}`, http.StatusOK, "Accept", "application/x-ndjson")
	adm("POST", "/admin/v1/rerate", `{"from":"2099-01-01","to":"2026-01-01"}`, http.StatusBadRequest)
	adm("POST", "/admin/v1/rerate", ``, http.StatusBadRequest)
	adm("GET", "/admin/v1/dlq", "", http.StatusServiceUnavailable) // no NATS here
	c.check("GET", s.admin+"/admin/v1/customers", "", "", http.StatusUnauthorized)
	c.check("GET", s.admin+"/admin/v1/customers", "wrong", "", http.StatusUnauthorized)

	// The customer API.
	self("/v1/usage", http.StatusOK)
	for _, g := range []string{"model", "key", "hour", "day", "month", "end_user"} {
		self("/v1/usage?limit=1&group_by="+g, http.StatusOK)
	}
	self("/v1/usage?group_by=week", http.StatusBadRequest)
	self("/v1/usage?customer_id="+jpy, http.StatusBadRequest)
	self("/v1/usage?key_id="+jpyKey, http.StatusOK)
	self("/v1/usage?from=bad", http.StatusBadRequest)
	self("/v1/usage?bogus=1", http.StatusBadRequest)
	self("/v1/usage?from=2026-01-01%", http.StatusBadRequest)
	self("/v1/balance", http.StatusOK)
	self("/v1/requests", http.StatusOK)
	self("/v1/requests?limit=1&model=m&end_user=nobody", http.StatusOK)
	self("/v1/requests?cursor=bad", http.StatusBadRequest)
	self("/v1/requests/"+cancelled.ID, http.StatusOK)
	self("/v1/requests/"+priced.ID, http.StatusNotFound) // another customer's
	self("/v1/requests/nope", http.StatusBadRequest)
	self("/v1/statements/"+period, http.StatusOK)
	self("/v1/statements/"+period+"?format=csv", http.StatusOK)
	self("/v1/statements/2026-13", http.StatusBadRequest)
	c.check("GET", s.llm+"/v1/balance", "", "", http.StatusUnauthorized)
	c.check("GET", s.llm+"/v1/requests/"+cancelled.ID, "tg-not-a-key", "", http.StatusUnauthorized)
}

// TestOpenAPIDatabaseDownAnswers: with the ledger database down, every
// admin operation that reads or writes it answers 503 unavailable (README:
// "unavailable 503 (the ledger database not answering: retry once it is
// back)"), but openapi.json documented 503 only on the export and the
// dead-letter operations: a client generated from it met a status its
// operation does not have on 24 operations, and could not tell "retry" from
// a bug.
func TestOpenAPIDatabaseDownAnswers(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := newContract(t)
	cust, keyID, _ := s.customer(`{"name":"down"}`)
	ev := event(cust, keyID, "m", time.Now().UTC().Add(-time.Hour), usage.Tokens{PromptTokens: 10})
	s.write(ev)
	ledgertest.RefuseConnections(t, s.dbURL)
	for _, op := range []struct{ method, path, body string }{
		{"POST", "/admin/v1/customers", `{"name":"x"}`},
		{"GET", "/admin/v1/customers", ``},
		{"GET", "/admin/v1/customers/" + cust, ``},
		{"PATCH", "/admin/v1/customers/" + cust, `{"name":"y"}`},
		{"POST", "/admin/v1/customers/" + cust + "/keys", `{"name":"y"}`},
		{"GET", "/admin/v1/customers/" + cust + "/keys", ``},
		{"GET", "/admin/v1/keys/" + keyID, ``},
		{"PATCH", "/admin/v1/keys/" + keyID, `{"name":"z"}`},
		{"POST", "/admin/v1/keys/" + keyID + "/revoke", ``},
		{"POST", "/admin/v1/prices", `{"model":"m","currency":"USD","input":"1","output":"1","effective_from":"2026-01-01T00:00:00Z"}`},
		{"GET", "/admin/v1/prices", ``},
		{"POST", "/admin/v1/customers/" + cust + "/overrides", `{"discount_percent":"5","effective_from":"2026-01-01T00:00:00Z"}`},
		{"GET", "/admin/v1/customers/" + cust + "/overrides", ``},
		{"POST", "/admin/v1/customers/" + cust + "/credits", `{"amount":"5"}`},
		{"POST", "/admin/v1/customers/" + cust + "/adjustments", `{"amount":"5"}`},
		{"GET", "/admin/v1/customers/" + cust + "/entries", ``},
		{"POST", "/admin/v1/entries/1/reverse", ``},
		{"POST", "/admin/v1/events/" + ev.ID + "/refund", ``},
		{"GET", "/admin/v1/customers/" + cust + "/balance", ``},
		{"GET", "/admin/v1/usage", ``},
		{"GET", "/admin/v1/events/" + ev.ID, ``},
		{"GET", "/admin/v1/customers/" + cust + "/statements/2026-01", ``},
		{"GET", "/admin/v1/export?from=2026-01-01&to=2026-02-01", ``},
		{"GET", "/admin/v1/reconciliation?from=2026-01-01&to=2026-02-01", ``},
		{"POST", "/admin/v1/rerate", `{"from":"2026-01-01","to":"2026-02-01"}`},
	} {
		c.check(op.method, s.admin+op.path, adminToken, op.body, http.StatusServiceUnavailable)
	}
}

// TestOpenAPIUsageUnknownCustomer: GET /admin/v1/usage?customer_id= of no
// customer answers 404, as its balance and statements do (usage in
// handlers.go), which openapi.json did not document for the operation.
func TestOpenAPIUsageUnknownCustomer(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := newContract(t)
	c.check("GET", s.admin+"/admin/v1/usage?customer_id=00000000-0000-4000-8000-000000000000", adminToken, "", http.StatusNotFound)
}

// TestOpenAPICustomerGroupings: every group_by value openapi.json offers
// on GET /v1/usage is one the customer API takes. It offered the admin
// API's (customer, deployment and provider too, which this API refuses
// with 400): a client generated from it, and its users, were offered
// groupings that always fail.
func TestOpenAPICustomerGroupings(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := newContract(t)
	_, _, secret := s.customer(`{"name":"groupings"}`)
	op := c.doc.Paths.Find("/v1/usage").Get
	var offered []string
	for _, p := range op.Parameters {
		if p.Value.Name == "group_by" {
			for _, v := range p.Value.Schema.Value.Enum {
				offered = append(offered, v.(string))
			}
		}
	}
	if len(offered) == 0 {
		t.Fatal("GET /v1/usage documents no group_by values")
	}
	for _, g := range offered {
		c.check("GET", s.llm+"/v1/usage?group_by="+g, secret, "", http.StatusOK)
	}
}

// TestOpenAPIKeyCountMaximums: a key made with each count limit at the
// maximum openapi.json allows (KeyCreate) is made, and patched to it
// (KeyPatch). max_concurrent was documented up to 1099511627776, as
// rpm_limit and tpm_limit are, but its column is an integer: anything above
// 2147483647 was refused with 400, so a client that checked its input
// against the document still failed.
func TestOpenAPIKeyCountMaximums(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := newContract(t)
	cust, keyID, _ := s.customer(`{"name":"maximums"}`)
	for _, schema := range []string{"KeyCreate", "KeyPatch"} {
		for _, field := range []string{"rpm_limit", "tpm_limit", "max_concurrent"} {
			max := c.doc.Components.Schemas[schema].Value.Properties[field].Value.Max
			if max == nil {
				t.Errorf("%s.%s has no maximum", schema, field)
				continue
			}
			body := fmt.Sprintf(`{"name":"k",%q:%d}`, field, int64(*max))
			if schema == "KeyCreate" {
				c.check("POST", s.admin+"/admin/v1/customers/"+cust+"/keys", adminToken, body, http.StatusCreated)
			} else {
				c.check("PATCH", s.admin+"/admin/v1/keys/"+keyID, adminToken, body, http.StatusOK)
			}
		}
	}
}

// TestAdminMethodNotAllowedEnvelope: a method a path of the admin API
// does not take is answered 405 with the API's error envelope (README:
// "Errors are {"error":{"message","type","code"}}") and the methods it
// takes in Allow. It was answered with an empty body, which the API's
// client read as an internal error ("Method Not Allowed (HTTP 405)").
func TestAdminMethodNotAllowedEnvelope(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := newContract(t)
	cust, _, _ := s.customer(`{"name":"methods"}`)
	for _, tc := range []struct{ method, path, allow string }{
		{"DELETE", "/admin/v1/customers/" + cust, "GET, PATCH"},
		{"PUT", "/admin/v1/customers", "GET, POST"},
		{"GET", "/admin/v1/rerate", "POST"},
	} {
		req, err := http.NewRequest(tc.method, s.admin+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var v any
		err = json.Unmarshal(b, &v)
		if err == nil {
			err = c.doc.Components.Schemas["Error"].Value.VisitJSON(v)
		}
		if resp.StatusCode != http.StatusMethodNotAllowed || err != nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			t.Errorf("%s %s = %d %q %s (%v), want 405 with the error envelope", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), b, err)
		}
		var allow []string
		for _, v := range resp.Header.Values("Allow") {
			for m := range strings.SplitSeq(v, ",") {
				allow = append(allow, strings.TrimSpace(m))
			}
		}
		slices.Sort(allow)
		if got := strings.Join(allow, ", "); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
		}
	}
}

// TestOpenAPIReconciliationFindings: a reconciliation that finds things
// (a rollup row and a balance changed by hand, an unpriced model) answers
// with every field in openapi.json's Reconciliation schema, which is
// closed. It documented `clean` alone, its other fields open: a client
// generated from it read none of the findings.
func TestOpenAPIReconciliationFindings(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := newServer(t)
	c := newContract(t)
	cust, keyID, _ := s.customer(`{"name":"tampered"}`)
	c.check("POST", s.admin+"/admin/v1/prices", adminToken,
		`{"model":"m","currency":"USD","input":"1","output":"3","effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated)
	at := time.Now().UTC().Add(-2 * time.Hour)
	s.write(event(cust, keyID, "m", at, usage.Tokens{PromptTokens: 1000, CompletionTokens: 10}),
		event(cust, keyID, "no-price", at, usage.Tokens{PromptTokens: 7}))
	db, err := pgx.Connect(ctx, s.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	for _, q := range []string{
		`UPDATE usage_hourly SET requests = requests + 1, cost_e12 = cost_e12 + 1e6 WHERE model = 'm'`,
		`UPDATE customer_balances SET charges_e12 = charges_e12 + 1e10`,
	} {
		if tag, err := db.Exec(ctx, q); err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("%s: %v, %d rows", q, err, tag.RowsAffected())
		}
	}
	body := c.check("GET", s.admin+"/admin/v1/reconciliation?from=2026-01-01&to=2099-01-01", adminToken, "", http.StatusOK)
	var rec struct {
		Clean               bool              `json:"clean"`
		RollupMismatches    []json.RawMessage `json:"rollup_mismatches"`
		BalanceMismatches   []json.RawMessage `json:"balance_mismatches"`
		Unpriced            []json.RawMessage `json:"unpriced"`
		RollupMismatchCount int64             `json:"rollup_mismatch_count"`
	}
	if err := json.Unmarshal(body, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Clean || len(rec.RollupMismatches) != 1 || rec.RollupMismatchCount != 1 || len(rec.BalanceMismatches) != 1 || len(rec.Unpriced) != 1 {
		t.Fatalf("reconciliation = %s; want it unclean with one rollup mismatch, one balance mismatch and one unpriced model", body)
	}
}
