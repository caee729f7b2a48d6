package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger/api"
)

// pendingOperations are operations of ledger/api/openapi.json that the
// servers do not route yet. TestOpenAPIConformance logs and skips each of
// them while it is unrouted, and validates it strictly once it is routed.
// Empty this list when they exist: every other operation of the document
// must be routed and exercised, or the test fails.
var pendingOperations = []string{}

// openAPIUndocumented are routes of the admin listener that are not part of
// the JSON API and so not in the document.
var openAPIUndocumented = map[string]bool{
	"GET /metrics": true, // Prometheus exposition
}

// loadOpenAPI loads and validates the served document.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI())
	if err != nil {
		t.Fatalf("load openapi.json: %v", err)
	}
	if err := doc.Validate(loader.Context, openapi3.EnableSchemaFormatValidation(),
		openapi3.EnableSchemaDefaultsValidation(), openapi3.EnableExamplesValidation()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	return doc
}

var routeParam = regexp.MustCompile(`\{[^}]*\}`)

// normalRoute names an operation with its path parameters erased, so that
// chi's {id} or {id:[0-9]+} and the document's {id} compare equal.
func normalRoute(method, path string) string {
	return strings.ToUpper(method) + " " + routeParam.ReplaceAllString(path, "{}")
}

// servedRoutes lists the routes of the admin API and of the customer API
// (GET /v1/usage, /v1/balance on the LLM listener), normalized.
func servedRoutes(t *testing.T, adm *api.Admin, self *api.Self) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	walk := func(h http.Handler) {
		rs, ok := h.(chi.Routes)
		if !ok {
			t.Fatalf("%T is not a chi router", h)
		}
		err := chi.Walk(rs, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
			if method != http.MethodHead { // a GET route's HEAD, answered as GET: no operation of its own
				out[normalRoute(method, route)] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	walk(adm.Handler())
	llm := chi.NewRouter()
	self.Routes(llm)
	walk(llm)
	return out
}

// documentedRoutes lists the document's operations: normalized name to
// the document's own "METHOD /path".
func documentedRoutes(doc *openapi3.T) map[string]string {
	out := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			out[normalRoute(method, path)] = strings.ToUpper(method) + " " + path
		}
	}
	return out
}

// TestOpenAPIDocument checks the document itself: valid OpenAPI 3.0.3,
// every admin operation behind the admin token and every customer
// operation behind a customer key, each customer path named in
// info.description, and every fixed shape closed.
func TestOpenAPIDocument(t *testing.T) {
	doc := loadOpenAPI(t)
	if doc.OpenAPI != "3.0.3" {
		t.Errorf("openapi = %q, want 3.0.3", doc.OpenAPI)
	}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			sec := doc.Security
			if op.Security != nil {
				sec = *op.Security
			}
			var schemes []string
			for _, req := range sec {
				for s := range req {
					schemes = append(schemes, s)
				}
			}
			switch {
			case path == "/healthz" || path == "/admin/v1/openapi.json":
				if len(schemes) != 0 {
					t.Errorf("%s: security %v, want none", name, schemes)
				}
			case strings.HasPrefix(path, "/admin/v1/"):
				if !slices.Equal(schemes, []string{"adminToken"}) || op.Responses.Status(http.StatusUnauthorized) == nil {
					t.Errorf("%s: security %v, want adminToken and a 401 response", name, schemes)
				}
			case strings.HasPrefix(path, "/v1/"):
				if !slices.Equal(schemes, []string{"customerKey"}) || op.Responses.Status(http.StatusUnauthorized) == nil {
					t.Errorf("%s: security %v, want customerKey and a 401 response", name, schemes)
				}
			default:
				t.Errorf("%s: a path outside /admin/v1 and /v1", name)
			}
		}
	}
	// info.description lists the customer API; it left out /v1/statements/{period}.
	for path := range doc.Paths.Map() {
		if strings.HasPrefix(path, "/v1/") && !strings.Contains(doc.Info.Description, path) {
			t.Errorf("info.description does not name the customer API's %s: %s", path, doc.Info.Description)
		}
	}
	for name, ref := range doc.Components.Schemas {
		s := ref.Value
		if !s.Type.Is("object") {
			continue
		}
		if closed := s.AdditionalProperties.Has != nil && !*s.AdditionalProperties.Has; !closed {
			t.Errorf("schema %s: additionalProperties open, want closed (every field the API answers documented)", name)
		}
		for _, r := range s.Required {
			if s.Properties[r] == nil {
				t.Errorf("schema %s requires %q, which it does not define", name, r)
			}
		}
	}
}

