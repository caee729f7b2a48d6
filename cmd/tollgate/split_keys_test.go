package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
)

// gatewayOnly starts one more process of the gateway role on s's
// database and NATS (split mode), with its own data directory.
func (s *stack) gatewayOnly() string {
	s.t.Helper()
	e := s.env
	e.Listen, e.AdminListen, e.DataDir = "127.0.0.1:0", "127.0.0.1:0", s.t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := start(ctx, s.log, e, s.cfg, roles{gateway: true})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = a.close() })
	return "http://" + a.Addr
}

// TestGatewayStartsWhileTheDatabaseIsDown: a gateway process refused to
// start while Postgres was unreachable (it pinged the ledger and checked
// its migrations first), so one restarted during a database outage kept
// the LLM API down for all of it, though it serves from NATS alone (found
// by review). It now starts, serves the keys the buckets hold, and its
// usage reaches the ledger through the meter once the database is back.
func TestGatewayStartsWhileTheDatabaseIsDown(t *testing.T) {
	natsDir, addr := t.TempDir(), freeAddr(t)
	natsOn(t, natsDir, addr)
	s := newStackEnv(t, nil, func(e *env) { e.NATSURL = "nats://" + addr })
	var k struct {
		Key string `json:"key"`
	}
	s.adminDo("POST", "/admin/v1/customers/"+s.customerID+"/keys", `{"name":"outage"}`, http.StatusCreated, &k)

	e := s.env
	e.Listen, e.AdminListen, e.DataDir = "127.0.0.1:0", "127.0.0.1:0", t.TempDir()
	e.DatabaseURL = "postgres://postgres@" + freeAddr(t) + "/tollgate?sslmode=disable&connect_timeout=2" // nothing listens
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	logs := &syncBuffer{}
	g, err := start(ctx, slog.New(slog.NewJSONHandler(logs, nil)), e, s.cfg, roles{gateway: true})
	if err != nil {
		t.Fatalf("a gateway started while its database is unreachable: %v", err)
	}
	t.Cleanup(func() { _ = g.close() })
	// Its warning names every route of the customer API that fails until
	// the database is back (it left out /v1/statements).
	warned := ""
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, "database unreachable") {
			warned = l
		}
	}
	customerAPI := chi.NewRouter()
	api.NewSelf(nil, nil, nil).Routes(customerAPI)
	if err := chi.Walk(customerAPI, func(_, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if base, _, _ := strings.Cut(route, "/{"); !strings.Contains(warned, base) {
			t.Errorf("the database-unreachable warning %q does not name the customer API's %s", warned, base)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	status, _, _, id := chatOn(t, "http://"+g.Addr, k.Key)
	if status != http.StatusOK {
		t.Fatalf("a request to the gateway without its database: %d", status)
	}
	if ev := s.event(id); ev.Usage.CompletionTokens != 4 {
		t.Errorf("the event of the request served without the database: %+v", ev.Usage)
	}

	// Not only unreachable: a bad url, or a role Postgres refuses, is
	// still refused at start (a retry will not fix them).
	for _, url := range []string{"postgres://%zz", "postgres://no_such_role_tg@127.0.0.1:5432/postgres?sslmode=disable"} {
		e.DatabaseURL, e.DataDir = url, t.TempDir() // not the running gateway's, whose lock would refuse it
		if bad, err := start(ctx, s.log, e, s.cfg, roles{gateway: true}); err == nil {
			_ = bad.close()
			t.Fatalf("a gateway started with the database url %s", url)
		} else if !strings.Contains(err.Error(), "database") {
			t.Errorf("start with %s: %v, want the database's error", url, err)
		}
	}

	// A single role does not create its database (a typo in its name made
	// an empty one, and the error spoke of migrations), and one that needs
	// NATS says so before anything else (a new operator's review).
	name := "tg_missing_" + strings.ReplaceAll(strings.ToLower(t.Name()), "/", "_")
	e.DatabaseURL, e.DataDir = "postgres://postgres@127.0.0.1:5432/"+name+"?sslmode=disable", t.TempDir()
	for _, r := range []roles{{meter: true}, {admin: true}, {gateway: true}} {
		if bad, err := start(ctx, s.log, e, s.cfg, r); err == nil {
			_ = bad.close()
			t.Fatalf("%+v started on a database that does not exist", r)
		} else if !strings.Contains(err.Error(), "tollgate migrate") {
			t.Errorf("%+v on a missing database: %v, want it to say to run tollgate migrate", r, err)
		}
	}
	db, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	var made bool
	if err := db.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)", name).Scan(&made); err != nil || made {
		_, _ = db.Exec(ctx, "DROP DATABASE IF EXISTS "+name)
		t.Errorf("the database %s exists after the single roles' starts (%v)", name, err)
	}
	e.NATSURL = ""
	for _, r := range []roles{{meter: true}, {gateway: true}} {
		if bad, err := start(ctx, s.log, e, s.cfg, r); err == nil {
			_ = bad.close()
			t.Fatalf("%+v started without TOLLGATE_NATS_URL", r)
		} else if !strings.Contains(err.Error(), "TOLLGATE_NATS_URL is required") {
			t.Errorf("%+v without TOLLGATE_NATS_URL, on a missing database: %v, want NATS named first", r, err)
		}
	}
}

