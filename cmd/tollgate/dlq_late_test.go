package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/metertest"
)

// startAdminOn starts `tollgate admin` on a fresh migrated database, with
// TOLLGATE_NATS_URL natsURL and the dead-letter stream's retry waits
// retry, logging to logs (from DEBUG).
func startAdminOn(t *testing.T, natsURL string, retry [2]time.Duration, logs io.Writer) *app {
	t.Helper()
	_, dbURL := ledgertest.NewStoreURL(t)
	e := env{DatabaseURL: dbURL, AdminToken: testAdminToken, AdminListen: "127.0.0.1:0", NATSURL: natsURL,
		DataDir: t.TempDir(), ShutdownGrace: time.Second, dlqRetry: retry}
	cfg := &fileConfig{}
	if err := cfg.Meter.Validate(); err != nil {
		t.Fatal(err)
	}
	a, err := start(context.Background(), slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), e, cfg, roles{admin: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.close() })
	return a
}

// getDLQ GETs the admin API's dead letters, returning the status and body.
func getDLQ(t *testing.T, a *app) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+a.AdminAddr+"/admin/v1/dlq", nil)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// wantDLQPending checks the dead-letter endpoints' answer while the stream
// cannot be made: 503 unavailable saying so, with the cause, and that it
// is tried again.
func wantDLQPending(t *testing.T, a *app, cause string) {
	t.Helper()
	status, body := getDLQ(t, a)
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if status != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &e) != nil || e.Error.Code != "unavailable" ||
		!strings.HasPrefix(e.Error.Message, "the dead-letter stream is not reachable yet: ") ||
		!strings.Contains(e.Error.Message, cause) || !strings.HasSuffix(e.Error.Message, "; retrying") {
		t.Fatalf("GET /admin/v1/dlq while the dead-letter stream cannot be made = %d %s; want 503 unavailable, "+
			"\"the dead-letter stream is not reachable yet: <cause>; retrying\", the cause saying %q", status, body, cause)
	}
}

// TestDeadLettersComeUpWithoutRestart: `tollgate admin` started while
// another stream holds the dead-letter subject answers its dead-letter
// endpoints (and the console's page) 503, saying why and that it retries,
// and /readyz says so without making the process unready; once the
// operator gives the subject back, the endpoints list the dead letters,
// without a restart, and the log says so.
func TestDeadLettersComeUpWithoutRestart(t *testing.T) {
	t.Parallel() // waits most of its time: see the Makefile's test target
	natsURL, js := squattedNATS(t)
	logs := &syncBuffer{}
	a := startAdminOn(t, natsURL, [2]time.Duration{50 * time.Millisecond, 200 * time.Millisecond}, logs)

	wantDLQPending(t, a, "subjects overlap")
	if status, rd := readyz(t, a); status != http.StatusOK || !strings.Contains(rd["dead_letters"], "not reachable yet") {
		t.Errorf("/readyz while the dead-letter stream cannot be made: %d %v; want 200, dead_letters saying why", status, rd)
	}
	jar, _ := cookiejar.New(nil)
	console := &http.Client{Jar: jar}
	resp, err := console.PostForm("http://"+a.AdminAddr+"/console/signin", url.Values{"token": {testAdminToken}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	consolePage := func() string {
		resp, err := console.Get("http://" + a.AdminAddr + "/console/dlq")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if page := consolePage(); !strings.Contains(page, "the dead-letter stream is not reachable yet") || !strings.Contains(page, "retrying") {
		t.Errorf("the console's dead-letter page while the stream cannot be made does not say so:\n%.2000s", page)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), `"attempt":3`); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no third attempt logged:\n%s", logs)
		}
	}
	wantDLQPending(t, a, "subjects overlap")

	// The operator's fix: SQUATTER goes; a dead letter comes.
	ctx := context.Background()
	if err := js.DeleteStream(ctx, "SQUATTER"); err != nil {
		t.Fatal(err)
	}
	var status int
	var body string
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if status, body = getDLQ(t, a); status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /admin/v1/dlq after the fix = %d %s; want 200 without a restart", status, body)
		}
	}
	m := nats.NewMsg(meter.DLQSubject)
	m.Header.Set(meter.HeaderReason, "late-dlq test")
	m.Header.Set(meter.HeaderEventID, "late-dlq-event")
	m.Data = []byte(`{"id":"late-dlq-event"}`)
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	status, body = getDLQ(t, a)
	var got struct {
		Data []struct {
			EventID string `json:"event_id"`
			Reason  string `json:"reason"`
		} `json:"data"`
	}
	if status != http.StatusOK || json.Unmarshal([]byte(body), &got) != nil || len(got.Data) != 1 || got.Data[0].Reason != "late-dlq test" {
		t.Fatalf("GET /admin/v1/dlq = %d %s; want the dead letter", status, body)
	}
	if page := consolePage(); !strings.Contains(page, "late-dlq test") {
		t.Errorf("the console's dead-letter page after the fix does not list the dead letter:\n%.2000s", page)
	}
	if status, rd := readyz(t, a); status != http.StatusOK || rd["dead_letters"] != "" {
		t.Errorf("/readyz once the dead-letter stream is made: %d %v; want 200, no dead_letters", status, rd)
	}
	var warns, infos int
	for _, l := range strings.Split(logs.String(), "\n") {
		switch {
		case strings.Contains(l, `"level":"WARN"`) && strings.Contains(l, "dead-letter"):
			warns++
		case strings.Contains(l, `"level":"INFO"`) && strings.Contains(l, "dead-letter endpoints are available"):
			infos++
		}
	}
	if warns != 1 || infos != 1 {
		t.Errorf("%d WARN lines about the dead-letter stream (want 1: the same failure again is at DEBUG), %d INFO that the endpoints are available (want 1):\n%s",
			warns, infos, logs)
	}
}

