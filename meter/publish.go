package meter

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Publisher publishes usage events to JetStream and waits for each PubAck,
// so that an event it reports as published is stored by JetStream (as
// durably as the stream's sync policy makes a PubAck: see SyncPolicy).
type Publisher struct {
	js      jetstream.JetStream
	subject string
	timeout time.Duration
	group   grouper // the events waiting for the publish in flight (group.go)
}

// NewPublisher returns a Publisher on cfg's subject (see StreamConfig).
// timeout bounds the wait for a PubAck; 0 means DefaultPublishTimeout.
func NewPublisher(js jetstream.JetStream, cfg StreamConfig, timeout time.Duration) *Publisher {
	cfg.defaults()
	if timeout <= 0 {
		timeout = DefaultPublishTimeout
	}
	return &Publisher{js: js, subject: cfg.Subject, timeout: timeout}
}

// Publish sends e and waits for the PubAck of the message that carries it:
// alone, with Nats-Msg-Id set to e.ID, when no other publish of p is in
// flight; else, once the one in flight has its PubAck, in one message with
// the events that queued meanwhile (a group: see HeaderEvents), which
// costs JetStream one store, delivery and ack for them all. A crash
// estimate (status crashed) always goes alone. It
// returns an error wrapping usage.ErrInvalidEvent when e is invalid, an
// error for which Permanent is true when NATS refuses the message itself,
// one wrapping jetstream.ErrNoStreamResponse at once, without waiting for
// the timeout, when no stream takes the subject (see noStreamRetry), and
// any other error when JetStream did not acknowledge it within the
// timeout or before ctx ended: the event may then or may not be stored,
// and publishing it again is safe.
func (p *Publisher) Publish(ctx context.Context, e *usage.Event) error {
	if err := e.Validate(); err != nil {
		return err
	}
	bp := eventBufs.Get().(*[]byte)
	defer putEventBuf(bp)
	data, err := e.AppendJSON(*bp)
	if err != nil {
		return fmt.Errorf("encode event %s: %w", e.ID, err)
	}
	*bp = data
	// The NATS client copies data into its own buffer (or, disconnected,
	// its reconnect buffer) before Publish returns.
	if e.Status == usage.StatusCrashed {
		// A crash estimate goes alone, under its id: JetStream drops it
		// when its exact event was published alone within the duplicate
		// window, and the worker holds it by its own sequence (estimates).
		return p.PublishData(ctx, e.ID, data)
	}
	return p.publishGrouped(ctx, e.ID, data)
}

// eventBufs holds Publish's encoding buffers between calls: a new one per
// event was 3% of the bytes the process allocated under cmd/loadgen's short
// streams (BENCHMARKS.md, "Issue 16, stop 40"). They start at 1 KiB (a
// gateway's event is about 630 bytes); one grown past 64 KiB is let go.
var eventBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func putEventBuf(bp *[]byte) {
	if cap(*bp) <= 64<<10 {
		*bp = (*bp)[:0]
		eventBufs.Put(bp)
	}
}

// PublishData publishes an encoded event under its id, as Publish does.
func (p *Publisher) PublishData(ctx context.Context, id string, data []byte) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if _, err := p.js.Publish(ctx, p.subject, data, jetstream.WithMsgID(id), noStreamRetry); err != nil {
		return fmt.Errorf("publish event %s: %w", id, err)
	}
	return nil
}

// noStreamRetry makes a publish that finds no stream on its subject (NATS
// answers "no responders": the usage stream deleted, not created yet, or
// between leaders in a cluster) fail at once with
// jetstream.ErrNoStreamResponse. nats.go's default retries it twice,
// 250 ms apart: every request's end waited about 505 ms before its event
// went to the spool, which is as durable and which the Republisher drains
// into the stream once it answers again.
var noStreamRetry = jetstream.WithRetryAttempts(0)

// Permanent reports whether a publish error is one no retry can cure: the
// event is invalid, or NATS refuses the message (larger than the server's
// max_payload or the stream's maximum message size). Such an event goes to
// the dead-letter stream; any other error is retried.
func Permanent(err error) bool {
	if err == nil {
		return false
	}
	var api *jetstream.APIError
	return errors.Is(err, usage.ErrInvalidEvent) || errors.Is(err, nats.ErrMaxPayload) ||
		errors.Is(err, nats.ErrBadSubject) || errors.Is(err, jetstream.ErrStreamMessageExceedsMaximum) ||
		errors.As(err, &api) && api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum
}
