package sim

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// maxBodyBytes bounds a request body, in bytes; larger bodies get a 413.
const maxBodyBytes = 8 << 20

// modelsCreated is the "created" of every listed model, in Unix seconds.
const modelsCreated = 1700000000

// ModelNames returns the model names GET /v1/models lists. Any other name is
// accepted too.
func ModelNames() []string { return []string{"sim-small", "sim-cache", "sim-reasoning", "sim-pro"} }

// Server is the simulator: an http.Handler serving the endpoints described in
// the package documentation. It is safe for concurrent use.
type Server struct {
	mux   *http.ServeMux
	now   func() time.Time
	log   *slog.Logger
	stats counters
	deps  deployments
}

// Option configures a Server.
type Option func(*Server)

// WithClock sets the clock that gives chunks their "created" time (Unix
// seconds). The default is time.Now.
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithLogger sets the logger for per-request debug records. The default
// discards them.
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// New returns a Server ready to serve, for example with
// httptest.NewServer(sim.New()).
func New(opts ...Option) *Server {
	s := &Server{now: time.Now, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(s)
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		s.serve(w, r, openaiCodec{})
	})
	s.mux.HandleFunc("POST /v1/embeddings", s.handleEmbeddings)
	s.mux.HandleFunc("POST /v1/completions", s.handleCompletions)
	s.mux.HandleFunc("POST /v1/responses", s.handleResponses)
	for _, prefix := range []string{"", "/anthropic"} {
		s.mux.HandleFunc("POST "+prefix+"/v1/messages", func(w http.ResponseWriter, r *http.Request) {
			s.serve(w, r, anthropicCodec{})
		})
		s.mux.HandleFunc("POST "+prefix+"/v1/messages/count_tokens", s.handleAnthropicCount)
	}
	for _, prefix := range []string{"", "/gemini"} {
		s.mux.HandleFunc("POST "+prefix+"/v1beta/models/{action}", s.handleGemini)
	}
	s.mux.HandleFunc("GET /v1/models", s.handleModels)
	s.mux.HandleFunc("GET /v1/models/{model}", s.handleModel)
	s.mux.HandleFunc("GET /stats", s.handleStats)
	s.mux.HandleFunc("POST /stats/reset", s.handleReset)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		var c codec = openaiCodec{}
		switch p := r.URL.Path; {
		case strings.HasPrefix(p, "/anthropic/"):
			c = anthropicCodec{}
		case strings.HasPrefix(p, "/gemini/"), strings.HasPrefix(p, "/v1beta/"):
			c = geminiCodec{}
		}
		c.writeError(w, http.StatusNotFound, "Unknown request URL: "+r.Method+" "+r.URL.Path)
	})
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 2 && !strings.HasPrefix(r.URL.Path, "/stats") {
		s.stats.http2.Add(1)
	}
	if strings.HasPrefix(r.URL.Path, "/d/") {
		s.serveDeployment(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// Stats returns the counters of what the simulator billed so far.
func (s *Server) Stats() Stats {
	st := s.stats.snapshot()
	st.ByDeployment = s.deps.snapshot()
	st.HTTP2Requests = s.stats.http2.Load()
	return st
}

// ResetStats zeroes the counters (not the in-flight gauges), as POST /stats/reset does.
func (s *Server) ResetStats() { s.stats.reset(); s.deps.reset() }

// tallies counts a request in its protocol's tally and, when it came in
// under a deployment, in that deployment's.
type tallies struct{ proto, dep *tally }

func (t *tallies) record(o outcome, u Usage) {
	t.proto.record(o, u)
	if t.dep != nil {
		t.dep.record(o, u)
	}
}

func (t *tallies) inFlight(n int64) {
	t.proto.inFlight.Add(n)
	if t.dep != nil {
		t.dep.inFlight.Add(n)
	}
}

// serve serves one model request in the protocol of c.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, c codec) {
	t := &tallies{s.stats.of(c.protocol()), nil}
	if name := deploymentOf(r); name != "" {
		t.dep = s.deps.of(name)
	}
	t.inFlight(1)
	defer t.inFlight(-1)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		t.record(outcomeBadRequest, Usage{})
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			c.writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
			return
		}
		c.writeError(w, http.StatusBadRequest, "read body: "+err.Error())
		return
	}
	var p *plan
	sp, err := c.parse(r, body)
	if err == nil {
		p, err = newPlan(c, sp, body, r.Header, s.now())
	}
	if err != nil {
		t.record(outcomeBadRequest, Usage{})
		c.writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	s.log.Debug("model request", "protocol", c.protocol(), "id", p.id, "model", p.model, "stream", p.stream,
		"completion_tokens", p.usage.CompletionTokens)
	var die bool
	if name := deploymentOf(r); name != "" {
		status, retryAfter, d, after := s.deps.take(name, p.stream)
		if status != 0 {
			p.status = status
			if retryAfter != "" {
				w.Header().Set("Retry-After", retryAfter)
			}
		}
		if d && after == 0 {
			die = true
		} else if d {
			p.fault.kind, p.fault.after = faultDisconnect, min(after, p.chunks)
		}
	}
	switch {
	case p.status != 0:
		t.record(outcomeStatus, Usage{})
		c.writeStatus(w, p.status)
	case die:
		t.record(outcomeDisconnected, Usage{})
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	case p.fault.kind == faultStallBefore, !p.stream && p.fault.kind == faultStall:
		<-r.Context().Done()
		t.record(outcomeStalled, Usage{})
	case p.stream:
		o, billed := s.stream(w, r, p, c.encoder(p))
		t.record(o, billed)
		if o == outcomeDisconnected {
			panic(http.ErrAbortHandler) // closes the connection without ending the response
		}
	default:
		c.writeResponse(w, p)
		t.record(outcomeOK, p.usage)
	}
}

func (s *Server) handleModels(w http.ResponseWriter, _ *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list"}
	for _, name := range ModelNames() {
		list.Data = append(list.Data, model{name, "model", modelsCreated, "tollgate-sim"})
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *Server) handleModel(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"id": r.PathValue("model"), "object": "model", "created": modelsCreated, "owned_by": "tollgate-sim",
	})
}

func (s *Server) handleStats(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Stats())
}

func (s *Server) handleReset(w http.ResponseWriter, _ *http.Request) {
	s.ResetStats()
	writeJSON(w, http.StatusOK, s.Stats())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
