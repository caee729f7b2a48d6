package web_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/ledger/web"
)

// lockedLog is a log buffer safe for the server's goroutines.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestConsoleSigninFailureNamesTheBrowser: a wrong token at the console's
// sign-in is logged by the admin API ("admin authentication failed") with
// the browser's address, which the runbook says to trace; the console's
// in-process call to the API logged remote_addr "" (a new user's review).
func TestConsoleSigninFailureNamesTheBrowser(t *testing.T) {
	var logs lockedLog
	log := slog.New(slog.NewTextHandler(&logs, nil))
	adm, err := api.NewAdmin(ledgertest.NewStore(t), adminToken, log)
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	console := web.NewConsole(adm.Handler(), 0, log)
	t.Cleanup(console.Close)
	console.Routes(r)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	resp, err := http.PostForm(srv.URL+"/console/signin", url.Values{"token": {"not-the-token"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %d, want 401", resp.StatusCode)
	}
	out := logs.String()
	if !strings.Contains(out, "admin authentication failed") || !strings.Contains(out, "remote_addr=127.0.0.1:") {
		t.Fatalf("the failed sign-in is not logged with the browser's address:\n%s", out)
	}
}

// TestConsoleSigninIsSlowedDownAfterWrongTokens: nothing slowed down
// guessing the admin token at the console's sign-in. The admin API now
// answers an address past api.GuessBurst wrong tokens 429 (guesses.go),
// and the console, which asks it with the browser's address, says so:
// 429, "try again", the right token refused too until the wait is over.
func TestConsoleSigninIsSlowedDownAfterWrongTokens(t *testing.T) {
	adm, err := api.NewAdmin(ledgertest.NewStore(t), adminToken, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	console := web.NewConsole(adm.Handler(), 0, slog.New(slog.DiscardHandler))
	t.Cleanup(console.Close)
	console.Routes(r)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	signIn := func(token string) (int, string) {
		t.Helper()
		resp, err := client.PostForm(srv.URL+"/console/signin", url.Values{"token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}
	for i := range api.GuessBurst {
		if code, _ := signIn("not-the-token"); code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, code)
		}
	}
	code, page := signIn(adminToken)
	if code != http.StatusTooManyRequests || !strings.Contains(page, "try again in") {
		t.Fatalf("the right token after %d wrong ones: %d, want 429 saying when to try again:\n%s", api.GuessBurst, code, page)
	}
}
