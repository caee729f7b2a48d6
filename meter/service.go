package meter

import (
	"context"
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
type Service struct {
	js    jetstream.JetStream
	store Store
	cfg   WorkerConfig

	startOnce, stopOnce sync.Once
	cancel              context.CancelFunc
	done                chan struct{}
}

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

// run sets the worker up and runs it until ctx ends, again after each
// failure, waiting 0.5s, then twice as long each time up to 10s.
func (s *Service) run(ctx context.Context) {
	backoff := retry.WithCappedDuration(10*time.Second, retry.NewExponential(500*time.Millisecond))
	_ = retry.Do(ctx, backoff, func(ctx context.Context) error {
		_, err := EnsureStream(ctx, s.js, s.cfg.Stream)
		var w *Worker
		if err == nil {
			w, err = NewWorker(ctx, s.js, s.store, s.cfg)
		}
		if err == nil {
			err = w.Run(ctx)
		}
		if ctx.Err() != nil {
			return nil
		}
		s.cfg.Logger.Warn("meter worker waiting for NATS", "err", err)
		return retry.RetryableError(err)
	})
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
