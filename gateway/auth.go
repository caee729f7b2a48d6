package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// keyOf is the state of the request's authenticated key, nil before
// checkKey accepted one.
func keyOf(r *http.Request) *usage.KeyState {
	if st := stateOf(r); st != nil && st.hasKey {
		return &st.key
	}
	return nil
}

// customerOf is the customer id of key (keyOf's), "" when there is none.
func customerOf(key *usage.KeyState) string {
	if key == nil {
		return ""
	}
	return key.CustomerID
}

// steps are the middleware of a metered route: authenticate the key,
// admit the request while its usage can be metered, check the key's budget
// and its rate and concurrency limits (each answering a refusal in env, the
// route's error envelope), then give the handler the headerFlusher writer.
// They run as one middleware, and its checks in a function that has
// returned before the handler runs: every frame under the handler stays on
// the stack of a stream for its whole life, and a stream's handler
// goroutine keeps an 8 KiB stack only while its deepest point stays under
// it (see headerFlusher).
func (s *Server) steps(env provider.Envelope) []func(http.Handler) http.Handler {
	return []func(http.Handler) http.Handler{func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r, release := s.checkMetered(w, r, env)
			if r == nil {
				return
			}
			defer release()
			next.ServeHTTP(newHeaderFlusher(w, &s.chains), r)
		})
	}}
}

// checkMetered runs the checks of steps, in order, and returns the request
// carrying its key's state and the function that ends the request's count
// against its key's limits; or, having answered a refusal, nil.
//
//go:noinline
func (s *Server) checkMetered(w http.ResponseWriter, r *http.Request, env provider.Envelope) (*http.Request, func()) {
	r = s.checkKey(w, r, env)
	if r == nil {
		return nil, nil
	}
	if a, ok := s.sink.(Admitter); ok {
		// admit: refuse (503) while usage could not be metered: the sink
		// cannot take more events (its spool is full or too old).
		if err := a.Accepting(); err != nil {
			env.WriteError(w, provider.Err(http.StatusServiceUnavailable, "service_unavailable", "metering_backlog",
				"the gateway cannot meter more requests now: "+err.Error()))
			return nil, nil
		}
	}
	if jh, ok := s.journal.(JournalHealth); ok {
		// journal: refuse (503) while the crash journal cannot write (a
		// full disk): a request begun now would live in memory alone.
		if err := jh.Failing(); err != nil {
			env.WriteError(w, provider.Err(http.StatusServiceUnavailable, "service_unavailable", "metering_unavailable",
				"the gateway cannot meter more requests now: its crash journal cannot write ("+err.Error()+")"))
			return nil, nil
		}
	}
	// budget: refuse (402) a key that may not spend now: its daily or
	// monthly spend limit, or its customer's prepaid balance and credit,
	// is spent.
	if refuseBlocked(w, env, keyOf(r), time.Now()) {
		return nil, nil
	}
	// limit: refuse (429, with Retry-After) a request over its key's
	// max_concurrent, rpm_limit or tpm_limit, counted across the gateways
	// that share counts; an admitted request is counted until it ends, and
	// holds its prompt's estimate (its body's bytes / 4) against the
	// tpm_limit until then.
	if r.ContentLength < 0 && keyOf(r).TPMLimit > 0 {
		leave, over := s.limits.enterBuffering(keyOf(r)) // at most max_concurrent such bodies read at once
		if over != nil {
			refuseOverLimit(w, env, over)
			return nil, nil
		}
		ok := s.bufferBody(w, r, env)
		leave()
		if !ok {
			return nil, nil
		}
	}
	release, uncount, over := s.limits.admitCounted(keyOf(r), r.ContentLength/4)
	if over != nil {
		refuseOverLimit(w, env, over)
		return nil, nil
	}
	stateOf(r).uncount = uncount // a refusal for its spend (holdSpend) does not count against rpm_limit
	return r, release
}

// refuseBlocked answers 402 insufficient_quota and reports true when key k
// may not spend at now (usage.KeyState.BlockedAt says why). When the block
// ends by itself (a daily or monthly spend limit, at BlockedUntil), the
// answer's Retry-After gives the seconds until then, rounded up, as a
// 429's does.
func refuseBlocked(w http.ResponseWriter, env provider.Envelope, k *usage.KeyState, now time.Time) bool {
	blocked := k.BlockedAt(now)
	if blocked == "" {
		return false
	}
	if k.BlockedUntil != nil {
		wait := k.BlockedUntil.Sub(now)
		w.Header().Set("Retry-After", strconv.FormatInt(int64((wait+time.Second-1)/time.Second), 10))
	}
	env.WriteError(w, provider.Err(http.StatusPaymentRequired, "insufficient_quota", "insufficient_quota", blocked))
	return true
}

// refuseOverLimit answers 429 for a request over a limit, with Retry-After.
func refuseOverLimit(w http.ResponseWriter, env provider.Envelope, over *refusal) {
	w.Header().Set("Retry-After", strconv.Itoa(int(over.retryAfter.Seconds())))
	env.WriteError(w, provider.Err(http.StatusTooManyRequests, over.kind, "rate_limit_exceeded", over.message))
}

