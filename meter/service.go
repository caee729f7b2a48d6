package meter

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/sethvargo/go-retry"
)

// Service runs the meter in a process: a Worker on the usage stream, set up
// again (the stream, the dead-letter stream, the durable consumer) with
// backoff whenever NATS is unreachable or the consumer is lost. Start
// returns at once; Stop stops the worker, which writes or hands back every
// event it was sent, and waits for it.
//
// Status says what keeps the worker from running, if anything: NATS out of
// reach (or JetStream between leaders, or the stream or the consumer gone,
// which the next attempt makes again), or a JetStream that answers and
// refuses the stream or the consumer as configured (say, meter.replicas 3
// on a server that is not in a cluster), which no wait cures and which is
// logged at ERROR; or, while the worker runs, its consumer not answering
// (a cluster without a quorum: ServiceStatus.Stalled). A failure is
// cleared once a worker set up again makes progress, not as soon as it is
// set up; a stall, once the consumer answers again.
type Service struct {
	js    jetstream.JetStream
	store Store
	cfg   WorkerConfig

	mu        sync.Mutex
	status    ServiceStatus
	loggedErr time.Time // when the last ERROR line about a refusal was written
	// writeErr and writeSince are ServiceStatus' WriteErr and WriteSince:
	// the worker's writes, apart from its set-up and its run.
	writeErr   error
	writeSince time.Time

	startOnce, stopOnce sync.Once
	cancel              context.CancelFunc
	done                chan struct{}
}

// ServiceStatus is what a Service's last attempt to set its worker up, or
// to run it, met.
type ServiceStatus struct {
	// Err is the error of the last attempt: nil before any attempt failed,
	// and again once the worker, set up anew, made progress (a message
	// was delivered to it, or its subscription of the consumer lasted a
	// second): a worker whose Run keeps failing as soon as it starts does
	// not count as running in between.
	Err error
	// Since is when the worker stopped running (or, if it never ran, when
	// its first attempt failed); attempts that fail before the worker makes
	// progress keep it. Zero while Err is nil.
	Since time.Time
	// Refused reports that NATS answered and refused (a JetStream API
	// error: the stream or the consumer cannot be created or used as
	// configured, JetStream is not enabled), rather than that NATS could not
	// be reached or answered with an error a retry cures (see
	// transientAPIErrors). Nothing is written to the ledger until it is
	// fixed.
	Refused bool
	// Stalled reports that the worker runs but its consumer does not
	// answer: its subscription missed JetStream's heartbeats, and JetStream
	// did not answer for the consumer, or answered an error (a cluster
	// that lost its quorum has no leader for it). Nothing is delivered
	// until it answers, which clears Err.
	Stalled bool
	// WriteErr is the error of the worker's last write to the ledger, while
	// its writes fail and are retried (Postgres out of reach, or refusing
	// every batch as no data fault does: a table gone after a rollback),
	// and WriteSince when they began to; nil and zero once a write
	// succeeds. The worker runs meanwhile (Err stays nil): the events wait
	// in JetStream.
	WriteErr   error
	WriteSince time.Time
}

// refusalLogEvery bounds how often a refusal lasting on is logged again.
const refusalLogEvery = time.Minute

// NewService returns a Service writing into store the events of js's usage
// stream, with the worker configuration cfg.
func NewService(js jetstream.JetStream, store Store, cfg WorkerConfig) *Service {
	cfg.defaults()
	return &Service{js: js, store: store, cfg: cfg, done: make(chan struct{})}
}

// Start starts the worker in the background; it returns at once. Calling
// it again does nothing.
func (s *Service) Start() {
	s.startOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		s.cancel = cancel
		go func() {
			defer close(s.done)
			s.run(ctx)
		}()
	})
}

// Status returns what the worker's last set-up or run met (see
// ServiceStatus).
func (s *Service) Status() ServiceStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.WriteErr, st.WriteSince = s.writeErr, s.writeSince
	return st
}

// wrote records the outcome of one of the worker's writes to the ledger
// (Worker.write): err nil clears a failure, err keeps the time the run of
// failures began.
func (s *Service) wrote(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.writeErr, s.writeSince = nil, time.Time{}
		return
	}
	if s.writeErr == nil {
		s.writeSince = time.Now()
	}
	s.writeErr = err
}

