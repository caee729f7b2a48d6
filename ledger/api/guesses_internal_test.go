package api

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestWrongAdminTokensAreSlowedDown: nothing slowed down guessing the
// admin token (a short one, as the demo's, could be found by trying). An
// address may now send GuessBurst wrong tokens, then one every GuessEvery;
// past that it is answered 429 with Retry-After, even with the right
// token, while another address, and the same one once it has waited, is
// answered as before. A right token spends nothing.
func TestWrongAdminTokensAreSlowedDown(t *testing.T) {
	a, err := NewAdmin(nil, "the-admin-token", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	a.authFails.now = func() time.Time { return now }
	h := a.Handler()
	// /admin/v1/nothing-here: past authentication a route that needs no
	// store (404), so that an authenticated request is told apart.
	try := func(addr, token string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest("GET", "/admin/v1/nothing-here", nil)
		req.RemoteAddr = addr
		req.Header.Set("Authorization", "Bearer "+token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	const guesser, other = "198.51.100.9:5000", "198.51.100.10:5000"
	if rec := try(guesser, "the-admin-token"); rec.Code != http.StatusNotFound {
		t.Fatalf("the right token: %d %s, want 404 (authenticated)", rec.Code, rec.Body)
	}
	for i := range GuessBurst {
		if rec := try(guesser, "guess"); rec.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d, want 401", i+1, rec.Code)
		}
		if i == 4 { // a right token between them spends nothing
			if rec := try(guesser, "the-admin-token"); rec.Code != http.StatusNotFound {
				t.Fatalf("the right token after 5 wrong: %d, want 404", rec.Code)
			}
		}
	}
	for _, token := range []string{"guess", "the-admin-token"} {
		rec := try(guesser, token)
		if rec.Code != http.StatusTooManyRequests || answerError(rec.Code, rec.Body.Bytes()).Code != ledger.ERateLimited {
			t.Fatalf("token %q after %d wrong ones: %d %s, want 429 rate_limit_exceeded", token, GuessBurst, rec.Code, rec.Body)
		}
		if s, _ := strconv.Atoi(rec.Header().Get("Retry-After")); s < 1 || s > int(GuessEvery/time.Second) {
			t.Fatalf("Retry-After %q, want 1..%d s", rec.Header().Get("Retry-After"), int(GuessEvery/time.Second))
		}
	}
	// A request without a token guesses nothing: 401 as ever, and not
	// counted (probing the routes unauthenticated reads their 401s).
	bare := httptest.NewRequest("GET", "/admin/v1/nothing-here", nil)
	bare.RemoteAddr = guesser
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, bare)
	if rec.Code != http.StatusUnauthorized {
		t.Fatalf("no token from the slowed-down address: %d, want 401", rec.Code)
	}
	for range 3 * GuessBurst {
		bare.RemoteAddr = "198.51.100.77:5000"
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, bare)
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("no token, again and again: %d, want 401", rec.Code)
		}
	}
	if rec := try("198.51.100.77:5000", "the-admin-token"); rec.Code != http.StatusNotFound {
		t.Fatalf("the right token after %d requests without one: %d, want 404", 3*GuessBurst, rec.Code)
	}
	if rec := try(other, "the-admin-token"); rec.Code != http.StatusNotFound {
		t.Fatalf("another address, the right token: %d, want 404", rec.Code)
	}
	if rec := try("[2001:db8::1]:5000", "guess"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("an IPv6 address's first wrong token: %d, want 401", rec.Code)
	}
	now = now.Add(GuessEvery)
	if rec := try(guesser, "guess"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("after %s, one more wrong token: %d, want 401", GuessEvery, rec.Code)
	}
	if rec := try(guesser, "the-admin-token"); rec.Code != http.StatusTooManyRequests {
		t.Fatalf("and then the right one at once: %d, want 429", rec.Code)
	}
	now = now.Add(GuessEvery)
	if rec := try(guesser, "the-admin-token"); rec.Code != http.StatusNotFound {
		t.Fatalf("the right token after waiting: %d, want 404", rec.Code)
	}
}

// TestGuessesCountAnIPv6SlashSixtyFour: an IPv6 host has a /64 to pick its
// addresses from; its wrong tokens count together.
func TestGuessesCountAnIPv6SlashSixtyFour(t *testing.T) {
	g := newGuesses()
	now := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	for i := range GuessBurst {
		r := &http.Request{RemoteAddr: "[2001:db8:1:2::" + strconv.FormatInt(int64(i+1), 16) + "]:443"}
		g.failed(r, now)
	}
	if d := g.wait(&http.Request{RemoteAddr: "[2001:db8:1:2:ffff::1]:443"}, now); d <= 0 {
		t.Fatal("another address of the same /64 may guess at once")
	}
	if d := g.wait(&http.Request{RemoteAddr: "[2001:db8:1:3::1]:443"}, now); d != 0 {
		t.Fatalf("another /64 waits %s", d)
	}
}

// TestGuessesRememberedAreBounded: wrong tokens from more addresses than
// guessAddrs are not remembered one by one: the addresses past the bound
// share one allowance, and addresses whose allowance has refilled make
// room.
func TestGuessesRememberedAreBounded(t *testing.T) {
	g := newGuesses()
	now := time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)
	addr := func(i int) *http.Request {
		return &http.Request{RemoteAddr: "10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255) + ":1"}
	}
	for i := range guessAddrs + GuessBurst {
		g.failed(addr(i), now)
	}
	if len(g.by) != guessAddrs {
		t.Fatalf("%d addresses remembered, want %d", len(g.by), guessAddrs)
	}
	if d := g.wait(addr(guessAddrs+GuessBurst+1), now); d <= 0 {
		t.Fatalf("a new address past the bound, after %d of them guessed wrong, may guess at once", GuessBurst)
	}
	now = now.Add(GuessBurst * GuessEvery)
	g.failed(addr(1<<20), now)
	if len(g.by) != 1 {
		t.Fatalf("after every allowance refilled: %d addresses remembered, want 1 (the new one)", len(g.by))
	}
}