// bufferBody reads a request body sent without a length (chunked, or
// HTTP/2 without content-length) into memory, up to MaxRequestBytes, and
// sets r.ContentLength, so that the request holds its estimate against a
// tpm_limit from its admission: unknown, it would hold nothing, and
// requests sent together would each find the minute empty. It reports
// false once it has answered 413 or 400 in env.
func (s *Server) bufferBody(w http.ResponseWriter, r *http.Request, env provider.Envelope) bool {
	body, ok := s.readRequest(w, r, env)
	if ok {
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	return ok
}

// authenticate accepts a customer key the way each protocol's SDKs send
// it: "Authorization: Bearer <key>", or a provider's own way (x-api-key,
// x-goog-api-key, ?key=). An unknown, revoked or expired key gets 401.
func (s *Server) authenticate(env provider.Envelope) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r = s.checkKey(w, r, env); r != nil {
				next.ServeHTTP(w, r)
			}
		})
	}
}

// checkKey is authenticate's check: it returns the request carrying its
// key's state, or, having answered 401 (or 400 for a query string that
// does not parse whole, before the key is looked for in it), nil.
//
//go:noinline
func (s *Server) checkKey(w http.ResponseWriter, r *http.Request, env provider.Envelope) *http.Request {
	if msg := queryStringError(r.URL.RawQuery); msg != "" {
		env.WriteError(w, badRequest(msg))
		return nil
	}
	secret := s.customerKey(r)
	if secret == "" {
		hint := "send it as Authorization: Bearer <key>"
		if h, ok := env.(provider.KeyHinter); ok {
			hint = h.KeyHint()
		}
		env.WriteError(w, provider.Err(http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
			"missing API key: "+hint))
		return nil
	}
	k, ok := s.keys.LookupKey(secret)
	if !ok {
		env.WriteError(w, provider.Err(http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
			"incorrect or revoked API key"))
		return nil
	}
	now := time.Now()
	if k.ExpiredAt(now) {
		env.WriteError(w, provider.Err(http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
			"this API key expired at "+k.ExpiresAt.UTC().Format(time.RFC3339)))
		return nil
	}
	r, st := stateFor(r)
	st.key, st.hasKey, st.keyAt = k, true, now
	return r
}

// keyRecheckAfter is how old the key's state read at the request's
// headers may be when its body has arrived: older, it is read again
// (recheckKey). About a key change's propagation to the gateways.
const keyRecheckAfter = 50 * time.Millisecond

// recheckKey reads the request's key again, once its body has arrived,
// when the state checkKey read at its headers is older than
// keyRecheckAfter: a client that sent its headers and held its body back
// (up to read_timeout) was served on the key's old state after a
// revocation, an expiry, a spend block or an allowed_models change (an
// attacker review: 30 requests held this way spent 20 times a prepaid
// balance after the gateway answered 402). It answers 401 or 402 in env
// and reports false, or updates the request's key state.
func (s *Server) recheckKey(w http.ResponseWriter, r *http.Request, env provider.Envelope) bool {
	st := stateOf(r)
	if st == nil || !st.hasKey || time.Since(st.keyAt) < keyRecheckAfter {
		return true
	}
	k, ok := s.keys.LookupKey(s.customerKey(r))
	now := time.Now()
	switch {
	case !ok:
		env.WriteError(w, provider.Err(http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
			"incorrect or revoked API key"))
		return false
	case k.ExpiredAt(now):
		env.WriteError(w, provider.Err(http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
			"this API key expired at "+k.ExpiresAt.UTC().Format(time.RFC3339)))
		return false
	}
	if refuseBlocked(w, env, &k, now) {
		st.uncountRequest() // a spend refusal does not count against rpm_limit
		return false
	}
	st.key, st.keyAt = k, now
	return true
}

// customerKey is the key the request sends: "Authorization: Bearer
// <key>" (the scheme in any case, as RFC 9110 section 11.1 has it:
// clients that send "bearer" were told their key was missing), else the
// first provider's own way that finds one, in the order the providers
// were registered: a request sending two (x-api-key and x-goog-api-key)
// was authenticated by either, by the random order of a map.
func (s *Server) customerKey(r *http.Request) string {
	if v := r.Header.Get("Authorization"); len(v) > len("Bearer ") && strings.EqualFold(v[:len("Bearer ")], "Bearer ") {
		if k := strings.TrimSpace(v[len("Bearer "):]); k != "" {
			return k
		}
	}
	for _, key := range s.clientKeys {
		if k := key(r); k != "" {
			return strings.TrimSpace(k)
		}
	}
	return ""
}

// maxQueryParams is the most parameters (pairs between '&') a query
// string may have: net/url's own bound, past which url.Values drops the
// whole query (the admin API's api.MaxQueryParams).
const maxQueryParams = 10000

// queryStringError is why a query string (a URL's RawQuery) does not parse
// whole, or "" when it does. url.Values drops a pair with a bad %-escape
// (and every pair past maxQueryParams) without a word: ?key=abc%zz was
// read as no key (401), and Gemini's ?alt=sse%zz as no alt (a stream
// answered as one JSON body). The LLM routes refuse such a query with 400,
// as the admin and customer APIs do (api.QueryStringError).
func queryStringError(rawQuery string) string {
	if rawQuery == "" {
		return ""
	}
	if n := strings.Count(rawQuery, "&") + 1; n > maxQueryParams {
		return "too many query parameters: " + strconv.Itoa(n) + ", at most " + strconv.Itoa(maxQueryParams)
	}
	if _, err := url.ParseQuery(rawQuery); err != nil {
		return "malformed query string: " + err.Error()
	}
	return ""
}
