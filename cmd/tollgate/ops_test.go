package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestMetricsAndReadiness: /metrics on the admin listener shows the
// requests, tokens and pipeline of real traffic, with bounded labels;
// /readyz reports each dependency.
func TestMetricsAndReadiness(t *testing.T) {
	s := newStack(t, nil)
	_, id := s.chatAs(s.secret)
	s.event(id)
	s.post("/v1/chat/completions", `{"model":"nobody/x","messages":[]}`) // a 404
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, body = get(t, s.admin+"/metrics"); strings.Contains(body, "tollgate_meter_events_written_total 1") {
			break
		}
	}
	for _, want := range []string{
		`tollgate_gateway_requests_total{endpoint="/v1/chat/completions",model="sim-pro",provider="sim",status="ok"} 1`,
		`tollgate_gateway_responses_total{code="404",endpoint="/v1/chat/completions"} 1`,
		`tollgate_gateway_tokens_total{class="prompt",model="sim-pro",provider="sim"} 12`,
		`tollgate_gateway_tokens_total{class="reasoning",model="sim-pro",provider="sim"} 12`,
		`tollgate_gateway_usage_source_total{provider="sim",source="upstream"} 1`,
		`tollgate_gateway_ttft_seconds_count{model="sim-pro",provider="sim"} 1`,
		`tollgate_meter_events_written_total 1`,
		`tollgate_meter_publish_seconds_count 1`,
		`tollgate_meter_spool_events 0`,
		`tollgate_meter_consumer_pending `, // serve runs a worker: its backlog (TollgateMeterDown) is reported
		`tollgate_ledger_unpriced_events_total 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, s.customerID) {
		t.Error("/metrics carries a customer id as a label")
	}
	code, rd := get(t, s.admin+"/readyz")
	var r readiness
	if err := json.Unmarshal([]byte(rd), &r); err != nil || code != 200 || !r.Ready || r.Database != "ok" || r.NATS != "connected" ||
		r.Keys != "loaded" || r.Spool == nil || !r.Spool.Accepting {
		t.Fatalf("/readyz = %d %s", code, rd)
	}
}

// syncBuffer is a bytes.Buffer safe for the app's concurrent logging.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestNoSecretReachesTheLogs drives requests that succeed, fail and are
// refused, creates and revokes keys, and checks that no customer key,
// upstream key or admin token appears in any log line, while every line
// about a request names its request id and customer id.
func TestNoSecretReachesTheLogs(t *testing.T) {
	var logs syncBuffer
	s := newStackLogs(t, nil, nil, &logs)
	_, keyID, other := s.customer(`{"name":"second"}`, `{"name":"k2"}`)
	s.refreshKeys()
	for _, body := range []string{
		chatBody(5, true, ""), chatBody(5, false, `"sim_fault":"error_after:1"`), chatBody(5, false, `"sim_status":"500"`),
	} {
		readAll(t, s.post("/v1/chat/completions", body))
	}
	s.chatAs(other)
	s.chatAs("tg-wrong-" + s.secret[3:])
	s.adminDo("POST", "/admin/v1/keys/"+keyID+"/revoke", "", http.StatusOK, nil)
	req, _ := http.NewRequest("GET", s.admin+"/admin/v1/customers", nil)
	req.Header.Set("Authorization", "Bearer wrong-"+testAdminToken)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	s.app.close() // flush
	s.app = nil
	out := logs.String()
	for name, secret := range map[string]string{"customer key": s.secret, "second key": other, "upstream key": "sim-key",
		"admin token": testAdminToken, "key body": s.secret[3:]} {
		if strings.Contains(out, secret) {
			t.Errorf("the %s appears in the logs", name)
		}
	}
	requests, failed := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("a log line is not JSON: %q", line)
		}
		if l["msg"] == "request" {
			requests++
			if l["request_id"] == nil || l["customer_id"] == nil {
				t.Errorf("a request log line lacks its ids: %s", line)
			}
			// Failed requests log at WARN, so that TOLLGATE_LOG_LEVEL=warn keeps them.
			want := "INFO"
			if st := l["status"]; st == "upstream_error" || st == "timeout" || st == "cut_off" {
				want, failed = "WARN", failed+1
			}
			if l["level"] != want {
				t.Errorf("a %v request logged at %v, want %s", l["status"], l["level"], want)
			}
		}
	}
	if requests < 4 || failed < 2 {
		t.Fatalf("%d request log lines (%d failed), want one per upstream request (4, 2 failed)", requests, failed)
	}
}

// TestNATSCloseIsNotADisconnectWarning: every clean stop of `tollgate serve`
// logged WARN "NATS: disconnected; reconnecting" with "err":null just before
// "tollgate stopped": nats.go calls the disconnect handler when the
// connection is closed on purpose too. An operator reading the log (or an
// alert on WARN lines) saw a NATS outage at every restart. A closed
// connection is not reconnecting: nothing is logged for it.
func TestNATSCloseIsNotADisconnectWarning(t *testing.T) {
	logs := &metertest.LockedBuffer{}
	a := &app{log: slog.New(slog.NewJSONHandler(logs, nil)), grace: time.Second}
	if _, err := a.connectNATS(env{DataDir: t.TempDir()}, roles{gateway: true, meter: true, admin: true}, meter.DefaultSync); err != nil {
		t.Fatal(err)
	}
	nc := a.nc
	if err := a.close(); err != nil {
		t.Fatal(err)
	}
	if !nc.IsClosed() {
		t.Fatal("the NATS connection is not closed")
	}
	time.Sleep(300 * time.Millisecond) // nats.go runs its handlers on a goroutine of its own
	if strings.Contains(logs.String(), "disconnected") {
		t.Errorf("closing the NATS connection logged a disconnect:\n%s", logs.String())
	}
}

// TestReadinessTellsARefusedUsageStream: `tollgate serve` restarted with
// meter.replicas 3 on its embedded (single-node) JetStream could never
// update its usage stream; its worker logged "waiting for NATS" at each
// retry while /readyz said nothing of the meter, and nothing reached the
// ledger until a restart with a corrected configuration (a crash review).
// Now /readyz names the meter degraded with NATS' words; serve stays
// ready (its gateway serves, the events wait in the stream), a process
// with the meter role alone is not. The events wait: back at replicas 1,
// they reach the ledger.
func TestReadinessTellsARefusedUsageStream(t *testing.T) {
	s := newStack(t, nil)
	_, first := s.chatAs(s.secret)
	s.event(first)
	s.cfg.Meter.Replicas = 3
	s.restart()
	var r readiness
	var code int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var body string
		code, body = get(t, s.admin+"/readyz")
		r = readiness{}
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("/readyz = %d %s", code, body)
		}
		if r.Degraded["meter"] != "" || time.Now().After(deadline) {
			break
		}
	}
	if code != http.StatusOK || !r.Ready || !strings.Contains(r.Degraded["meter"], "replicas > 1 not supported in non-clustered mode") ||
		!strings.Contains(r.Degraded["meter"], "refuses the usage stream or its consumer as configured") {
		t.Fatalf("/readyz with a usage stream JetStream refuses = %d %+v; want ready (the gateway serves), degraded.meter "+
			"saying NATS refuses it as configured (no wait cures it), with NATS' words", code, r)
	}
	if m := s.app.readiness(t.Context(), roles{meter: true}); m.Ready || m.Degraded["meter"] == "" {
		t.Errorf("a meter process whose usage stream is refused: %+v; want not ready", m)
	}
	status, second := s.chatAs(s.secret)
	if status != http.StatusOK {
		t.Fatalf("chat with the meter down: %d", status)
	}
	s.cfg.Meter.Replicas = 1
	s.restart()
	s.event(second)
	code, body := get(t, s.admin+"/readyz")
	r = readiness{}
	if err := json.Unmarshal([]byte(body), &r); err != nil || code != http.StatusOK || r.Degraded["meter"] != "" {
		t.Errorf("/readyz once the stream is set up = %d %s; want the meter no longer degraded", code, body)
	}
}

// TestServeRefusesReplicasOnTheEmbeddedNATS: `tollgate serve` with
// meter.replicas 3 and no TOLLGATE_NATS_URL started, served and metered
// nothing: its embedded JetStream, a single node, refuses a usage stream of
// three replicas (a crash review). It is refused at start, before the
// database, as an unusable setting is: exit code 2, one line saying why.
// With a NATS URL (a cluster, perhaps) it starts.
func TestServeRefusesReplicasOnTheEmbeddedNATS(t *testing.T) {
	t.Setenv("TOLLGATE_DATA_DIR", t.TempDir())
	t.Setenv("TOLLGATE_ADMIN_TOKEN", "t")
	t.Setenv("TOLLGATE_LISTEN", "127.0.0.1:0")
	t.Setenv("TOLLGATE_ADMIN_LISTEN", "127.0.0.1:0")
	t.Setenv("TOLLGATE_DATABASE_URL", "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	t.Setenv("TOLLGATE_NATS_URL", "")
	demo, err := os.ReadFile("../../examples/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tollgate.yaml")
	if err := os.WriteFile(path, append(demo, "\nmeter:\n  replicas: 3\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second) // serve, not refused, waits for the database
	defer cancel()
	err = runServer(ctx, slog.New(slog.DiscardHandler), "serve", []string{"--config", path}, io.Discard)
	var ee *envError
	if !errors.As(err, &ee) || !strings.Contains(err.Error(), "meter.replicas is 3") || !strings.Contains(err.Error(), "single node") {
		t.Fatalf("serve with meter.replicas 3 on the embedded NATS: %v; want it refused before the database, saying why", err)
	}
	var stderr bytes.Buffer
	if code := serverExit("serve", err, &stderr); code != exitUsage || strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("serve with meter.replicas 3 on the embedded NATS: exit %d, stderr %q; want exit 2 and one line", code, stderr.String())
	}
	// With a NATS of its own, serve goes on (here to the database it
	// waits for, until it is stopped).
	t.Setenv("TOLLGATE_NATS_URL", "nats://127.0.0.1:1")
	ctx, cancel = context.WithCancel(t.Context())
	cancel()
	if err := runServer(ctx, slog.New(slog.DiscardHandler), "serve", []string{"--config", path}, io.Discard); err != nil {
		t.Errorf("serve with meter.replicas 3 and TOLLGATE_NATS_URL: %v; want it to start (and stop while waiting for the database)", err)
	}
}

// TestReadinessTellsTheLedgerTablesGone: for the meter and admin roles the
// database is up only while it holds the ledger (a look for its tables),
// not while Postgres merely answers: a database dropped and created again
// (or rolled back to 0) answers a Ping, and the worker's writes and the
// admin API would all fail. serve stays ready (its gateway serves); an
// admin process is not, and /readyz answers it with 503.
func TestReadinessTellsTheLedgerTablesGone(t *testing.T) {
	s := newStack(t, nil)
	e := s.env
	e.Listen, e.AdminListen, e.DataDir = "127.0.0.1:0", "127.0.0.1:0", t.TempDir()
	ctx := context.Background()
	adm, err := start(ctx, s.log, e, s.cfg, roles{admin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.close()
	db, err := pgx.Connect(ctx, s.env.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	if _, err := db.Exec(ctx, `ALTER TABLE prices RENAME TO prices_gone`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, addr string
		code       int
	}{{"serve", s.admin, http.StatusOK}, {"admin", "http://" + adm.AdminAddr, http.StatusServiceUnavailable}} {
		code, body := get(t, c.addr+"/readyz")
		var rd readiness
		if err := json.Unmarshal([]byte(body), &rd); err != nil || code != c.code || rd.Ready != (c.code == http.StatusOK) ||
			!strings.Contains(rd.Database, "no ledger tables") || rd.Degraded["admin"] == "" {
			t.Errorf("%s's /readyz with the ledger's prices table gone = %d %s; want %d, the database not ok, admin degraded", c.name, code, body, c.code)
		}
	}
	if _, err := db.Exec(ctx, `ALTER TABLE prices_gone RENAME TO prices`); err != nil {
		t.Fatal(err)
	}
}

// TestPprofOnlyWhenAsked: the runtime's profiles, served without
// authentication, are on the admin listener only with TOLLGATE_PPROF:
// without it, /debug/pprof/ serves none of them.
func TestPprofOnlyWhenAsked(t *testing.T) {
	s := newStack(t, nil)
	if code, body := get(t, s.admin+"/debug/pprof/goroutine?debug=1"); code == http.StatusOK || strings.Contains(body, "goroutine profile") {
		t.Errorf("/debug/pprof/goroutine without TOLLGATE_PPROF = %d %.200s; want no profile", code, body)
	}
	e := s.env
	e.Listen, e.AdminListen, e.DataDir, e.Pprof = "127.0.0.1:0", "127.0.0.1:0", t.TempDir(), true
	a, err := start(context.Background(), s.log, e, s.cfg, roles{admin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	if code, body := get(t, "http://"+a.AdminAddr+"/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("/debug/pprof/goroutine with TOLLGATE_PPROF=1 = %d %.200s; want the profile", code, body)
	}
}

// TestAShortAdminTokenIsAWarning: an admin token shorter than 32 bytes,
// the one thing that stands against guessing it, is named in a warning
// at start; one of 32 bytes is not.
func TestAShortAdminTokenIsAWarning(t *testing.T) {
	s := newStack(t, nil)
	for _, c := range []struct {
		token string
		warn  bool
	}{{strings.Repeat("x", minAdminToken-1), true}, {strings.Repeat("x", minAdminToken), false}} {
		logs := &syncBuffer{}
		e := s.env
		e.Listen, e.AdminListen, e.DataDir, e.AdminToken = "127.0.0.1:0", "127.0.0.1:0", t.TempDir(), c.token
		a, err := start(context.Background(), slog.New(slog.NewJSONHandler(logs, nil)), e, s.cfg, roles{admin: true})
		if err != nil {
			t.Fatal(err)
		}
		_ = a.close()
		if got := strings.Contains(logs.String(), "TOLLGATE_ADMIN_TOKEN is short enough to be guessed"); got != c.warn {
			t.Errorf("an admin token of %d bytes: warned %t, want %t:\n%s", len(c.token), got, c.warn, logs)
		}
	}
}
