package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestFailedAdminAuthenticationsAreLoggedAtMostOnceASecond: a wrong admin
// token was answered 401 and nothing else, so an operator never learned
// that someone was guessing. Each failure is now counted into a WARN line
// written at most once a second, with where it came from and never the
// token sent.
func TestFailedAdminAuthenticationsAreLoggedAtMostOnceASecond(t *testing.T) {
	var buf bytes.Buffer
	a, err := NewAdmin(nil, "the-admin-token", slog.New(slog.NewJSONHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC)
	a.authFails.now = func() time.Time { return now }
	h := a.Handler()
	addr := "203.0.113.7:4242"
	try := func(authorization string) {
		t.Helper()
		req := httptest.NewRequest("GET", "/admin/v1/customers", nil)
		req.RemoteAddr = addr
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("Authorization %q: %d, want 401", authorization, rec.Code)
		}
	}
	lines := func() []map[string]any {
		t.Helper()
		var out []map[string]any
		for l := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
			if l == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("log line %q: %v", l, err)
			}
			out = append(out, m)
		}
		return out
	}

	try("Bearer guess-1")
	for i := range 50 {
		now = now.Add(10 * time.Millisecond)
		addr = fmt.Sprintf("203.0.113.%d:4242", 8+i) // one address would be slowed down (guesses.go)
		try("Bearer guess-" + string(rune('a'+i%26)))
	}
	if got := lines(); len(got) != 1 {
		t.Fatalf("51 failures within a second: %d lines, want 1:\n%s", len(got), buf.String())
	}
	now = now.Add(time.Second)
	try("")
	got := lines()
	if len(got) != 2 {
		t.Fatalf("a failure a second later: %d lines, want 2:\n%s", len(got), buf.String())
	}
	first, second := got[0], got[1]
	if first["level"] != "WARN" || first["msg"] != "admin authentication failed" || first["failures"] != 1.0 ||
		first["remote_addr"] != "203.0.113.7:4242" || first["path"] != "/admin/v1/customers" || first["reason"] != "wrong token" {
		t.Errorf("first line: %v", first)
	}
	if second["failures"] != 51.0 || second["reason"] != "no Authorization header" {
		t.Errorf("second line: %v, want failures 51 (the 50 folded in and itself), reason no Authorization header", second)
	}
	if strings.Contains(buf.String(), "guess") {
		t.Errorf("a token sent was logged:\n%s", buf.String())
	}
}

// TestAdminTokenIsComparedWhole: the token is compared by its SHA-256
// digest (so that a guess of another length takes the same time as one of
// the token's; subtle.ConstantTimeCompare returned at once on a length
// that differs): only the whole token, byte for byte, is taken.
func TestAdminTokenIsComparedWhole(t *testing.T) {
	a, err := NewAdmin(nil, "the-admin-token", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if !a.isToken("the-admin-token") {
		t.Fatal("the token itself was refused")
	}
	for _, guess := range []string{"", "the-admin-toke", "the-admin-token ", "the-admin-tokenx", "The-admin-token", "the-admin-token\x00"} {
		if a.isToken(guess) {
			t.Errorf("%q taken for the token", guess)
		}
	}
}
