package gateway

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// chatErrors is the envelope of the gateway's own routes: OpenAI's, the
// format of its chat completions API.
var chatErrors provider.Envelope = openai.Envelope{}

// Handler returns the HTTP routes: POST /v1/chat/completions,
// /v1/completions and /v1/embeddings, GET /v1/models and /v1/models/{id},
// every provider's native routes and token-counting endpoints, and GET
// /healthz. Every response carries X-Request-Id, X-Content-Type-Options:
// nosniff (its JSON echoes a path or a model name as sent, "<" included)
// and a Content-Security-Policy under which nothing runs (runNothing).
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(requestID)
	if s.metrics != nil {
		r.Use(s.metrics.countResponses)
	}
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	// served lists the routes, for the hint of a path an SDK with a
	// wrong base URL sends (routeHint).
	served := []servedRoute{{http.MethodPost, "/v1/chat/completions"}, {http.MethodPost, "/v1/completions"},
		{http.MethodPost, "/v1/embeddings"}, {http.MethodGet, "/v1/models"}, {http.MethodGet, "/v1/models/*"}}
	r.With(s.steps(chatErrors)...).Post("/v1/chat/completions", s.chatCompletions)
	r.With(s.steps(chatErrors)...).Post("/v1/completions", s.completions)
	r.With(s.steps(chatErrors)...).Post("/v1/embeddings", s.embeddings)
	r.With(s.authenticate(chatErrors)).Get("/v1/models", s.listModels)
	r.With(s.authenticate(chatErrors)).Get("/v1/models/*", s.getModel)
	for _, p := range s.providers {
		for _, c := range p.Counters {
			if c.Pattern != "" {
				r.With(s.steps(p.Errors)...).Post(c.Pattern, s.countTokens(p, c, p.Errors))
				served = append(served, servedRoute{http.MethodPost, c.Pattern})
			}
		}
		for i := range p.Routes {
			rt := &p.Routes[i]
			env := rt.Errors
			if env == nil {
				env = p.Errors
			}
			r.With(s.steps(env)...).Post(rt.Pattern, s.native(p, rt, env))
			served = append(served, servedRoute{http.MethodPost, rt.Pattern})
		}
	}
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		msg := "no route for " + r.Method + " " + r.URL.Path
		if strings.HasPrefix(r.URL.Path, "/admin/") || strings.HasPrefix(r.URL.Path, "/console/") || r.URL.Path == "/readyz" || r.URL.Path == "/metrics" {
			// An admin client (TOLLGATE_ADMIN_URL, --admin-url) or a
			// browser pointed at the LLM listener: say where it is.
			msg += " on the LLM API's listener: the admin API, the console, /readyz and /metrics are on the admin listener (TOLLGATE_ADMIN_LISTEN, :8081 by default)"
		} else if meant := routeHint(served, r.Method, r.URL.Path); meant != "" {
			msg += "; did you mean " + r.Method + " " + meant + "? Check the client's base URL: OpenAI's API is under /v1, each native API under its provider's prefix"
		}
		s.envelopeFor(r.URL.Path).WriteError(w, provider.Err(http.StatusNotFound, "invalid_request_error", "not_found", msg))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		s.envelopeFor(r.URL.Path).WriteError(w, provider.Err(http.StatusMethodNotAllowed, "invalid_request_error", "method_not_allowed",
			r.Method+" is not allowed on "+r.URL.Path))
	})
	return r
}

// servedRoute is a route the gateway serves: its method and its chi
// pattern (a trailing "*" matches any rest).
type servedRoute struct{ method, pattern string }

// matches reports whether path falls under the route's pattern.
func (sr servedRoute) matches(path string) bool {
	if prefix, ok := strings.CutSuffix(sr.pattern, "*"); ok {
		return len(path) > len(prefix) && strings.HasPrefix(path, prefix)
	}
	return path == sr.pattern
}

// routeHint is the served path a client most likely meant by a path no
// route takes, or "": the one an SDK sends when its base URL lacks /v1
// ("/chat/completions") or repeats it ("/v1/v1/…"), or lacks a native
// API's prefix (the gateway's root given to Anthropic's SDK posts
// "/v1/messages"). A native pattern's rest under the gateway's own /v1/
// is not offered: it would take any /v1 path.
func routeHint(served []servedRoute, method, path string) string {
	for _, sr := range served {
		if sr.method != method {
			continue
		}
		seg, rest, _ := strings.Cut(strings.TrimPrefix(sr.pattern, "/"), "/")
		switch {
		case seg == "v1" && sr.matches("/v1"+path):
			return "/v1" + path
		case seg == "v1" && strings.HasPrefix(path, "/v1/v1/") && sr.matches(path[len("/v1"):]):
			return path[len("/v1"):]
		case seg != "v1" && rest != "v1/*" && (servedRoute{sr.method, "/" + rest}).matches(path):
			return "/" + seg + path
		}
	}
	return ""
}

