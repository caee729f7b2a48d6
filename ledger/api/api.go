// Package api serves the admin API (/admin/v1) over the ledger: customers,
// API keys, prices and usage queries, for operators holding the admin
// token; and it is the API's client (Client), which turns the API's error
// answers back into ledger errors through the same table (errors.go).
package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/tollgate-dev/tollgate/ledger"
)

// Admin serves the admin API over a ledger Store.
type Admin struct {
	store *ledger.Store
	// tokenHash is the SHA-256 digest of the admin token (see isToken).
	tokenHash [sha256.Size]byte
	log       *slog.Logger
	dlq       atomic.Pointer[dlqState] // set while the API serves (SetDeadLetters, SetDeadLettersPending)
	sync      KeySync
	// authFails logs failed authentications (authlog.go).
	authFails *authFailures
	// guesses slows down wrong tokens per client address (guesses.go).
	guesses *guesses
	// exportWait bounds each write of an export (ExportWriteTimeout).
	exportWait time.Duration
}

// NewAdmin returns the admin API; every /admin/v1 request must carry
// "Authorization: Bearer <token>". It returns an error for an empty token.
func NewAdmin(store *ledger.Store, token string, log *slog.Logger) (*Admin, error) {
	if token == "" {
		return nil, errors.New("the admin token is empty: set TOLLGATE_ADMIN_TOKEN")
	}
	return &Admin{store: store, tokenHash: sha256.Sum256([]byte(token)), log: log, authFails: &authFailures{log: log, now: time.Now},
		guesses: newGuesses(), exportWait: ExportWriteTimeout}, nil
}

// isToken reports whether got is the admin token, in time that depends on
// neither's content nor length: their SHA-256 digests are compared in
// constant time (subtle.ConstantTimeCompare alone returns at once on a
// length that differs, telling a guesser the token's length).
func (a *Admin) isToken(got string) bool {
	h := sha256.Sum256([]byte(got))
	return subtle.ConstantTimeCompare(h[:], a.tokenHash[:]) == 1
}

// Handler returns the routes: GET /healthz, and under /admin/v1 the
// customers, keys, prices, overrides, entries, balances, events, usage and
// re-rating operations that openapi.json describes. A query parameter an
// operation does not take is refused with 400 (checkQuery), as is, on any
// route under /admin/v1, a query string that does not parse whole
// (QueryStringError).
func (a *Admin) Handler() http.Handler {
	r := chi.NewRouter()
	top := r
	// HEAD of a GET route is answered as GET, without the body (RFC 9110,
	// section 9.3.2), as the console's is; it was refused with 405.
	r.Use(middleware.GetHead)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/admin/v1/openapi.json", a.openAPI) // the API's description: no token needed
	r.Route("/admin/v1", func(r chi.Router) {
		r.Use(private, a.authenticate, func(next http.Handler) http.Handler { return checkRoutedQuery(top, next) })
		customer, key, event := r.With(a.validID("customer")), r.With(a.validID("key")), r.With(a.validID("event"))
		r.Post("/customers", a.createCustomer)
		r.Get("/customers", a.listCustomers)
		customer.Get("/customers/{id}", a.getCustomer)
		customer.Patch("/customers/{id}", a.patchCustomer)
		customer.Post("/customers/{id}/keys", a.createKey)
		customer.Get("/customers/{id}/keys", a.listKeys)
		key.Get("/keys/{id}", a.getKey)
		key.Patch("/keys/{id}", a.patchKey)
		key.Post("/keys/{id}/revoke", a.revokeKey)
		r.Post("/prices", a.createPrice)
		r.Get("/prices", a.listPrices)
		customer.Post("/customers/{id}/overrides", a.createOverride)
		customer.Get("/customers/{id}/overrides", a.listOverrides)
		customer.Post("/customers/{id}/credits", a.addEntry(ledger.KindCredit))
		customer.Post("/customers/{id}/adjustments", a.addEntry(ledger.KindAdjustment))
		customer.Get("/customers/{id}/entries", a.listEntries)
		customer.Get("/customers/{id}/balance", a.balance)
		r.Post("/entries/{id}/reverse", a.reverseEntry)
		event.Post("/events/{id}/refund", a.refundEvent)
		event.Get("/events/{id}", a.getEvent)
		r.Get("/usage", a.usage)
		r.Post("/rerate", a.rerate)
		customer.Get("/customers/{id}/statements/{period}", a.statement)
		r.Get("/export", a.export)
		r.Get("/reconciliation", a.reconciliation)
		r.Get("/dlq", a.listDLQ)
		r.Post("/dlq/replay", a.replayDLQ)
		r.Post("/dlq/remove", a.removeDLQ)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, ledger.ENotFound, "no route for "+r.Method+" "+r.URL.Path)
	})
	// A method a path does not take: 405 with the envelope (type invalid)
	// and, as chi's own answer had, the methods it takes in Allow; chi's
	// own answer had no body, which Client read as an internal error.
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch} {
			if top.Match(chi.NewRouteContext(), m, r.URL.Path) {
				w.Header().Add("Allow", m)
			}
		}
		writeEnvelope(w, http.StatusMethodNotAllowed, ledger.EInvalid, r.Method+" is not allowed on "+r.URL.Path)
	})
	return r
}

// bearer returns the token of r's Authorization header: the Bearer
// scheme, in any case, and spaces around the token (RFC 9110, section
// 11.1: "1*SP"), as the LLM routes and the customer API read it; ok is
// false for another scheme or none (a bare token was taken once, which
// they refuse).
func bearer(r *http.Request) (token string, ok bool) {
	v := r.Header.Get("Authorization")
	if len(v) > len("Bearer ") && strings.EqualFold(v[:len("Bearer ")], "Bearer ") {
		return strings.TrimSpace(v[len("Bearer "):]), true
	}
	return "", false
}

