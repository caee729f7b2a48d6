package meter

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Publisher publishes usage events to JetStream and waits for each PubAck,
// so that an event it reports as published is stored by JetStream.
type Publisher struct {
	js      jetstream.JetStream
	subject string
	timeout time.Duration
}

// NewPublisher returns a Publisher on cfg's subject (see StreamConfig).
// timeout bounds the wait for a PubAck; 0 means 5 seconds.
func NewPublisher(js jetstream.JetStream, cfg StreamConfig, timeout time.Duration) *Publisher {
	cfg.defaults()
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &Publisher{js: js, subject: cfg.Subject, timeout: timeout}
}

// Publish sends e with Nats-Msg-Id set to e.ID and waits for the PubAck. It
// returns an error when the event is invalid, or when JetStream did not
// acknowledge it within the timeout or before ctx ended; the event may then
// or may not be stored, and publishing it again is safe.
func (p *Publisher) Publish(ctx context.Context, e *Event) error {
	if err := e.Validate(); err != nil {
		return err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode event %s: %w", e.ID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if _, err := p.js.Publish(ctx, p.subject, data, jetstream.WithMsgID(e.ID)); err != nil {
		return fmt.Errorf("publish event %s: %w", e.ID, err)
	}
	return nil
}