// chatOn sends one chat completion with key to the gateway at base (a
// short one, or body), and returns the status, the error code, the
// Retry-After header and the X-Request-Id.
func chatOn(t *testing.T, base, key string, body ...string) (status int, code, retryAfter, requestID string) {
	t.Helper()
	b := `{"model":"sim-pro","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`
	if len(body) > 0 {
		b = body[0]
	}
	req, _ := http.NewRequest("POST", base+"/v1/chat/completions", strings.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, "", "", ""
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var env struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(raw, &env)
	return resp.StatusCode, env.Error.Code, resp.Header.Get("Retry-After"), resp.Header.Get("X-Request-Id")
}

// TestSplitGatewaysShareKeysAndLimits: two gateway processes in split
// mode, beside a serve process (the meter and admin roles), on one real
// JetStream server. A key works on both as soon as the admin API returns
// it; its rpm_limit and max_concurrent hold across both; its revocation
// and a patch reach both.
func TestSplitGatewaysShareKeysAndLimits(t *testing.T) {
	natsDir, addr := t.TempDir(), freeAddr(t)
	natsOn(t, natsDir, addr)
	s := newStackEnv(t, nil, func(e *env) { e.NATSURL = "nats://" + addr })
	a, b := s.gatewayOnly(), s.gatewayOnly()

	var k struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	s.adminDo("POST", "/admin/v1/customers/"+s.customerID+"/keys", `{"name":"shared","rpm_limit":12}`, http.StatusCreated, &k)
	// At once, on both: no refresh, no wait.
	for _, g := range []string{a, b} {
		if code, errCode, _, _ := chatOn(t, g, k.Key); code != http.StatusOK {
			t.Fatalf("a new key on %s: %d %s", g, code, errCode)
		}
	}
	// 10 more requests fit the 12 per minute; alternating between the
	// gateways, the next are refused by whichever gets them. The limit is
	// exact for requests that each come after the last admission's count
	// has reached the other gateway (core NATS, p99 8 ms on a loaded host:
	// docs/pricing-and-budgets.md); a request can be answered sooner than
	// that on a busy machine, so each waits 100 ms.
	admitted, refused := 2, 0
	for i := range 20 {
		time.Sleep(100 * time.Millisecond)
		g := a
		if i%2 == 1 {
			g = b
		}
		code, errCode, retry, _ := chatOn(t, g, k.Key)
		switch {
		case code == http.StatusOK:
			admitted++
		case code == http.StatusTooManyRequests && errCode == "rate_limit_exceeded" && retry != "":
			refused++
		default:
			t.Fatalf("request %d: %d %q (Retry-After %q)", i, code, errCode, retry)
		}
	}
	if admitted != 12 || refused != 10 {
		t.Fatalf("rpm_limit 12 across two gateways: %d admitted, %d refused; want 12 and 10", admitted, refused)
	}

	// Retry-After on the gateway that holds none of the minute's counts:
	// the seconds until the request admitted on the other leaves the
	// minute (rounded up), not a whole minute.
	var one struct {
		Key string `json:"key"`
	}
	s.adminDo("POST", "/admin/v1/customers/"+s.customerID+"/keys", `{"name":"one","rpm_limit":1}`, http.StatusCreated, &one)
	aStart := time.Now()
	if code, errCode, _, _ := chatOn(t, a, one.Key); code != http.StatusOK {
		t.Fatalf("rpm_limit 1, first request: %d %s", code, errCode)
	}
	aEnd := time.Now()
	time.Sleep(2500 * time.Millisecond)
	bStart := time.Now()
	code, _, retry, _ := chatOn(t, b, one.Key)
	bEnd := time.Now()
	// The request counts in its second (s, within a second before it was
	// admitted) until s+60: B, asked at tb, waits s+60−tb rounded up.
	low, high := 60*time.Second-bEnd.Sub(aStart)-time.Second, 60*time.Second-bStart.Sub(aEnd)+time.Second
	if secs, err := strconv.Atoi(retry); code != http.StatusTooManyRequests || err != nil ||
		time.Duration(secs)*time.Second <= low || time.Duration(secs)*time.Second >= high {
		t.Errorf("rpm_limit 1, its request made on A 2.5 s before, on B: %d, Retry-After %q; want 429, between %s and %s", code, retry, low.Round(time.Millisecond), high.Round(time.Millisecond))
	}

	// max_concurrent across the gateways: slow streams hold their slots.
	var c struct {
		ID  string `json:"id"`
		Key string `json:"key"`
	}
	s.adminDo("POST", "/admin/v1/customers/"+s.customerID+"/keys", `{"name":"conc","max_concurrent":2}`, http.StatusCreated, &c)
	slow := chatBody(4, false, `"sim_delay_ms":"150"`) // 4 chunks, 150 ms apart
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i, g := range []string{a, b} {
		wg.Go(func() { codes[i], _, _, _ = chatOn(t, g, c.Key, slow) })
	}
	time.Sleep(150 * time.Millisecond) // both open, and shared
	for _, g := range []string{a, b} {
		if code, errCode, _, _ := chatOn(t, g, c.Key); code != http.StatusTooManyRequests || errCode != "rate_limit_exceeded" {
			t.Fatalf("a third open request on %s: %d %s; want 429", g, code, errCode)
		}
	}
	wg.Wait()
	if codes[0] != http.StatusOK || codes[1] != http.StatusOK {
		t.Fatalf("the two open requests: %v", codes)
	}

	// A patch and a revocation reach both gateways once the call returns
	// (and the gateways have applied what the bucket holds).
	s.adminDo("PATCH", "/admin/v1/keys/"+c.ID, `{"allowed_models":["sim-small"]}`, http.StatusOK, nil)
	for _, g := range []string{a, b} {
		eventuallyStatus(t, g, c.Key, http.StatusForbidden)
	}
	s.adminDo("POST", "/admin/v1/keys/"+c.ID+"/revoke", "", http.StatusOK, nil)
	for _, g := range []string{a, b} {
		eventuallyStatus(t, g, c.Key, http.StatusUnauthorized)
	}
}

// eventuallyStatus waits (up to a second, far above the 100 ms p99 that
// BENCHMARKS.md measures) until key gets status on the gateway at base.
func eventuallyStatus(t *testing.T, base, key string, status int) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		code, _, _, _ := chatOn(t, base, key)
		if code == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: status %d, want %d", base, code, status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestASecondGatewayOnOneDataDirectoryIsRefused: a gateway whose data
// directory another process holds does not start (it would recover the
// other's requests in flight as crashed and delete its journal and spool
// segments); once the holder closes, it starts. (Found by a review.)
func TestASecondGatewayOnOneDataDirectoryIsRefused(t *testing.T) {
	s := newStack(t, nil)
	e := s.env
	e.Listen, e.AdminListen = "127.0.0.1:0", "127.0.0.1:0" // s.env.DataDir: s's own
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, r := range []roles{{gateway: true}, {gateway: true, meter: true, admin: true}} {
		if !r.all() {
			e.NATSURL = "nats://" + freeAddr(t) // a single gateway needs one; the lock is checked before it is reached
		}
		if a, err := start(ctx, s.log, e, s.cfg, r); err == nil {
			_ = a.close()
			t.Fatalf("%+v started on a data directory in use", r)
		} else if !strings.Contains(err.Error(), "is in use by another tollgate process") {
			t.Fatalf("start %+v: %v, want the data directory in use", r, err)
		}
	}
	s.restart() // closes the holder: the directory is free again
	if code, _ := s.chatAs(s.secret); code != http.StatusOK {
		t.Fatalf("after a restart on the same directory: %d", code)
	}
}

// TestRolesWaitForTheDatabase: tollgate meter (and serve, and admin)
// exited at once while Postgres was unreachable (a crash review: out of
// connections), where docs/operations.md says they wait for it. It waits,
// and starts once the database answers.
func TestRolesWaitForTheDatabase(t *testing.T) {
	natsDir, natsAddr := t.TempDir(), freeAddr(t)
	natsOn(t, natsDir, natsAddr)
	s := newStackEnv(t, nil, func(e *env) { e.NATSURL = "nats://" + natsAddr })
	u, err := url.Parse(s.env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newTCPProxy(t, u.Host)
	proxy.cut() // Postgres unreachable: connections refused
	u.Host = proxy.ln.Addr().String()
	e := s.env
	e.DatabaseURL, e.Listen, e.AdminListen, e.DataDir = u.String(), "127.0.0.1:0", "127.0.0.1:0", t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type started struct {
		a   *app
		err error
	}
	done := make(chan started, 1)
	logs := &syncBuffer{}
	go func() {
		a, err := start(ctx, slog.New(slog.NewJSONHandler(logs, nil)), e, s.cfg, roles{meter: true})
		done <- started{a, err}
	}()
	select {
	case r := <-done:
		if r.a != nil {
			_ = r.a.close()
		}
		t.Fatalf("the meter's start returned while its database was unreachable: %v", r.err)
	case <-time.After(3 * time.Second):
	}
	if !strings.Contains(logs.String(), "database unreachable: waiting for it") {
		t.Errorf("a meter waiting for its database does not say so in its log:\n%s", logs)
	}
	// Told to stop while it waits (SIGTERM): a stop, not a failure.
	stopCtx, stop := context.WithCancel(ctx)
	e2 := e
	e2.DataDir = t.TempDir()
	go func() { time.Sleep(time.Second); stop() }()
	if a, err := start(stopCtx, s.log, e2, s.cfg, roles{meter: true}); !errors.Is(err, errStoppedWaiting) {
		if a != nil {
			_ = a.close()
		}
		t.Errorf("a meter told to stop while it waits: %v, want errStoppedWaiting", err)
	}
	proxy.restore()
	r := <-done
	if r.err != nil {
		t.Fatalf("the meter once the database answers: %v", r.err)
	}
	_ = r.a.close()
}

// TestServeStopsCleanlyWhileMigrationsWait: serve waiting for the
// migration lock another session holds says which session, and a stop
// (SIGTERM) while it waits is a stop, not a failure. The wait was silent,
// and a stop in it exited 1 (a crash review).
func TestServeStopsCleanlyWhileMigrationsWait(t *testing.T) {
	s := newStackEnv(t, nil, nil)
	e := s.env
	e.DatabaseURL, e.Listen, e.AdminListen, e.DataDir = ledgertest.NewDatabase(t), "127.0.0.1:0", "127.0.0.1:0", t.TempDir()
	ledgertest.HoldMigrationLock(t, e.DatabaseURL, "stuck-migrator")
	ctx := context.Background()
	defer func(d time.Duration) { migrateReportEvery = d }(migrateReportEvery)
	migrateReportEvery = 50 * time.Millisecond
	logs := &syncBuffer{}
	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() {
		a, err := start(stopCtx, slog.New(slog.NewTextHandler(logs, nil)), e, s.cfg, roles{gateway: true, meter: true, admin: true})
		if a != nil {
			_ = a.close()
		}
		done <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs.String(), "the migration lock is held") || !strings.Contains(logs.String(), "stuck-migrator") {
		if time.Now().After(deadline) {
			t.Fatalf("30 s into the wait, the log says nothing of the lock's holder:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-done; !errors.Is(err, errStoppedWaiting) {
		t.Fatalf("serve stopped while its migrations waited: %v, want errStoppedWaiting", err)
	}
}