// run sets the worker up and runs it until ctx ends, again after each
// failure, waiting 0.5s, then twice as long each time up to 10s. A Run
// that made progress starts the waits again from 0.5s: after hours of
// work, one failure (a consumer lost with NATS' store) is retried at once,
// not after the longest wait.
func (s *Service) run(ctx context.Context) {
	backoff := newServiceBackoff()
	for {
		progressed, err := s.attempt(ctx)
		if ctx.Err() != nil {
			return
		}
		s.failed(err)
		if progressed {
			backoff = newServiceBackoff()
		}
		wait, _ := backoff.Next()
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// newServiceBackoff returns run's waits between attempts: 0.5s, then twice
// as long each time, up to 10s.
func newServiceBackoff() retry.Backoff {
	return retry.WithCappedDuration(10*time.Second, retry.NewExponential(500*time.Millisecond))
}

// attempt sets the worker up and runs it until it fails or ctx ends. It
// reports whether the worker made progress (see Worker.madeProgress),
// which clears the status, and the error that ended it.
func (s *Service) attempt(ctx context.Context) (progressed bool, err error) {
	if _, err := EnsureStream(ctx, s.js, s.cfg.Stream); err != nil {
		return false, err
	}
	w, err := NewWorker(ctx, s.js, s.store, s.cfg)
	if err != nil {
		return false, err
	}
	w.onProgress, w.onStall, w.onWrite = s.running, s.stalled, s.wrote
	err = w.Run(ctx)
	return w.progressed.Load(), err
}

// running records that the worker runs: set up, it made progress.
func (s *Service) running() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status.Err != nil {
		s.cfg.Logger.Info("meter worker running: its consumer of the usage stream is set up and delivers",
			"stream", s.cfg.Stream.Name, "after", time.Since(s.status.Since).Round(time.Millisecond).String())
	}
	// loggedErr stays: a Run that fails again at once (a refusal it meets
	// after set-up) is still logged at most once a minute.
	s.status = ServiceStatus{}
}

// stalled records that the running worker's consumer does not answer
// (Worker.stall): nothing is delivered until it does, when the worker
// calls running.
func (s *Service) stalled(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status.Err == nil {
		s.status = ServiceStatus{Err: err, Since: time.Now(), Stalled: true}
	}
}

// failed records err, the set-up's or the run's, and logs it: a refusal
// at ERROR with the server's words, at once and then at most once a
// minute while it lasts; NATS out of reach at WARN, at each retry.
func (s *Service) failed(err error) {
	if err == nil { // Run ends without an error only with its context
		err = errors.New("the worker stopped")
	}
	refused := Refused(err)
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	since := s.status.Since
	if s.status.Err == nil {
		since = now
	}
	s.status = ServiceStatus{Err: err, Since: since, Refused: refused}
	switch {
	case !refused:
		s.cfg.Logger.Warn("meter worker waiting for NATS", "err", err)
	case s.loggedErr.IsZero() || now.Sub(s.loggedErr) >= refusalLogEvery:
		s.loggedErr = now
		s.cfg.Logger.Error("meter worker cannot start: NATS refuses the usage stream or its consumer as configured, and nothing is "+
			"written to the ledger until that is fixed (events wait in JetStream or in the gateways' spools); retrying",
			"stream", s.cfg.Stream.Name, "replicas", s.cfg.Stream.Replicas, "err", err, "since", since.UTC().Format(time.RFC3339))
	}
}

// Stop stops the worker and waits for it until ctx ends (then it returns
// ctx.Err()). It is idempotent and safe on a Service never started.
func (s *Service) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.startOnce.Do(func() { close(s.done) }) // never started
		if s.cancel != nil {
			s.cancel()
		}
	})
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Refused reports whether err is JetStream refusing the usage stream or its
// consumer as configured (say, meter.replicas 3 on a server that is not in
// a cluster: "replicas > 1 not supported in non-clustered mode"), which no
// wait cures: a JetStream API error, other than the transient ones
// (transientAPIErrors). NATS out of reach is not a refusal.
func Refused(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && !transientAPIErrors[api.ErrorCode]
}

// transientAPIErrors are the JetStream API error codes that a retry cures,
// which the service waits out as it does NATS out of reach rather than
// report as a refusal. The set is kept small on purpose: any other API
// error is a refusal, logged at ERROR with the server's words. The codes
// and descriptions are nats-server's (server/errors.json, v2.15.2; the
// first two are answered while a cluster has no meta leader, or a server
// no longer or not yet leads the asset asked for, in
// server/jetstream_api.go and server/stream.go):
var transientAPIErrors = map[jetstream.ErrorCode]bool{
	10008: true, // JSClusterNotAvailErr, 503 "JetStream system temporarily unavailable"
	10009: true, // JSClusterNotLeaderErr, 500 "JetStream cluster can not handle request"
	// The stream or the consumer gone between the service's set-up and
	// their use (deleted, or lost with NATS' store): its next attempt
	// makes them again.
	jetstream.JSErrCodeStreamNotFound:   true, // 10059, JSStreamNotFoundErr, 404 "stream not found"
	jetstream.JSErrCodeConsumerNotFound: true, // 10014, JSConsumerNotFoundErr, 404 "consumer not found"
}
