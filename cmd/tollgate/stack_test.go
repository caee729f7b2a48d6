package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
	"github.com/tollgate-dev/tollgate/gateway"
	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
)

const testAdminToken = "test-admin-token"

// stack is the whole pipeline in-process: upstream-sim, the gateway, an
// embedded JetStream, the meter worker, a fresh Postgres database and the
// admin API, wired by the same start() that `tollgate serve` uses.
type stack struct {
	t       testing.TB
	app     *app
	sim     *sim.Server
	simURL  string
	gateway string // LLM API base URL
	admin   string // admin API base URL
	store   *ledger.Store
	// customerID and secret are a customer and its API key, made through
	// the admin API.
	customerID, secret string
	env                env
	cfg                *fileConfig
	log                *slog.Logger
}

// restart closes the app and starts it again with the same environment
// and configuration (the same database, data directory and NATS).
func (s *stack) restart() {
	s.t.Helper()
	if s.app == nil {
		// closed already (a test changing the data directory between)
	} else if err := s.app.close(); err != nil {
		s.t.Logf("close before restart: %v", err)
	}
	s.app = nil
	e := s.env
	e.Listen, e.AdminListen = s.gateway[len("http://"):], s.admin[len("http://"):]
	app, err := start(context.Background(), s.log, e, s.cfg, roles{gateway: true, meter: true, admin: true})
	if err != nil {
		s.t.Fatal(err)
	}
	s.app, s.store = app, app.store
}

// newStack starts the pipeline. The simulator is provider "sim" (OpenAI)
// with models sim-small and sim-pro, priced as in examples/demo.yaml, and
// providers "sim-anthropic" and "sim-gemini" (its native endpoints) with
// models claude-sim and gemini-sim (the simulator's sim-pro); edit, when not
// nil, changes the configuration before start.
func newStack(t testing.TB, edit func(*fileConfig)) *stack {
	t.Helper()
	return newStackEnv(t, edit, nil)
}

// newStackEnv is newStack with the environment edited too (a NATS URL, a
// data directory of the test's choosing).
func newStackEnv(t testing.TB, edit func(*fileConfig), editEnv func(*env)) *stack {
	t.Helper()
	return newStackLogs(t, edit, editEnv, io.Discard)
}

// newStackLogs is newStackEnv with the app's JSON logs written to logs.
func newStackLogs(t testing.TB, edit func(*fileConfig), editEnv func(*env), logs io.Writer) *stack {
	t.Helper()
	s := &stack{t: t, sim: sim.New(sim.WithLogger(slog.New(slog.DiscardHandler)))}
	simSrv := httptest.NewServer(s.sim)
	t.Cleanup(simSrv.Close)
	s.simURL = simSrv.URL
	cfg := &fileConfig{Config: gateway.Config{
		Providers: []gateway.ProviderConfig{
			{Name: "sim", Type: "openai", BaseURL: simSrv.URL + "/v1", APIKey: "sim-key"},
			{Name: "sim-anthropic", Type: "anthropic", BaseURL: simSrv.URL + "/v1", APIKey: "sim-key"},
			{Name: "sim-gemini", Type: "gemini", BaseURL: simSrv.URL + "/v1beta", APIKey: "sim-key"},
		},
		Models: []gateway.ModelConfig{
			{Name: "sim-small", Provider: "sim"},
			{Name: "sim-pro", Provider: "sim", UpstreamModel: "sim-pro"},
			{Name: "claude-sim", Provider: "sim-anthropic", UpstreamModel: "sim-pro"},
			{Name: "gemini-sim", Provider: "sim-gemini", UpstreamModel: "sim-pro"},
		},
	}}
	demo, err := loadConfig("../../examples/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Prices = demo.Prices
	if edit != nil {
		edit(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	e := env{DatabaseURL: ledgertest.NewDatabase(t), AdminToken: testAdminToken,
		Listen: "127.0.0.1:0", AdminListen: "127.0.0.1:0", DataDir: t.TempDir(), ShutdownGrace: 5 * time.Second}
	if editEnv != nil {
		editEnv(&e)
	}
	s.env, s.cfg = e, cfg
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s.log = slog.New(slog.NewJSONHandler(logs, nil))
	s.app, err = start(ctx, s.log, e, cfg, roles{gateway: true, meter: true, admin: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.app == nil {
			return
		}
		if err := s.app.close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	s.store = s.app.store
	s.gateway, s.admin = "http://"+s.app.Addr, "http://"+s.app.AdminAddr

	var c struct {
		ID string `json:"id"`
	}
	s.adminDo("POST", "/admin/v1/customers", `{"name":"acme"}`, http.StatusCreated, &c)
	var k struct {
		Key string `json:"key"`
	}
	s.adminDo("POST", "/admin/v1/customers/"+c.ID+"/keys", `{"name":"test"}`, http.StatusCreated, &k)
	s.customerID, s.secret = c.ID, k.Key
	s.refreshKeys()
	return s
}

// adminDo calls the admin API and decodes the answer into out.
func (s *stack) adminDo(method, path, body string, wantStatus int, out any) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.admin+path, bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != wantStatus {
		s.t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, wantStatus)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
}

// customerDo GETs path from the customer API (on the LLM listener) with
// the stack's key, wants 200, and decodes the answer into out.
func (s *stack) customerDo(method, path string, out any) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.gateway+path, nil)
	req.Header.Set("Authorization", "Bearer "+s.secret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, out) != nil {
		s.t.Fatalf("%s %s = %d %s, want 200 and JSON", method, path, resp.StatusCode, b)
	}
}

// event waits until the ledger holds the event with this request id.
func (s *stack) event(id string) ledger.RatedEvent {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		e, err := s.store.Event(context.Background(), id)
		if err == nil {
			return e
		}
		if ledger.ErrorCode(err) != ledger.ENotFound || time.Now().After(deadline) {
			s.t.Fatalf("event %s: %v", id, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// simStats is what the simulator has billed once its requests in flight
// have ended: it tallies a request when its handler returns, which can be
// after the client has read the last byte the gateway relayed.
func (s *stack) simStats() sim.Stats {
	s.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := s.sim.Stats()
		if st.Requests.InFlight == 0 {
			return st
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the simulator still has %d requests in flight after 5 s", st.Requests.InFlight)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// post sends a raw request to the LLM API with the stack's key.
func (s *stack) post(path, body string) *http.Response {
	s.t.Helper()
	req, _ := http.NewRequest("POST", s.gateway+path, bytes.NewBufferString(body))
	req.Header.Set("Authorization", "Bearer "+s.secret)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// newEvent waits for an event newer than the customer's newest so far
// (before is what newestID returned earlier) and returns it.
func (s *stack) newEvent(before string) ledger.RatedEvent {
	s.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		rows, err := s.store.RecentEvents(context.Background(), s.customerID, 1)
		if err != nil {
			s.t.Fatal(err)
		}
		if len(rows) == 1 && rows[0].ID != before {
			return rows[0]
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no event newer than %q", before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// newestID is the id of the customer's newest event, or "".
func (s *stack) newestID() string {
	rows, err := s.store.RecentEvents(context.Background(), s.customerID, 1)
	if err != nil {
		s.t.Fatal(err)
	}
	if len(rows) == 0 {
		return ""
	}
	return rows[0].ID
}