// TestOpenAPICoversRoutes checks that every route of the admin router and
// of the customer API is in the document, and that the document describes
// nothing else than those and the pending operations.
func TestOpenAPICoversRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	adm, err := api.NewAdmin(nil, "token", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	served := servedRoutes(t, adm, api.NewSelf(nil, nil, slog.New(slog.DiscardHandler)))
	documented := documentedRoutes(doc)
	for r := range served {
		if documented[r] == "" && !openAPIUndocumented[r] {
			t.Errorf("route %s is served but not in openapi.json", r)
		}
	}
	for r, name := range documented {
		if !served[r] && !slices.Contains(pendingOperations, name) {
			t.Errorf("openapi.json describes %s, which is not routed (nor in pendingOperations)", name)
		}
	}
}

// openAPIHarness sends real requests to a stack and validates each request
// and response against the document.
type openAPIHarness struct {
	t       *testing.T
	s       *stack
	router  routers.Router
	served  map[string]bool
	opts    *openapi3filter.Options
	covered map[string]bool
	logged  map[string]bool
}

// openAPICall is one exchange. invalid marks a request that breaks the
// document on purpose (to get an error response): only its response is
// validated.
type openAPICall struct {
	base, method, path, body, auth string
	want                           int
	invalid                        bool
}

func (h *openAPIHarness) admin(method, path, body string, want int) []byte {
	h.t.Helper()
	return h.do(openAPICall{base: h.s.admin, method: method, path: path, body: body, auth: testAdminToken, want: want})
}

// do runs c and returns the response body, or nil when the operation is
// pending (or failed, reported).
func (h *openAPIHarness) do(c openAPICall) []byte {
	t := h.t
	t.Helper()
	newReq := func() *http.Request {
		req, err := http.NewRequest(c.method, c.base+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		if c.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if c.auth != "" {
			req.Header.Set("Authorization", "Bearer "+c.auth)
		}
		return req
	}
	vreq := newReq()
	route, params, err := h.router.FindRoute(vreq)
	if err != nil {
		t.Errorf("%s %s: not in openapi.json: %v", c.method, c.path, err)
		return nil
	}
	name := c.method + " " + route.Path
	if !h.served[normalRoute(c.method, route.Path)] {
		if slices.Contains(pendingOperations, name) {
			if !h.logged[name] {
				t.Logf("pending operation %s: not routed yet, skipped", name)
				h.logged[name] = true
			}
		} else {
			t.Errorf("%s is in openapi.json but not routed", name)
		}
		return nil
	}
	if slices.Contains(pendingOperations, name) && !h.logged[name] {
		t.Logf("pending operation %s is routed now (validated): remove it from pendingOperations", name)
		h.logged[name] = true
	}
	h.covered[name] = true
	in := &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: h.opts}
	if !c.invalid {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("%s %s: the request breaks openapi.json: %v", c.method, c.path, err)
		}
	}
	resp, err := http.DefaultClient.Do(newReq())
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	if resp.StatusCode != c.want {
		t.Errorf("%s %s = %d %s, want %d", c.method, c.path, resp.StatusCode, body, c.want)
	}
	err = openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(body)), Options: h.opts,
	})
	if err != nil {
		t.Errorf("%s %s: the %d response breaks openapi.json: %v\n%s", c.method, c.path, resp.StatusCode, err, body)
	}
	if resp.StatusCode != c.want {
		return nil
	}
	return body
}

