package gateway

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// metrics are the gateway's Prometheus series. Labels are bounded: models
// outside the configured table count as "other", and no customer or key id
// is ever a label.
type metrics struct {
	requests    *prometheus.CounterVec
	responses   *prometheus.CounterVec
	tokens      *prometheus.CounterVec
	ttft        *prometheus.HistogramVec
	duration    *prometheus.HistogramVec
	upstreamErr *prometheus.CounterVec
	retries     *prometheus.CounterVec
	source      *prometheus.CounterVec
	inFlight    prometheus.Gauge
	models      map[string]bool
}

// newMetrics registers the gateway's metrics with reg.
func newMetrics(cfg Config, reg prometheus.Registerer) *metrics {
	{
		m := &metrics{models: map[string]bool{}}
		for _, mc := range cfg.Models {
			m.models[mc.Name] = true
		}
		f := func(name, help string, labels ...string) *prometheus.CounterVec {
			c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "tollgate", Subsystem: "gateway", Name: name, Help: help}, labels)
			reg.MustRegister(c)
			return c
		}
		m.requests = f("requests_total", "Upstream requests by outcome (the usage event's status).", "endpoint", "provider", "model", "status")
		m.responses = f("responses_total", "HTTP responses of the LLM API by status code (a code net/http has no name for, which an upstream may send, as its class: 4xx, 5xx), rejections included, and endpoint: the route served (/gemini for every Gemini route), other when none matched.", "endpoint", "code")
		m.tokens = f("tokens_total", "Tokens metered, by class (prompt includes cached and cache_write; completion includes reasoning).", "provider", "model", "class")
		m.upstreamErr = f("upstream_errors_total", "Upstream failures by kind: refused (the provider's own 4xx/5xx: its key, a model it does not serve, 429, 5xx), invalid_request (the provider refused the client's request: 400, 413, 422), unreachable (no connection or TLS), timeout (connect_timeout, stall_timeout, request_timeout), stream_error (a stream that broke or sent an error frame).", "provider", "kind")
		m.retries = f("retries_total", "Attempts that failed before the client's first byte and went on to another deployment, by the failed deployment.", "provider", "deployment")
		m.source = f("usage_source_total", "Usage events by provider and usage_source: upstream (the provider's report), partial (a report the gateway completed), estimated (the provider reported nothing: the tokenizer's count is billed); an event with no tokens (the upstream refused or was unreachable) is not counted.", "provider", "source")
		buckets := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
		m.ttft = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "tollgate", Subsystem: "gateway", Name: "ttft_seconds",
			Help: "Time from request to the first byte of content sent to the client.", Buckets: buckets}, []string{"provider", "model"})
		m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "tollgate", Subsystem: "gateway", Name: "duration_seconds",
			Help: "Time from request to the end of the response.", Buckets: buckets}, []string{"provider", "model", "stream"})
		m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "tollgate", Subsystem: "gateway", Name: "in_flight",
			Help: "Upstream requests in flight, draining ones included."})
		reg.MustRegister(m.ttft, m.duration, m.inFlight)
		return m
	}
}

func (m *metrics) model(name string) string {
	if m.models[name] {
		return name
	}
	return "other"
}

