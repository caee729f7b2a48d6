// Package gateway is Tollgate's LLM-facing HTTP surface: an OpenAI-compatible
// API in front of upstream providers that taps the usage of every request
// from the stream it forwards and hands one usage event per upstream request
// to the meter.
package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate-dev/tollgate/gateway/anthropic"
	"github.com/tollgate-dev/tollgate/gateway/gemini"
	"github.com/tollgate-dev/tollgate/gateway/usage"
	"github.com/tollgate-dev/tollgate/meter"
)

// KeyLookup authenticates customer API keys and admits their requests.
// The ledger's key snapshot implements it without touching the database on
// the request path.
type KeyLookup interface {
	// LookupKey returns the owner of an active key secret, or ok=false for
	// an unknown or revoked one; blocked, when not empty, says why the key
	// may not spend now (an exhausted balance or spend limit).
	LookupKey(secret string) (customerID, keyID, blocked string, ok bool)
}

// EventSink receives the one usage event of each upstream request. A sink
// that also has a method Accepting() error can refuse new requests (503)
// while it cannot take more events (a full spool).
type EventSink interface {
	// Publish returns once the event is durably accepted, or an error.
	Publish(ctx context.Context, e *meter.Event) error
}

// Server serves the LLM API. Create it with New.
type Server struct {
	cfg     Config
	keys    KeyLookup
	sink    EventSink
	log     *slog.Logger
	routes  *router
	client  *http.Client
	publish sync.WaitGroup
	est     *usage.Estimator
	// drains holds a token per stream being read after its client left.
	drains chan struct{}
	// translators serve chat completions from non-OpenAI providers, by type.
	translators map[string]chatUpstream
	mu          sync.Mutex
	active      map[*exchange]struct{}
	metrics     *metrics // nil: no metrics
}

// Buffer sizes of an upstream HTTP/1.1 connection, in bytes (net/http's
// default: 4 KiB each). An open connection holds both for its lifetime, so
// every stream, idle or not, holds them. The write buffer takes the request
// header; the part of a body that does not fit goes to the socket directly.
// The read buffer bounds what one read from the socket takes in when events
// arrive faster than they are relayed: at 1 KiB, 100 unpaced streams took
// three times as many read calls per chunk as at 4 KiB, at 2 KiB a third
// more (a stream's SSE reader reads the body through a buffer of its own).
const (
	upstreamReadBuffer  = 2 << 10
	upstreamWriteBuffer = 1 << 10
)

// New returns a Server for cfg, which it validates (see Config.Validate).
func New(cfg Config, keys KeyLookup, sink EventSink, log *slog.Logger, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 1024
	tr.ForceAttemptHTTP2 = true
	tr.ReadBufferSize, tr.WriteBufferSize = upstreamReadBuffer, upstreamWriteBuffer
	est, err := usage.NewEstimator()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, keys: keys, sink: sink, log: log, routes: newRouter(cfg),
		client: &http.Client{Transport: tr}, est: est, drains: make(chan struct{}, cfg.MaxDrains),
		translators: map[string]chatUpstream{"anthropic": anthropic.Chat{}, "gemini": gemini.Chat{}},
		active:      map[*exchange]struct{}{}}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Handler returns the HTTP routes: POST /v1/chat/completions, POST
// /v1/responses, GET /v1/models, the native pass-through endpoints POST
// /anthropic/v1/messages and POST
// /gemini/v1beta/models/{model}:streamGenerateContent (or :generateContent),
// and GET /healthz.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.metrics.countResponses)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	r.Group(func(r chi.Router) {
		r.Use(s.authenticate)
		r.Post("/v1/chat/completions", s.chatCompletions)
		r.Post("/v1/responses", s.responses)
		r.Post("/anthropic/v1/messages", s.anthropicMessages)
		r.Post("/gemini/v1beta/*", s.geminiGenerate)
		r.Get("/v1/models", s.listModels)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "invalid_request_error", "not_found", "no route for "+r.Method+" "+r.URL.Path)
	})
	return r
}

// CutOff ends every upstream request still in flight: for a shutdown whose
// grace period ran out. Each records its event (status cut_off) as it ends.
func (s *Server) CutOff() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for x := range s.active {
		x.cancel(errShutdown)
	}
}

// Wait blocks until every usage event of finished requests has been handed
// to the sink, or ctx ends. Call it after the HTTP server has shut down.
func (s *Server) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.publish.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type principalKey struct{}

type principal struct{ customerID, keyID string }