// field decodes body and returns the top-level string or number named key.
func (h *openAPIHarness) field(body []byte, key string) string {
	h.t.Helper()
	if body == nil {
		return ""
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		h.t.Fatalf("%v: %s", err, body)
	}
	switch v := m[key].(type) {
	case string:
		return v
	case float64:
		return fmt.Sprint(int64(v))
	}
	h.t.Fatalf("no %q in %s", key, body)
	return ""
}

// TestOpenAPIConformance drives every operation of the document against
// the real servers (gateway, meter worker, Postgres, admin API) and
// validates each real request and response, bodies included.
func TestOpenAPIConformance(t *testing.T) {
	s := newStack(t, nil)
	doc := loadOpenAPI(t)
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	adm, err := api.NewAdmin(s.store, testAdminToken, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	h := &openAPIHarness{t: t, s: s, router: router,
		served:  servedRoutes(t, adm, api.NewSelf(s.store, s.app.keys, slog.New(slog.DiscardHandler))),
		covered: map[string]bool{}, logged: map[string]bool{},
		opts: &openapi3filter.Options{
			IncludeResponseStatus: true,
			MultiError:            true,
			AuthenticationFunc:    openAPIAuthenticate,
			SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.WithStringFormatValidator("uuid",
				openapi3.NewRegexpFormatValidator(openapi3.FormatOfStringForUUIDOfRFC9562))},
		},
	}
	now := time.Now().UTC()
	from, to := now.AddDate(0, 0, -1).Format(time.DateOnly), now.AddDate(0, 0, 2).Format(time.DateOnly)
	window := "from=" + from + "&to=" + to
	unknown := uuid.NewString()

	h.do(openAPICall{base: s.admin, method: "GET", path: "/healthz", want: http.StatusOK})
	if b := h.do(openAPICall{base: s.admin, method: "GET", path: "/admin/v1/openapi.json", want: http.StatusOK}); b != nil && !bytes.Equal(b, api.OpenAPI()) {
		t.Errorf("GET /admin/v1/openapi.json does not serve api.OpenAPI()")
	}
	h.do(openAPICall{base: s.admin, method: "GET", path: "/admin/v1/customers", want: http.StatusUnauthorized, invalid: true})
	h.do(openAPICall{base: s.admin, method: "GET", path: "/admin/v1/customers", auth: "wrong", want: http.StatusUnauthorized, invalid: true})

	// Customers.
	cust := h.field(h.admin("POST", "/admin/v1/customers", `{"name":"openapi-eur","currency":"EUR","credit_limit":"250.5"}`, http.StatusCreated), "id")
	h.admin("POST", "/admin/v1/customers", `{"name":"openapi-usd"}`, http.StatusCreated)
	h.do(openAPICall{base: s.admin, method: "POST", path: "/admin/v1/customers", body: `{}`, auth: testAdminToken, want: http.StatusBadRequest, invalid: true})
	h.admin("GET", "/admin/v1/customers", "", http.StatusOK)
	h.admin("GET", "/admin/v1/customers?name=openapi-eur", "", http.StatusOK)
	h.admin("GET", "/admin/v1/customers/"+cust, "", http.StatusOK)
	h.admin("GET", "/admin/v1/customers/"+unknown, "", http.StatusNotFound)
	h.do(openAPICall{base: s.admin, method: "GET", path: "/admin/v1/customers/nope", auth: testAdminToken, want: http.StatusBadRequest, invalid: true})
	h.admin("PATCH", "/admin/v1/customers/"+cust, `{"name":"openapi-eur-2","credit_limit":null}`, http.StatusOK)
	h.admin("PATCH", "/admin/v1/customers/"+cust, `{"credit_limit":"0"}`, http.StatusOK)

	// Keys.
	key := h.field(h.admin("POST", "/admin/v1/customers/"+cust+"/keys", `{"name":"ci","daily_limit":"10","monthly_limit":"100.5",
		"rpm_limit":600,"tpm_limit":100000,"max_concurrent":8,"expires_at":"2030-01-01T00:00:00Z","allowed_models":["sim-pro","openai/*"]}`, http.StatusCreated), "id")
	plain := h.field(h.admin("POST", "/admin/v1/customers/"+cust+"/keys", `{"name":"plain"}`, http.StatusCreated), "id")
	if plain != "" {
		h.admin("GET", "/admin/v1/keys/"+plain, "", http.StatusOK)
		h.admin("PATCH", "/admin/v1/keys/"+plain, `{"rpm_limit":60,"allowed_models":["sim-pro"],"expires_at":"2031-01-01T00:00:00Z"}`, http.StatusOK)
		h.admin("PATCH", "/admin/v1/keys/"+plain, `{"rpm_limit":null,"allowed_models":null,"daily_limit":"1.5","name":"plain-2"}`, http.StatusOK)
		h.do(openAPICall{base: s.admin, method: "PATCH", path: "/admin/v1/keys/" + plain, body: `{"rpm_limit":0}`, auth: testAdminToken, want: http.StatusBadRequest, invalid: true})
	}
	h.admin("GET", "/admin/v1/keys/"+unknown, "", http.StatusNotFound)
	h.admin("PATCH", "/admin/v1/keys/"+unknown, `{"name":"x"}`, http.StatusNotFound)
	h.admin("POST", "/admin/v1/customers/"+unknown+"/keys", `{"name":"nobody's"}`, http.StatusNotFound)
	h.admin("GET", "/admin/v1/customers/"+cust+"/keys", "", http.StatusOK)
	if key != "" {
		h.admin("POST", "/admin/v1/keys/"+key+"/revoke", "", http.StatusOK)
		h.admin("POST", "/admin/v1/keys/"+key+"/revoke", "", http.StatusConflict)
		h.admin("PATCH", "/admin/v1/keys/"+key, `{"name":"too late"}`, http.StatusConflict)
	}
	h.admin("GET", "/admin/v1/customers/"+cust+"/keys", "", http.StatusOK) // with revoked_at

	// Prices.
	h.admin("POST", "/admin/v1/prices", `{"model":"openapi-model","currency":"USD","input":"1.5","cached_input":"0.75",
		"cache_write":"1.875","output":"6","reasoning":"8","request_fee":"0.001","web_search":"0.01",
		"effective_from":"2026-01-01T00:00:00Z","effective_to":"2027-01-01T00:00:00Z"}`, http.StatusCreated)
	h.admin("POST", "/admin/v1/prices", `{"model":"openapi-model","currency":"USD","input":"2","output":"8","effective_from":"2025-01-01T00:00:00Z"}`, http.StatusCreated)
	h.admin("POST", "/admin/v1/prices", `{"model":"openapi-model","currency":"USD","input":"2","output":"8","effective_from":"2025-01-01T00:00:00Z"}`, http.StatusConflict)
	h.admin("GET", "/admin/v1/prices?model=openapi-model", "", http.StatusOK)
	h.admin("GET", "/admin/v1/prices", "", http.StatusOK)

	// Overrides.
	h.admin("POST", "/admin/v1/customers/"+cust+"/overrides", `{"model":"","discount_percent":"12.5","effective_from":"2026-01-01T00:00:00Z"}`, http.StatusCreated)
	h.admin("POST", "/admin/v1/customers/"+cust+"/overrides", `{"model":"openapi-model","price":{"currency":"EUR","input":"1","output":"2"},
		"effective_from":"2026-01-01T00:00:00Z","effective_to":"2027-01-01T00:00:00Z"}`, http.StatusCreated)
	h.admin("GET", "/admin/v1/customers/"+cust+"/overrides", "", http.StatusOK)

	// Credits, adjustments, entries, reversals, balance.
	credit := h.field(h.admin("POST", "/admin/v1/customers/"+cust+"/credits", `{"amount":"100","memo":"top-up","idempotency_key":"openapi-credit-1"}`, http.StatusCreated), "id")
	h.admin("POST", "/admin/v1/customers/"+cust+"/credits", `{"amount":"100","memo":"top-up","idempotency_key":"openapi-credit-1"}`, http.StatusCreated)
	h.admin("POST", "/admin/v1/customers/"+cust+"/adjustments", `{"amount":"-2.5","memo":"correction","effective_at":"`+now.Format(time.RFC3339)+`"}`, http.StatusCreated)
	if credit != "" {
		h.admin("POST", "/admin/v1/entries/"+credit+"/reverse", `{"memo":"granted by mistake"}`, http.StatusCreated)
	}
	h.admin("POST", "/admin/v1/entries/999999999/reverse", "", http.StatusNotFound)
	h.admin("GET", "/admin/v1/customers/"+cust+"/entries", "", http.StatusOK)
	h.admin("GET", "/admin/v1/customers/"+cust+"/entries?"+window, "", http.StatusOK)
	h.admin("GET", "/admin/v1/customers/"+cust+"/balance", "", http.StatusOK)
	h.admin("GET", "/admin/v1/customers/"+s.customerID+"/balance", "", http.StatusOK)

	// One metered request, then its event, usage, statements and exports.
	resp := s.post("/v1/chat/completions", `{"model":"sim-pro","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("chat completion = %d %s", resp.StatusCode, b)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	event := s.event(resp.Header.Get("X-Request-Id")).ID
	h.admin("GET", "/admin/v1/events/"+event, "", http.StatusOK)
	h.admin("GET", "/admin/v1/events/"+unknown, "", http.StatusNotFound)
	h.admin("POST", "/admin/v1/events/"+event+"/refund", `{"memo":"goodwill"}`, http.StatusCreated)
	h.admin("POST", "/admin/v1/events/"+unknown+"/refund", "", http.StatusNotFound)
	for _, g := range []string{"model", "key", "customer", "hour", "day", "month", "end_user"} {
		h.admin("GET", "/admin/v1/usage?group_by="+g+"&customer_id="+s.customerID+"&"+window, "", http.StatusOK)
	}
	h.admin("GET", "/admin/v1/usage?model=sim-pro&limit=1", "", http.StatusOK)
	h.admin("GET", "/admin/v1/usage?end_user=nobody&group_by=day&"+window, "", http.StatusOK)
	h.do(openAPICall{base: s.admin, method: "GET", path: "/admin/v1/usage?group_by=week", auth: testAdminToken, want: http.StatusBadRequest, invalid: true})
	period := now.Format("2006-01")
	h.admin("GET", "/admin/v1/customers/"+s.customerID+"/statements/"+period, "", http.StatusOK)
	h.admin("GET", "/admin/v1/customers/"+s.customerID+"/statements/"+period+"?format=csv", "", http.StatusOK)
	h.admin("GET", "/admin/v1/export?"+window, "", http.StatusOK)
	h.admin("GET", "/admin/v1/reconciliation?"+window, "", http.StatusOK)
	h.admin("POST", "/admin/v1/rerate", `{"from":"`+from+`","to":"`+to+`"}`, http.StatusOK)
	h.admin("GET", "/admin/v1/dlq?limit=10", "", http.StatusOK)
	h.do(openAPICall{base: s.admin, method: "GET", path: "/admin/v1/dlq?limit=0", auth: testAdminToken, want: http.StatusBadRequest, invalid: true})
	h.admin("POST", "/admin/v1/dlq/replay", `{"seqs":[]}`, http.StatusOK)
	h.admin("POST", "/admin/v1/dlq/replay", `{"seqs":[999999]}`, http.StatusNotFound)
	h.admin("POST", "/admin/v1/dlq/remove", `{"seqs":[999999]}`, http.StatusNotFound)
	h.do(openAPICall{base: s.admin, method: "POST", path: "/admin/v1/dlq/remove", body: `{"seqs":[]}`, auth: testAdminToken, want: http.StatusBadRequest, invalid: true})

	// The customer API, on the LLM listener with the customer's key.
	for _, q := range []string{"", "?group_by=day&" + window, "?group_by=key&limit=1"} {
		h.do(openAPICall{base: s.gateway, method: "GET", path: "/v1/usage" + q, auth: s.secret, want: http.StatusOK})
	}
	h.do(openAPICall{base: s.gateway, method: "GET", path: "/v1/balance", auth: s.secret, want: http.StatusOK})
	h.do(openAPICall{base: s.gateway, method: "GET", path: "/v1/key", auth: s.secret, want: http.StatusOK})
	h.do(openAPICall{base: s.gateway, method: "GET", path: "/v1/keys", auth: s.secret, want: http.StatusOK})
	h.do(openAPICall{base: s.gateway, method: "GET", path: "/v1/keys?limit=1", auth: s.secret, want: http.StatusOK})
	h.do(openAPICall{base: s.gateway, method: "GET", path: "/v1/keys?limit=0", auth: s.secret, want: http.StatusBadRequest, invalid: true})
	for _, q := range []string{"", "?limit=1&model=sim-pro&" + window, "?end_user=nobody"} {
		h.do(openAPICall{base: s.gateway, method: "GET", path: "/v1/requests" + q, auth: s.secret, want: http.StatusOK})
	}
	h.do(openAPICall{base: s.gateway, method: "GET", path: "/v1/requests?limit=0", auth: s.secret, want: http.StatusBadRequest, invalid: true})
	h.do(openAPICall{base: s.gateway, method: "GET", path: "/v1/statements/" + period, auth: s.secret, want: http.StatusOK})
	h.do(openAPICall{base: s.gateway, method: "GET", path: "/v1/statements/" + period + "?format=csv", auth: s.secret, want: http.StatusOK})
	h.do(openAPICall{base: s.gateway, method: "GET", path: "/v1/statements/2026-13", auth: s.secret, want: http.StatusBadRequest, invalid: true})
	h.do(openAPICall{base: s.gateway, method: "GET", path: "/v1/requests/" + event, auth: s.secret, want: http.StatusOK})
	h.do(openAPICall{base: s.gateway, method: "GET", path: "/v1/requests/" + unknown, auth: s.secret, want: http.StatusNotFound})
	h.do(openAPICall{base: s.gateway, method: "GET", path: "/v1/requests/" + event, auth: "tg-not-a-key", want: http.StatusUnauthorized, invalid: true})
	h.do(openAPICall{base: s.gateway, method: "GET", path: "/v1/balance", auth: "tg-not-a-key", want: http.StatusUnauthorized, invalid: true})

	// Every operation of the document ran, unless pending.
	for _, name := range documentedRoutes(doc) {
		if !h.covered[name] && !slices.Contains(pendingOperations, name) {
			t.Errorf("%s is in openapi.json but this test does not exercise it", name)
		}
	}
}

// openAPIAuthenticate checks the credentials a request sends for its
// operation's security scheme: the admin token, or a customer key.
func openAPIAuthenticate(_ context.Context, in *openapi3filter.AuthenticationInput) error {
	got, ok := strings.CutPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ")
	switch {
	case !ok:
		return in.NewError(errors.New("no bearer credentials"))
	case in.SecuritySchemeName == "adminToken" && got != testAdminToken:
		return in.NewError(errors.New("not the admin token"))
	case in.SecuritySchemeName == "customerKey" && !strings.HasPrefix(got, "tg-"):
		return in.NewError(errors.New("not a customer key"))
	}
	return nil
}
