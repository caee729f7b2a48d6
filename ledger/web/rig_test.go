package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/ledger/web"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

const adminToken = "web-test-admin-token"

// rig is the console and the portal over the real admin and customer API
// handlers and a fresh migrated database, on one test server.
type rig struct {
	t     *testing.T
	store *ledger.Store
	dbURL string // the database's, for tests that set up what no API makes
	api   *api.Client
	url   string
}

// ledgerKeys looks keys up in the ledger (the gateways' cache is tested in
// meter/keys; the customer API only needs a KeyLookup).
type ledgerKeys struct{ store *ledger.Store }

func (k ledgerKeys) LookupKey(secret string) (usage.KeyState, bool) {
	st, _, ok, err := k.store.KeyState(context.Background(), usage.KeyHash(secret))
	return st, ok && err == nil
}

func newRig(t *testing.T) *rig {
	t.Helper()
	return newRigWith(t, nil)
}

// newRigWith is newRig with setup, when not nil, run on the portal before
// it serves.
func newRigWith(t *testing.T, setup func(*web.Portal)) *rig {
	t.Helper()
	return newRigWrapped(t, setup, nil)
}

// newRigWrapped is newRigWith with the admin API wrapped, when wrap is not
// nil, as the console (and the rig's client) reach it.
func newRigWrapped(t *testing.T, setup func(*web.Portal), wrap func(http.Handler) http.Handler) *rig {
	t.Helper()
	return newRigAdmin(t, setup, wrap, nil)
}

// newRigAdmin is newRigWrapped with setupAdmin, when not nil, run on the
// admin API before it serves (its dead letters, say).
func newRigAdmin(t *testing.T, setup func(*web.Portal), wrap func(http.Handler) http.Handler, setupAdmin func(*api.Admin)) *rig {
	t.Helper()
	store, dbURL := ledgertest.NewStoreURL(t)
	log := slog.New(slog.DiscardHandler)
	adm, err := api.NewAdmin(store, adminToken, log)
	if err != nil {
		t.Fatal(err)
	}
	if setupAdmin != nil {
		setupAdmin(adm)
	}
	admin := adm.Handler()
	if wrap != nil {
		admin = wrap(admin)
	}
	self, customerAPI := api.NewSelf(store, ledgerKeys{store}, log), chi.NewRouter()
	self.Routes(customerAPI)
	r := chi.NewRouter()
	console := web.NewConsole(admin, 0, log)
	t.Cleanup(console.Close)
	console.Routes(r)
	portal := web.NewPortal(customerAPI, log)
	if setup != nil {
		setup(portal)
	}
	portal.Routes(r)
	srv, adminSrv := httptest.NewServer(r), httptest.NewServer(admin)
	t.Cleanup(srv.Close)
	t.Cleanup(adminSrv.Close)
	return &rig{t: t, store: store, dbURL: dbURL, url: srv.URL, api: api.NewClient(adminSrv.URL, adminToken, nil)}
}

// customer makes a customer with a key and n events of model at now, and
// returns the customer, the key's secret and the event ids.
func (g *rig) customer(name, model string, n int) (ledger.Customer, string, []string) {
	g.t.Helper()
	ctx := context.Background()
	c, err := g.api.CreateCustomer(ctx, ledger.CustomerInput{Name: name})
	if err != nil {
		g.t.Fatal(err)
	}
	k, err := g.api.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "main"})
	if err != nil {
		g.t.Fatal(err)
	}
	var ids []string
	var events []usage.Event
	for i := range n {
		id := uuid.Must(uuid.NewV7()).String()
		ids = append(ids, id)
		events = append(events, usage.Event{Version: usage.SchemaVersion, ID: id, Time: time.Now().UTC().Add(-time.Duration(i) * time.Minute),
			CustomerID: c.ID, KeyID: k.ID, Provider: "sim", Model: model, Endpoint: "/v1/chat/completions",
			Status: usage.StatusOK, HTTPStatus: 200, FinishReason: "stop", UsageSource: usage.SourceUpstream,
			Usage: usage.Tokens{PromptTokens: 1000 + int64(i), CachedTokens: 100, CompletionTokens: 500, ReasoningTokens: 50}})
	}
	if len(events) > 0 {
		if _, err := g.store.WriteEvents(ctx, events); err != nil {
			g.t.Fatal(err)
		}
	}
	return c, k.Secret, ids
}

// browser is a cookie-keeping HTTP client that does not follow redirects.
func (g *rig) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// do sends a request and returns the status and body.
func (g *rig) do(c *http.Client, method, path string, form url.Values) (int, string, http.Header) {
	g.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, g.url+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// signIn signs c in to app ("console" or "portal") with field=secret and
// returns the CSRF token of the first page.
func (g *rig) signIn(c *http.Client, app, field, secret string) string {
	g.t.Helper()
	status, body, h := g.do(c, "POST", "/"+app+"/signin", url.Values{field: {secret}})
	if status != http.StatusSeeOther || h.Get("Location") != "/"+app+"/" {
		g.t.Fatalf("sign in to %s = %d %s, want 303 to /%s/", app, status, body, app)
	}
	status, body, _ = g.do(c, "GET", "/"+app+"/", nil)
	if status != http.StatusOK {
		g.t.Fatalf("GET /%s/ = %d %s", app, status, body)
	}
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		g.t.Fatalf("no CSRF token on /%s/: %s", app, body)
	}
	return m[1]
}

// nowInOneUTCDay returns the time now in UTC, first waiting for the next
// UTC day when less than 30 s of this one are left: for a test whose
// events and pages must fall in one UTC day.
func nowInOneUTCDay() time.Time {
	now := time.Now().UTC()
	if left := now.Truncate(24 * time.Hour).Add(24 * time.Hour).Sub(now); left < 30*time.Second {
		time.Sleep(left + time.Second)
		now = time.Now().UTC()
	}
	return now
}