// authenticate accepts a customer key the way each protocol's SDKs send it:
// "Authorization: Bearer <key>" (OpenAI), "x-api-key" (Anthropic),
// "x-goog-api-key" or "?key=" (Gemini).
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret := customerKey(r)
		if secret == "" {
			writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
				"missing API key: send it as Authorization: Bearer <key>")
			return
		}
		cust, key, blocked, ok := s.keys.LookupKey(secret)
		if !ok {
			writeError(w, http.StatusUnauthorized, "invalid_request_error", "invalid_api_key",
				"incorrect or revoked API key")
			return
		}
		if a, ok := s.sink.(interface{ Accepting() error }); ok && r.Method == http.MethodPost {
			if err := a.Accepting(); err != nil {
				writeError(w, http.StatusServiceUnavailable, "service_unavailable", "metering_backlog",
					"the gateway cannot meter more requests now: "+err.Error())
				return
			}
		}
		if blocked != "" && r.Method == http.MethodPost {
			writeError(w, http.StatusPaymentRequired, "insufficient_quota", "insufficient_quota", blocked)
			return
		}
		ctx := context.WithValue(r.Context(), principalKey{}, principal{cust, key})
		next.ServeHTTP(newHeaderFlusher(w), r.WithContext(ctx))
	})
}

func customerKey(r *http.Request) string {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(v)
	}
	for _, h := range []string{"X-Api-Key", "X-Goog-Api-Key"} {
		if v := r.Header.Get(h); v != "" {
			return strings.TrimSpace(v)
		}
	}
	return r.URL.Query().Get("key")
}

func (s *Server) listModels(w http.ResponseWriter, _ *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: []model{}}
	for _, m := range s.cfg.Models {
		out.Data = append(out.Data, model{ID: m.Name, Object: "model", OwnedBy: m.Provider})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// emit hands e to the sink in the background, so that the client's response
// never waits on it; Wait waits for these.
func (s *Server) emit(e *meter.Event) {
	s.publish.Add(1)
	go func() {
		defer s.publish.Done()
		ctx := context.Background()
		if err := s.sink.Publish(ctx, e); err != nil {
			b, _ := json.Marshal(e)
			s.log.Error("usage event not published", "request_id", e.ID, "err", err, "event", string(b))
		}
	}()
}

// headerFlusher wraps the ResponseWriter of every authenticated request.
// net/http writes the response header in the first flush, or in the first
// write that overflows its 2 KiB response buffer; that call alone needs
// about 4 KiB of stack. Made from the depth of a stream relay, it doubles
// the handler goroutine's stack from 8 to 16 KiB, and the stack stays
// doubled for the life of the stream, since an idle stream blocks almost as
// deep (the runtime halves a stack only when less than a quarter of it is
// used). headerFlusher therefore makes that one call on a short-lived
// goroutine of its own, while the handler waits; later writes and flushes
// go straight through.
type headerFlusher struct {
	http.ResponseWriter
	rc       *http.ResponseController
	buffered int  // bytes written while the header was held back
	sent     bool // the header may have gone out
}

// bufferBeforeHeader is the size in bytes of net/http's response buffer
// (bufferBeforeChunkingSize): writes that fit in it send nothing yet.
const bufferBeforeHeader = 2048

func newHeaderFlusher(w http.ResponseWriter) *headerFlusher {
	return &headerFlusher{ResponseWriter: w, rc: http.NewResponseController(w)}
}

func (h *headerFlusher) Write(p []byte) (int, error) {
	if h.sent || h.buffered+len(p) <= bufferBeforeHeader {
		h.buffered += len(p)
		return h.ResponseWriter.Write(p)
	}
	h.sent = true
	var n int
	var err error
	aside(func() { n, err = h.ResponseWriter.Write(p) })
	return n, err
}

// FlushError flushes the response, as http.ResponseController.Flush does.
func (h *headerFlusher) FlushError() error {
	if h.sent {
		return h.rc.Flush()
	}
	h.sent = true
	var err error
	aside(func() { err = h.rc.Flush() })
	return err
}

// Unwrap returns the writer underneath, for http.ResponseController.
func (h *headerFlusher) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// aside runs f on a new goroutine, with a stack of its own, and waits for
// it; a panic in f is raised again in the caller.
func aside(f func()) {
	done := make(chan any)
	go func() {
		defer func() { done <- recover() }()
		f()
	}()
	if p := <-done; p != nil {
		panic(p)
	}
}
