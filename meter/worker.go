package meter

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Store is where the worker writes events: the ledger.
type Store interface {
	// WriteEvents stores a batch atomically, at most once per event id (an
	// id already stored is skipped), and returns how many were new. An error
	// means none of the batch was stored.
	WriteEvents(ctx context.Context, events []Event) (int, error)
}

// WorkerConfig configures a Worker. Zero fields take the defaults named.
type WorkerConfig struct {
	Stream StreamConfig
	// Durable is the durable consumer's name, shared by all workers so that
	// adding workers adds throughput. Default "tollgate-meter".
	Durable string
	// BatchSize caps the events written in one transaction. Default 2000.
	BatchSize int
	// BatchWait caps how long a batch waits to fill after its first event,
	// and so the latency the worker adds. Default 50ms.
	BatchWait time.Duration
	// AckWait is how long JetStream waits for an ack before redelivering.
	// Default 30s; the worker extends it while it retries a batch.
	AckWait time.Duration
	// MaxAckPending caps the events delivered and not yet acknowledged
	// across all workers. Default 20000.
	MaxAckPending int
	// MaxDeliver caps deliveries of one event (default 20): past it the
	// event goes to the dead-letter stream rather than block the others.
	MaxDeliver int
	// Logger receives the worker's logs. Default slog.Default().
	Logger *slog.Logger
	// Observer, when set, receives the worker's measurements.
	Observer Observer
}

func (c *WorkerConfig) defaults() {
	c.Stream.defaults()
	if c.Durable == "" {
		c.Durable = "tollgate-meter"
	}
	if c.BatchSize <= 0 {
		c.BatchSize = 2000
	}
	if c.BatchWait <= 0 {
		c.BatchWait = 50 * time.Millisecond
	}
	if c.AckWait <= 0 {
		c.AckWait = 30 * time.Second
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = 20000
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = 20
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Worker moves usage events from JetStream into a Store: it fetches batches
// from a durable pull consumer, writes each batch in one call to the Store,
// and acknowledges the batch only after the Store has committed it.
type Worker struct {
	cfg   WorkerConfig
	cons  jetstream.Consumer
	store Store
	dlq   *DLQ
	obs   Observer
}

// NewWorker creates (or updates) the durable consumer on the usage stream
// and the dead-letter stream, and returns a Worker over them. The usage
// stream must exist (see EnsureStream).
func NewWorker(ctx context.Context, js jetstream.JetStream, store Store, cfg WorkerConfig) (*Worker, error) {
	cfg.defaults()
	dlq, err := EnsureDLQ(ctx, js, cfg.Stream)
	if err != nil {
		return nil, err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, cfg.Stream.Name, jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		Description:   "Tollgate meter workers: usage events into the ledger",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxAckPending: cfg.MaxAckPending,
		FilterSubject: cfg.Stream.Subject,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", cfg.Durable, err)
	}
	return &Worker{cfg: cfg, cons: cons, store: store, dlq: dlq, obs: observer(cfg.Observer)}, nil
}

// Run moves events until ctx ends, then returns nil. A batch the Store
// refuses is retried with backoff, never acknowledged unwritten. It returns
// an error only when the consumer cannot be read at all.
func (w *Worker) Run(ctx context.Context) error {
	// A bounded pull expiry: after the consumer's leader changes (a NATS
	// node lost), the worker pulls again within it instead of the default 30s.
	it, err := w.cons.Messages(jetstream.PullMaxMessages(2*w.cfg.BatchSize), jetstream.PullExpiry(5*time.Second))
	if err != nil {
		return fmt.Errorf("consume %s: %w", w.cfg.Durable, err)
	}
	defer w.handBack(it)
	if w.cfg.Observer != nil {
		go watchConsumer(ctx, w.cfg.Observer, w.cons, 5*time.Second)
	}
	batch := make([]jetstream.Msg, 0, w.cfg.BatchSize)
	for {
		first, err := it.Next(jetstream.NextContext(ctx))
		if ctx.Err() != nil {
			if first != nil {
				_ = first.Nak()
			}
			return nil
		}
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return fmt.Errorf("consume %s: %w", w.cfg.Durable, err)
			}
			w.cfg.Logger.Warn("meter: fetch", "err", err)
			continue
		}
		batch = append(batch[:0], first)
		deadline := time.Now().Add(w.cfg.BatchWait)
		for len(batch) < w.cfg.BatchSize {
			wait := time.Until(deadline)
			if wait <= 0 {
				break
			}
			m, err := it.Next(jetstream.NextMaxWait(wait))
			if err != nil {
				if !errors.Is(err, nats.ErrTimeout) {
					w.cfg.Logger.Warn("meter: fetch", "err", err)
				}
				break
			}
			batch = append(batch, m)
		}
		w.process(ctx, batch)
	}
}

