package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"
	"github.com/shopspring/decimal"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

const adminToken = "test-admin-token"

// server is the admin API and the customer API, the real handlers, over a
// fresh migrated Postgres database of the test's own.
type server struct {
	t     *testing.T
	store *ledger.Store
	dbURL string // the database's, for tests that set up what no API makes
	// admin and llm are the base URLs of the admin API and of the
	// customer API (which is on the LLM listener in production).
	admin, llm string
}

func newServer(t *testing.T) *server {
	t.Helper()
	return newServerWith(t, nil)
}

// newAdmin is the admin API over store, with adminToken and no log.
func newAdmin(t *testing.T, store *ledger.Store) *api.Admin {
	t.Helper()
	adm, err := api.NewAdmin(store, adminToken, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return adm
}

// newServerWith is newServer with setup, when not nil, run on the admin
// API before it serves (to give it a dead-letter stream).
func newServerWith(t *testing.T, setup func(*api.Admin)) *server {
	t.Helper()
	store, dbURL := ledgertest.NewStoreURL(t)
	log := slog.New(slog.DiscardHandler)
	adm := newAdmin(t, store)
	if setup != nil {
		setup(adm)
	}
	a := httptest.NewServer(adm.Handler())
	t.Cleanup(a.Close)
	r := chi.NewRouter()
	api.NewSelf(store, ledgerKeys{store}, log).Routes(r)
	l := httptest.NewServer(r)
	t.Cleanup(l.Close)
	return &server{t: t, store: store, dbURL: dbURL, admin: a.URL, llm: l.URL}
}

// client is the admin API's client, with the admin token.
func (s *server) client() *api.Client { return api.NewClient(s.admin, adminToken, nil) }

// apiError is the body of an error answer.
type apiError struct {
	Error struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	} `json:"error"`
}

// send makes one request and returns its status and body; it never fails
// the test on a status, so that goroutines can use it.
func send(method, url, auth, body string) (int, []byte, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+auth)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// call sends a request and fails the test unless the answer has status
// want; it decodes the body into out when out is not nil.
func (s *server) call(method, url, auth, body string, want int, out any) []byte {
	s.t.Helper()
	status, b, err := send(method, url, auth, body)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, url, err)
	}
	if status != want {
		s.t.Fatalf("%s %s %s = %d %s, want %d", method, url, body, status, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: decode %s: %v", method, url, b, err)
		}
	}
	return b
}

// adm calls the admin API with the admin token.
func (s *server) adm(method, path, body string, want int, out any) []byte {
	s.t.Helper()
	return s.call(method, s.admin+path, adminToken, body, want, out)
}

// invalid checks that an answer is the API's invalid-input error (400,
// code invalid) with a message that starts with the field's name.
func invalid(t *testing.T, what string, status int, body []byte, field string) {
	t.Helper()
	var e apiError
	if status != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Error.Code != ledger.EInvalid ||
		!strings.HasPrefix(e.Error.Message, field) {
		t.Errorf("%s = %d %s, want 400 invalid naming %q", what, status, body, field)
	}
}

// customer creates a customer (body as POSTed) with one key, and returns
// their ids and the key's secret, usable at once on the customer API.
func (s *server) customer(body string) (id, keyID, secret string) {
	s.t.Helper()
	var c ledger.Customer
	s.adm("POST", "/admin/v1/customers", body, http.StatusCreated, &c)
	keyID, secret = s.key(c.ID)
	return c.ID, keyID, secret
}

// key creates a key for customer.
func (s *server) key(customer string) (id, secret string) {
	s.t.Helper()
	var k struct {
		ID     string `json:"id"`
		Secret string `json:"key"`
	}
	s.adm("POST", "/admin/v1/customers/"+customer+"/keys", `{"name":"k"}`, http.StatusCreated, &k)
	return k.ID, k.Secret
}

// write stores usage events as the meter worker does.
func (s *server) write(events ...usage.Event) {
	s.t.Helper()
	if n, err := s.store.WriteEvents(context.Background(), events); err != nil || n != len(events) {
		s.t.Fatalf("WriteEvents = %d, %v; want %d new", n, err, len(events))
	}
}

// event is a successful request's usage event.
func event(customer, key, model string, at time.Time, u usage.Tokens) usage.Event {
	return usage.Event{Version: usage.SchemaVersion, ID: uuid.NewString(), Time: at, CustomerID: customer, KeyID: key,
		Provider: "sim", Model: model, Endpoint: "/v1/chat/completions", Stream: true, Status: usage.StatusOK,
		HTTPStatus: 200, Usage: u, UsageSource: usage.SourceUpstream}
}

// dec parses an API amount.
func dec(t *testing.T, s string) decimal.Decimal {
	t.Helper()
	d, err := decimal.NewFromString(s)
	if err != nil {
		t.Fatalf("amount %q: %v", s, err)
	}
	return d
}

// ledgerKeys looks every key up in the ledger: the customer API's keys
// without the gateways' cache (meter/keys tests the cache).
type ledgerKeys struct{ store *ledger.Store }

func (k ledgerKeys) LookupKey(secret string) (usage.KeyState, bool) {
	st, _, ok, err := k.store.KeyState(context.Background(), usage.KeyHash(secret))
	return st, ok && err == nil
}