// observe records a finished exchange's event; unreached says its
// upstream could not be reached (upstream_errors_total kind "unreachable":
// not the provider's refusal, which "refused" counts); refusedWith is the
// HTTP status the upstream's refusal would have been answered with, 0 if
// none. An attempt that failed over to another deployment sent the client
// nothing (its event's HTTPStatus is 0): its kind is read from
// refusedWith, so that a provider's 503 is counted "refused" whether or not
// another deployment served the request. clientRefused counts an
// upstream's refusal of the client's own request "invalid_request",
// whatever its status (exchange.clientRefused).
func (m *metrics) observe(e *usage.Event, unreached bool, refusedWith int, clientRefused bool) {
	if m == nil {
		return
	}
	status := e.HTTPStatus
	if status == 0 {
		status = refusedWith
	}
	model := m.model(e.Model)
	m.requests.WithLabelValues(e.Endpoint, e.Provider, model, string(e.Status)).Inc()
	// An event with no tokens had nothing estimated (the upstream refused
	// or was not reached, and nothing is billed): counted "estimated", it
	// made a provider's 429s look like usage the gateway guessed.
	if e.Usage != (usage.Tokens{}) {
		m.source.WithLabelValues(e.Provider, string(e.UsageSource)).Inc()
	}
	u := e.Usage
	for _, c := range [...]struct {
		class string
		n     int64
	}{{"prompt", u.PromptTokens}, {"cached", u.CachedTokens}, {"cache_write", u.CacheWriteTokens},
		{"completion", u.CompletionTokens}, {"reasoning", u.ReasoningTokens}} {
		if c.n > 0 {
			m.tokens.WithLabelValues(e.Provider, model, c.class).Add(float64(c.n))
		}
	}
	if e.TTFTMillis > 0 {
		m.ttft.WithLabelValues(e.Provider, model).Observe(float64(e.TTFTMillis) / 1000)
	}
	m.duration.WithLabelValues(e.Provider, model, strconv.FormatBool(e.Stream)).Observe(float64(e.DurationMillis) / 1000)
	switch {
	case e.Status == usage.StatusTimeout:
		m.upstreamErr.WithLabelValues(e.Provider, "timeout").Inc()
	case e.Status == usage.StatusUpstreamError && unreached:
		m.upstreamErr.WithLabelValues(e.Provider, "unreachable").Inc()
	case e.Status == usage.StatusUpstreamError && (clientRefused || invalidRequest(status)):
		m.upstreamErr.WithLabelValues(e.Provider, "invalid_request").Inc()
	case e.Status == usage.StatusUpstreamError && status >= 400:
		m.upstreamErr.WithLabelValues(e.Provider, "refused").Inc()
	case e.Status == usage.StatusUpstreamError:
		m.upstreamErr.WithLabelValues(e.Provider, "stream_error").Inc()
	}
}

// invalidRequest reports whether status, an upstream's HTTP status, says
// the client's request was at fault (400 Bad Request, 413 Content Too
// Large, 422 Unprocessable Content: a bad field, too long a prompt), which
// every deployment would refuse too: upstream_errors_total counts it as
// kind "invalid_request", apart from the provider's own refusals (401 and
// 403 for its key, 404 for a model it does not serve, 429, 5xx), so that
// a tenant sending bad requests does not page the operator about a
// provider (TollgateUpstreamErrors leaves the kind out).
func invalidRequest(status int) bool {
	return status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge ||
		status == http.StatusUnprocessableEntity
}

// countResponses counts every response of the LLM API by status code and
// endpoint (endpointOf).
func (m *metrics) countResponses(next http.Handler) http.Handler {
	if m == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		m.responses.WithLabelValues(endpointOf(r), codeLabel(rec.code)).Inc()
	})
}

// codeLabel is the code label of a response of HTTP status code: the code
// when net/http names it (http.StatusText), else its class ("4xx", "5xx",
// ...). The gateway passes on the status an upstream answered, any code from
// 100 to 999: each one a label value of its own was a series in the gateway
// and in Prometheus for good, about 900 per endpoint for an upstream (or a
// client steering one) that answers every code.
func codeLabel(code int) string {
	if http.StatusText(code) != "" {
		return strconv.Itoa(code)
	}
	return strconv.Itoa(code/100) + "xx"
}

// endpointOf is the endpoint label of a request the router has served:
// the pattern of the route it matched (a bounded set: the routes Handler
// registers), "/gemini" for every Gemini route, "/v1/models/{id}" for one
// model, and "other" for a request no route matched. It reads chi's
// matched pattern rather than the path, so that a route added to Handler
// is counted under its own name; the gateway's router has no sub-routers,
// so the pattern is the last one matched, taken without a copy.
func endpointOf(r *http.Request) string {
	rc := chi.RouteContext(r.Context())
	if rc == nil || len(rc.RoutePatterns) == 0 {
		return "other"
	}
	switch p := rc.RoutePatterns[len(rc.RoutePatterns)-1]; {
	case p == "" || p == "/*":
		return "other"
	case strings.HasPrefix(p, "/gemini/"):
		return "/gemini"
	case p == "/v1/models/*":
		return "/v1/models/{id}"
	default:
		return p
	}
}

// statusRecorder remembers the status code while keeping Flush and Unwrap,
// so that http.ResponseController still reaches the real writer.
type statusRecorder struct {
	http.ResponseWriter
	code  int
	wrote bool
}

func (r *statusRecorder) WriteHeader(code int) {
	if !r.wrote {
		r.code, r.wrote = code, true
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