// envelopeFor is the envelope of the provider whose routes path falls
// under (a route itself, or the provider's own prefix such as
// /anthropic/), or OpenAI's.
func (s *Server) envelopeFor(path string) provider.Envelope {
	for _, p := range s.providers {
		for _, rt := range p.Routes {
			if p.Errors == nil {
				continue
			}
			pattern := strings.TrimSuffix(rt.Pattern, "*")
			seg, _, _ := strings.Cut(strings.TrimPrefix(pattern, "/"), "/")
			switch {
			case strings.HasPrefix(path, pattern) && rt.Errors != nil:
				return rt.Errors
			case strings.HasPrefix(path, pattern), seg != "v1" && strings.HasPrefix(path, "/"+seg+"/"):
				return p.Errors
			}
		}
	}
	return chatErrors
}

// requestState is what the gateway learns of a request before its handler
// runs: its id (requestID) and, on a metered or authenticated route, the
// state of its key (checkKey). It is one value in the request's context,
// filled in place: each http.Request.WithContext copies the whole request
// (about 250 bytes), and a stream keeps its copies for its whole life,
// four of them before (BENCHMARKS.md, "Issue 16, stop 40"). takeovers puts
// an empty one in the context it makes anyway.
type requestState struct {
	id     string
	key    usage.KeyState
	hasKey bool
	keyAt  time.Time // when key was read (checkKey, recheckKey)
	// arrived is when the request's first attempt started (newExchange):
	// the time of every attempt's event, zero before the first.
	arrived time.Time
	// held is the request's hold on its key's spend limits (holdSpend),
	// which its attempts' exchanges carry; nil when none.
	held *spendHold
	// uncount takes the request out of its key's requests of the minute
	// (limiter.admitCounted), for a request refused for its spend; nil
	// before its admission.
	uncount func()
}

type requestStateKey struct{}

// stateOf is r's requestState, nil before requestID or takeovers made one.
func stateOf(r *http.Request) *requestState {
	st, _ := r.Context().Value(requestStateKey{}).(*requestState)
	return st
}

// withState returns ctx carrying a new, empty requestState.
func withState(ctx context.Context) context.Context {
	return context.WithValue(ctx, requestStateKey{}, &requestState{})
}

// stateFor returns r carrying a requestState, and that state: r itself
// when it has one, else a copy of r with a new one.
func stateFor(r *http.Request) (*http.Request, *requestState) {
	if st := stateOf(r); st != nil {
		return r, st
	}
	st := &requestState{}
	return r.WithContext(context.WithValue(r.Context(), requestStateKey{}, st)), st
}

// requestID gives every request an id, a UUIDv7 (time-ordered, as the
// ledger's keys like), sent as X-Request-Id on every response, and as
// Request-Id too: the header Anthropic's API and SDKs read a request's id
// from (the SDK's Error.RequestID, shown in its errors). An upstream
// request's usage event carries it as its id.
func requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, withRequestID(w, r))
	})
}

// withRequestID is requestID's work, in a frame of its own that is gone
// before the handler runs (see steps).
//
//go:noinline
func withRequestID(w http.ResponseWriter, r *http.Request) *http.Request {
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	s := id.String()
	h, v := w.Header(), []string{s} // both headers share the value: one allocation, as one header took
	h["X-Request-Id"], h["Request-Id"] = v, v
	h["X-Content-Type-Options"], h["Content-Security-Policy"] = nosniff, runNothing
	r, st := stateFor(r)
	st.id = s
	return r
}

// nosniff is every answer's X-Content-Type-Options, shared (Header.Add
// appends to a copy: its capacity is its length).
var nosniff = []string{"nosniff"}

// runNothing is every answer's Content-Security-Policy: the gateway
// answers JSON and SSE, never a page, so should a browser render one
// (model output with markup, under a type an upstream chose), nothing in
// it runs, loads or frames.
var runNothing = []string{"default-src 'none'; frame-ancestors 'none'; sandbox"}

// requestIDOf is r's id (see requestID), or a new one for a request that
// did not pass requestID.
func requestIDOf(r *http.Request) string {
	if st := stateOf(r); st != nil && st.id != "" {
		return st.id
	}
	return uuid.NewString()
}
