package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/gateway/usage"
	"github.com/tollgate-dev/tollgate/meter"
)

// Why an upstream request was cut short, as context causes.
var (
	errConnectTimeout = errors.New("upstream did not answer within connect_timeout")
	errStalled        = errors.New("upstream sent nothing within stall_timeout")
	errDrainTimeout   = errors.New("client gone; upstream usage did not arrive within drain_timeout")
	errDrainsFull     = errors.New("client gone; max_drains streams were already draining")
	errShutdown       = errors.New("cut off: the gateway shut down and its grace period ran out")
)

// exchange is one upstream request in flight: its context, which outlives
// the client's by at most DrainTimeout, the usage report its tap fills in,
// and the event it becomes.
type exchange struct {
	s          *Server
	start      time.Time
	event      *meter.Event
	report     usage.Report
	promptText func() string // the request's prompt, for estimates
	clientGone atomic.Bool
	// complete is set before the response's last write: a client that
	// hangs up after it (an SDK closing at [DONE]) did not cancel.
	complete   atomic.Bool
	ctx        context.Context
	cancel     context.CancelCauseFunc
	stopWatch  func() bool
	stall      *time.Timer
	stallAfter time.Duration
	left       chan struct{} // closed when clientLeft has run
	draining   bool          // holds a drain slot; written before left closes
	drainTimer *time.Timer
	responded  bool // the upstream answered 200
}

// newExchange starts the exchange of request r, routed by rt, and sets
// X-Request-Id on the response.
func (s *Server) newExchange(w http.ResponseWriter, r *http.Request, rt route, endpoint string, stream bool) *exchange {
	start := time.Now()
	who := r.Context().Value(principalKey{}).(principal)
	id, _ := uuid.NewV7()
	x := &exchange{s: s, start: start, stallAfter: rt.provider.StallTimeout, promptText: func() string { return "" },
		left: make(chan struct{}),
		event: &meter.Event{
			Version: meter.SchemaVersion, ID: id.String(), Time: start.UTC(),
			CustomerID: who.customerID, KeyID: who.keyID, Provider: rt.provider.Name, Model: rt.model,
			Endpoint: endpoint, Stream: stream, Status: meter.StatusOK,
		}}
	w.Header().Set("X-Request-Id", x.event.ID)
	x.ctx, x.cancel = context.WithCancelCause(context.WithoutCancel(r.Context()))
	x.stopWatch = context.AfterFunc(r.Context(), x.clientLeft)
	s.mu.Lock()
	s.active[x] = struct{}{}
	s.mu.Unlock()
	if s.metrics != nil {
		s.metrics.inFlight.Inc()
	}
	return x
}

// clientLeft runs when the client goes away: the upstream is read on, to
// learn the usage, for at most DrainTimeout and only while fewer than
// MaxDrains other streams are draining; otherwise it is cut off now and
// the usage is estimated.
func (x *exchange) clientLeft() {
	defer close(x.left)
	x.clientGone.Store(true)
	select {
	case x.s.drains <- struct{}{}:
		x.draining = true
		x.drainTimer = time.AfterFunc(x.s.cfg.DrainTimeout, func() { x.cancel(errDrainTimeout) })
	default:
		x.cancel(errDrainsFull)
	}
}

// armStall starts the stall timer: the upstream is cut off when nothing
// arrives for StallTimeout. Call touch on every upstream event.
func (x *exchange) armStall() {
	x.stall = time.AfterFunc(x.stallAfter, func() { x.cancel(errStalled) })
}

func (x *exchange) touch() { x.stall.Reset(x.stallAfter) }

// cause is why the upstream context ended, or nil.
func (x *exchange) cause() error { return context.Cause(x.ctx) }

// finish resolves the usage, completes the event and hands it on. It runs
// exactly once per exchange, whatever happened.
func (x *exchange) finish() {
	if !x.stopWatch() {
		<-x.left
		if x.draining {
			x.drainTimer.Stop()
			<-x.s.drains
		}
	}
	if x.stall != nil {
		x.stall.Stop()
	}
	cause := x.cause()
	x.cancel(nil)
	x.s.mu.Lock()
	delete(x.s.active, x)
	x.s.mu.Unlock()
	if x.s.metrics != nil {
		x.s.metrics.inFlight.Dec()
	}
	e := x.event
	r := &x.report
	if r.ServedModel != "" {
		e.ServedModel = r.ServedModel
	}
	if r.FinishReason != "" {
		e.FinishReason = r.FinishReason
	}
	// The status names what went wrong first: a failure before the
	// response is already set; then a stall, an upstream error, and last
	// a client that left (an SDK hangs up after an error frame).
	switch {
	case e.Status != meter.StatusOK:
	case errors.Is(cause, errShutdown):
		e.Status, e.Error = meter.StatusCutOff, cause.Error()
	case errors.Is(cause, errStalled):
		e.Status, e.Error = meter.StatusTimeout, cause.Error()
	case r.Error != "":
		e.Status, e.Error = meter.StatusUpstreamError, r.Error
	case x.clientGone.Load() && !x.complete.Load():
		e.Status = meter.StatusClientCancelled
		if cause != nil && e.Error == "" {
			e.Error = cause.Error()
		}
	}
	if x.responded {
		e.Usage, e.UsageSource = r.Resolve(x.s.est, x.promptText)
	} else { // refused or unreachable: nothing was produced, nothing is billed
		e.Usage, e.UsageSource = meter.Usage{}, meter.SourceEstimated
	}
	e.DurationMillis = time.Since(x.start).Milliseconds()
	x.s.metrics.observe(e)
	level := slog.LevelInfo // a failed request stays in the log at TOLLGATE_LOG_LEVEL=warn
	if e.Status == meter.StatusUpstreamError || e.Status == meter.StatusTimeout || e.Status == meter.StatusCutOff {
		level = slog.LevelWarn
	}
	x.s.log.Log(x.ctx, level, "request", "request_id", e.ID, "customer_id", e.CustomerID, "key_id", e.KeyID,
		"endpoint", e.Endpoint, "model", e.Model, "provider", e.Provider, "status", e.Status,
		"http_status", e.HTTPStatus, "usage_source", e.UsageSource, "prompt_tokens", e.Usage.PromptTokens,
		"completion_tokens", e.Usage.CompletionTokens, "ttft_ms", e.TTFTMillis, "duration_ms", e.DurationMillis)
	x.s.emit(e)
}

// markComplete is called before the response's last write: if the client
// is still there, its hanging up from now on is not a cancellation.
func (x *exchange) markComplete() {
	if !x.clientGone.Load() {
		x.complete.Store(true)
	}
}

// firstByte records the time to first token, once.
func (x *exchange) firstByte() {
	if x.event.TTFTMillis == 0 {
		x.event.TTFTMillis = max(time.Since(x.start).Milliseconds(), 1)
	}
}

// timerCancel cancels x's upstream context with cause after d, unless
// stopped first.
func timerCancel(x *exchange, d time.Duration, cause error) *time.Timer {
	return time.AfterFunc(d, func() { x.cancel(cause) })
}