// Authorized reports whether r carries the admin token (Authorization:
// Bearer), compared as authenticate compares it, from an address that may
// still guess (guesses.go): from one that must wait, every token is
// refused alike, as authenticate refuses it, so that what is done with the
// request (the admin listener reads ahead the bodies of authorized
// requests alone: Listener.SetTrusted) does not tell the right token from
// the others past the guess limit.
func (a *Admin) Authorized(r *http.Request) bool {
	got, ok := bearer(r)
	return ok && a.guesses.mustWait(r, a.authFails.now()) == 0 && a.isToken(got)
}

func (a *Admin) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := a.authFails.now()
		v := r.Header.Get("Authorization")
		if d := a.guesses.mustWait(r, now); v != "" && d > 0 {
			a.authFails.failed(r, "too many wrong tokens from this address")
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter(d)))
			writeError(w, ledger.ERateLimited, fmt.Sprintf("too many wrong admin tokens from this address: try again in %d s (%d may be sent at once, then one every %s)",
				retryAfter(d), GuessBurst, GuessEvery))
			return
		}
		got, ok := bearer(r)
		if !ok || !a.isToken(got) {
			reason := "wrong token"
			switch {
			case v == "":
				reason = "no Authorization header"
			case !ok:
				reason = "not the Bearer scheme"
			}
			a.authFails.failed(r, reason)
			if v != "" {
				a.guesses.failed(r, now)
			}
			writeError(w, ledger.EUnauthorized, "missing or wrong admin token (Authorization: Bearer $TOLLGATE_ADMIN_TOKEN)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// fail answers err: a ledger error with its code's status (errors.go),
// anything else as an internal error, logged.
func (a *Admin) fail(w http.ResponseWriter, r *http.Request, err error) {
	if cause := context.Cause(r.Context()); cause != nil && errors.Is(err, context.DeadlineExceeded) {
		var le *ledger.Error
		if errors.As(cause, &le) { // a deadline of the route's own (the customer API's)
			err = le
		}
	}
	code, msg := a.errorAnswer(r, err)
	writeError(w, code, msg)
}

// errorAnswer is the code and message err is answered with: a ledger
// error's own, anything else internal, logged and not shown.
func (a *Admin) errorAnswer(r *http.Request, err error) (code, msg string) {
	code = ledger.ErrorCode(err)
	if code == "" && ledger.Down(err) {
		a.log.Warn("admin api: the database is not answering", "method", r.Method, "path", r.URL.Path, "err", err)
		return ledger.EUnavailable, "the ledger database is not reachable now; retry shortly"
	}
	if errorStatus(code) == 0 || code == ledger.EInternal {
		a.log.Error("admin api", "method", r.Method, "path", r.URL.Path, "err", err)
		return ledger.EInternal, "internal error; see the server log"
	}
	return code, err.Error()
}

// private marks every answer of the admin and customer APIs as not to be
// stored by a cache or a browser (a new key's secret, a customer's usage
// and request log: a review found the customer API's answers, which a key
// in the query string also reaches, cacheable and sniffable on the portal's
// origin), nor read as another type than its Content-Type, nor run, load
// or be framed as a page should a browser render one (runNothing): they
// share their origins with the portal and the console, and echo what
// customers chose (end-user ids, memos, model names).
func private(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", runNothing)
		next.ServeHTTP(w, r)
	})
}

// runNothing is the Content-Security-Policy of every answer of the APIs,
// as of the gateway's: they answer JSON, NDJSON and CSV, never a page.
const runNothing = "default-src 'none'; frame-ancestors 'none'; sandbox"

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // never after a 200: a value JSON cannot hold is the server's fault
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"internal error: the answer cannot be encoded"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// parseTime accepts RFC 3339 timestamps and YYYY-MM-DD dates (UTC
// midnight) of the years 0001 to 9998: Postgres has no year 0, and a range
// or period rounded up from late 9999 would end in a year JSON cannot hold.
// Any other is EInvalid naming field, saying how to write a space where a
// "T" or an offset's "+" belongs, or a "," before a second's fraction
// (commaFraction).
func parseTime(field, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if err := commaFraction(field, s); err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t, err = time.Parse(time.DateOnly, s)
	}
	if err == nil {
		if y := t.UTC().Year(); y < 1 || y > 9998 {
			return time.Time{}, &ledger.Error{Code: ledger.EInvalid,
				Message: fmt.Sprintf("%s: %q is outside the years 0001 to 9998", field, s)}
		}
		return t, nil
	}
	msg := fmt.Sprintf("%s: %q is neither RFC 3339 (2026-01-31T00:00:00Z) nor a date (2026-01-31)", field, s)
	rest := s
	if len(s) > len(time.DateOnly) && s[len(time.DateOnly)] == ' ' {
		// The date and the time separated by a space: Python's
		// str(datetime), whose "+" its HTTP clients send as %2B.
		msg += `; write a "T" between the date and the time (2026-01-31T00:00:00Z), not a space`
		rest = s[len(time.DateOnly)+1:]
	}
	if strings.Contains(rest, " ") {
		// A "+" of an offset sent unencoded in a query string arrives as a space.
		msg += `; a "+" in a query string must be sent as %2B (2026-01-31T00:00:00%2B05:30)`
	}
	return time.Time{}, &ledger.Error{Code: ledger.EInvalid, Message: msg}
}

func contextWith(r *http.Request, k, v any) context.Context {
	return context.WithValue(r.Context(), k, v)
}
