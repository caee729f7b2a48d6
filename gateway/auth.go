package gateway

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

type keyStateKey struct{}

// keyOf is the state of the request's authenticated key.
func keyOf(r *http.Request) *usage.KeyState {
	k, _ := r.Context().Value(keyStateKey{}).(*usage.KeyState)
	return k
}

// steps are the middleware of a metered route, in order: authenticate the
// key, admit the request while its usage can be metered, check the key's
// budget and its rate and concurrency limits; each answers a refusal in
// env, the route's error envelope.
func (s *Server) steps(env provider.Envelope) []func(http.Handler) http.Handler {
	return []func(http.Handler) http.Handler{s.authenticate(env), s.admit(env), s.budget(env), s.limit(env), wrapWriter}
}

// authenticate accepts a customer key the way each protocol's SDKs send
// it: "Authorization: Bearer <key>", or a provider's own way (x-api-key,
// x-goog-api-key, ?key=). An unknown, revoked or expired key gets 401.
func (s *Server) authenticate(env provider.Envelope) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			secret := s.customerKey(r)
			if secret == "" {
				hint := "send it as Authorization: Bearer <key>"
				if h, ok := env.(provider.KeyHinter); ok {
					hint = h.KeyHint()
				}
				env.WriteError(w, provider.Err(http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
					"missing API key: "+hint))
				return
			}
			k, ok := s.keys.LookupKey(secret)
			if !ok {
				env.WriteError(w, provider.Err(http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
					"incorrect or revoked API key"))
				return
			}
			if k.ExpiredAt(time.Now()) {
				env.WriteError(w, provider.Err(http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
					"this API key expired at "+k.ExpiresAt.UTC().Format(time.RFC3339)))
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyStateKey{}, &k)))
		})
	}
}

func (s *Server) customerKey(r *http.Request) string {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(v)
	}
	for _, p := range s.providers {
		if p.ClientKey != nil {
			if k := p.ClientKey(r); k != "" {
				return strings.TrimSpace(k)
			}
		}
	}
	return ""
}

// admit refuses requests (503) while their usage could not be metered:
// the sink cannot take more events (its spool is full or too old).
func (s *Server) admit(env provider.Envelope) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if a, ok := s.sink.(Admitter); ok {
				if err := a.Accepting(); err != nil {
					env.WriteError(w, provider.Err(http.StatusServiceUnavailable, "service_unavailable", "metering_backlog",
						"the gateway cannot meter more requests now: "+err.Error()))
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// budget refuses (402) a key that may not spend now: its daily or monthly
// spend limit, or its customer's prepaid balance and credit, is spent.
func (s *Server) budget(env provider.Envelope) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if blocked := keyOf(r).BlockedAt(time.Now()); blocked != "" {
				env.WriteError(w, provider.Err(http.StatusPaymentRequired, "insufficient_quota", "insufficient_quota", blocked))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// limit refuses (429, with Retry-After) a request over its key's
// max_concurrent, rpm_limit or tpm_limit, counted across the gateways
// that share counts; an admitted request is counted until it ends.
func (s *Server) limit(env provider.Envelope) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			release, over := s.limits.admit(keyOf(r))
			if over != nil {
				w.Header().Set("Retry-After", strconv.Itoa(int(over.retryAfter.Seconds())))
				env.WriteError(w, provider.Err(http.StatusTooManyRequests, over.kind, "rate_limit_exceeded", over.message))
				return
			}
			defer release()
			next.ServeHTTP(w, r)
		})
	}
}

// wrapWriter gives a metered route's handler the headerFlusher writer (see
// headerFlusher).
func wrapWriter(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(newHeaderFlusher(w), r)
	})
}