// handBack stops consuming and gives back (Nak) the messages prefetched
// and not yet processed, so that other workers get them now rather than
// after AckWait.
func (w *Worker) handBack(it jetstream.MessagesContext) {
	it.Drain()
	for {
		m, err := it.Next(jetstream.NextMaxWait(time.Second))
		if err != nil {
			return
		}
		_ = m.Nak()
	}
}

// process decodes, writes and acknowledges one batch. Messages that no
// retry can store (undecodable, failing validation, refused by the Store as
// an EventError, or delivered more than MaxDeliver times) are set aside in
// the dead-letter stream with the reason; nothing is silently dropped.
func (w *Worker) process(ctx context.Context, msgs []jetstream.Msg) {
	events := make([]Event, 0, len(msgs))
	keep := msgs[:0:0]
	for _, m := range msgs {
		if md, err := m.Metadata(); err == nil && md.NumDelivered > 1 {
			w.obs.Redelivered()
			if md.NumDelivered > uint64(w.cfg.MaxDeliver) {
				w.obs.DeadLetter("max_deliver")
				w.setAside(ctx, m, fmt.Sprintf("delivered %d times without being written", md.NumDelivered))
				continue
			}
		}
		e, err := DecodeEvent(m.Data())
		if err == nil {
			err = e.Validate()
		}
		if err != nil {
			w.obs.DeadLetter("undecodable")
			w.setAside(ctx, m, "undecodable or invalid usage event: "+err.Error())
			continue
		}
		events = append(events, e)
		keep = append(keep, m)
	}
	backoff := 100 * time.Millisecond
	for len(events) > 0 {
		start := time.Now()
		n, err := w.store.WriteEvents(ctx, events)
		if err == nil {
			w.obs.BatchWritten(len(events), n, time.Since(start))
			break
		}
		var refused *EventError
		if errors.As(err, &refused) {
			for i := range events {
				if events[i].ID == refused.ID {
					w.obs.DeadLetter("refused")
					w.setAside(ctx, keep[i], refused.Reason)
					events, keep = append(events[:i], events[i+1:]...), append(keep[:i], keep[i+1:]...)
					break
				}
			}
			continue
		}
		if ctx.Err() != nil {
			for _, m := range keep {
				_ = m.Nak() // not written: redelivered to the next worker now
			}
			return
		}
		w.cfg.Logger.Warn("meter: write batch failed; retrying", "events", len(events), "backoff", backoff, "err", err)
		for _, m := range keep {
			_ = m.InProgress()
		}
		select {
		case <-ctx.Done():
			for _, m := range keep {
				_ = m.Nak()
			}
			return
		case <-time.After(backoff):
		}
		// Stay under the ack wait (InProgress extends it every retry), so a
		// long Postgres outage does not turn into redeliveries.
		backoff = min(backoff*2, 5*time.Second, w.cfg.AckWait/2)
	}
	for _, m := range keep {
		if err := m.Ack(); err != nil {
			// The event is committed; a lost ack only means a redelivery,
			// which the ledger skips.
			w.cfg.Logger.Warn("meter: ack", "err", err)
		}
	}
}

// setAside moves m to the dead-letter stream, retrying until it is there
// (or ctx ends, leaving m to be redelivered), then acknowledges it.
func (w *Worker) setAside(ctx context.Context, m jetstream.Msg, reason string) {
	w.cfg.Logger.Error("meter: usage event set aside in the dead-letter stream", "reason", reason,
		"event_id", m.Headers().Get(nats.MsgIdHdr))
	for backoff := 100 * time.Millisecond; ; backoff = min(backoff*2, 5*time.Second) {
		err := w.dlq.put(ctx, m, reason)
		if err == nil {
			_ = m.Ack()
			return
		}
		w.cfg.Logger.Warn("meter: dead-letter stream unreachable; retrying", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}