// TestStopDuringDeadLetterRetryIsPrompt: `tollgate admin` started before
// its NATS answers says so on its dead-letter endpoints, and its stop
// ends the background retry at once, whether it waits to try again or
// tries.
func TestStopDuringDeadLetterRetryIsPrompt(t *testing.T) {
	t.Parallel()
	for _, retry := range [][2]time.Duration{{time.Hour, time.Hour}, {time.Millisecond, time.Millisecond}} {
		a := startAdminOn(t, "nats://"+freeAddr(t), retry, io.Discard) // nothing listens there
		wantDLQPending(t, a, "")
		stopPrompt(t, a, "dead-letter stream")
	}
}

// stopPrompt runs the stop of a's component name, wanting it to return
// nil within a second.
func stopPrompt(t *testing.T, a *app, name string) {
	t.Helper()
	for _, st := range a.stops {
		if st.name != name {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), st.timeout)
		began := time.Now()
		err := st.stop(ctx)
		cancel()
		if took := time.Since(began); err != nil || took > time.Second {
			t.Fatalf("the stop of %s: %v after %v; want nil at once", name, err, took)
		}
		return
	}
	t.Fatalf("no %s started", name)
}

// readyz GETs a's /readyz: its status, and its fields that are strings.
func readyz(t *testing.T, a *app) (int, map[string]string) {
	t.Helper()
	resp, err := http.Get("http://" + a.AdminAddr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var all map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&all); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range all {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return resp.StatusCode, out
}

// TestDeadLettersComeUpOnceNATSDoes: `tollgate admin` started before its
// NATS answers lists the dead letters once NATS is up, without a restart.
func TestDeadLettersComeUpOnceNATSDoes(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	a := startAdminOn(t, "nats://"+addr, [2]time.Duration{50 * time.Millisecond, 200 * time.Millisecond}, io.Discard)
	wantDLQPending(t, a, "")
	natsOn(t, t.TempDir(), addr)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		status, body := getDLQ(t, a)
		if status == http.StatusOK && strings.Contains(body, `"data":[]`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /admin/v1/dlq once NATS is up = %d %s; want 200, no dead letters, without a restart", status, body)
		}
	}
	if status, rd := readyz(t, a); status != http.StatusOK || rd["dead_letters"] != "" {
		t.Errorf("/readyz once NATS is up: %d %v; want 200, no dead_letters", status, rd)
	}
}

// TestDeadLetterRetrySaysANewCause: while `tollgate admin` tries again to
// make the dead-letter stream, its waits double from the first to the
// longest and stay there (the log's next_in); a cause that changes (the
// squatting stream gone, the dead-letter stream sealed by hand) is logged
// at WARN once, where the same cause again is at DEBUG, and the 503 and
// /readyz give the new cause, not the start's: an operator who fixed one
// cause saw nothing of the next at the default level.
func TestDeadLetterRetrySaysANewCause(t *testing.T) {
	t.Parallel()
	natsURL, js := squattedNATS(t)
	logs := &syncBuffer{}
	a := startAdminOn(t, natsURL, [2]time.Duration{50 * time.Millisecond, 200 * time.Millisecond}, logs)
	type line struct {
		Level, Msg, Err string
		Attempt         int
		NextIn          string `json:"next_in"`
	}
	retries := func() []line {
		var out []line
		for l := range strings.Lines(logs.String()) {
			var r line
			if json.Unmarshal([]byte(l), &r) == nil && strings.HasPrefix(r.Msg, "dead-letter stream still not made") {
				out = append(out, r)
			}
		}
		return out
	}
	for deadline := time.Now().Add(10 * time.Second); len(retries()) < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no third retry logged:\n%s", logs)
		}
	}
	var got []string
	for _, r := range retries()[:3] {
		got = append(got, fmt.Sprintf("%d %s %s", r.Attempt, r.NextIn, r.Level))
	}
	if want := []string{"2 100ms DEBUG", "3 200ms DEBUG", "4 200ms DEBUG"}; !slices.Equal(got, want) {
		t.Fatalf("retries (attempt, next_in, level) %q, want %q (waits from 50ms doubling up to 200ms; the start's cause again at DEBUG)", got, want)
	}

	// A new cause: the dead-letter stream sealed, the squatter gone.
	ctx := context.Background()
	metertest.EditStream(t, js, meter.DLQStream, func(c *jetstream.StreamConfig) { c.Sealed = true })
	if err := js.DeleteStream(ctx, "SQUATTER"); err != nil {
		t.Fatal(err)
	}
	const cause = "can not unseal a sealed stream"
	warned := func() int {
		n := 0
		for _, r := range retries() {
			if strings.Contains(r.Err, cause) && r.Level == "WARN" {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); warned() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the new cause was not logged at WARN:\n%s", logs)
		}
	}
	wantDLQPending(t, a, cause)
	if status, rd := readyz(t, a); status != http.StatusOK || !strings.Contains(rd["dead_letters"], cause) {
		t.Errorf("/readyz after the cause changed: %d %v; want 200, dead_letters with the new cause", status, rd)
	}
	if n := warned(); n != 1 {
		t.Errorf("the new cause logged at WARN %d times, want once:\n%s", n, logs)
	}

	// The operator's fix: the sealed stream goes.
	if err := js.DeleteStream(ctx, meter.DLQStream); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if status, _ := getDLQ(t, a); status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /admin/v1/dlq after the fix is not 200:\n%s", logs)
		}
	}
}

// TestDeadLetterRetryWaitsASecondFirst: without waits set (as in
// production: no variable sets them), the admin role tries the dead-letter
// stream again after 1 s, then 2 s (dlqFirstWait): an operator's fix, or a
// NATS that starts after Tollgate, is picked up within seconds.
func TestDeadLetterRetryWaitsASecondFirst(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	a := startAdminOn(t, "nats://"+freeAddr(t), [2]time.Duration{}, logs) // nothing listens there
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(logs.String(), `"attempt":2,"next_in":"2s"`); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("15 s on, no second attempt logged with next_in 2s:\n%s", logs)
		}
	}
	stopPrompt(t, a, "dead-letter stream")
}
