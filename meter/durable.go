package meter

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

var errNotConnected = errors.New("not connected to NATS")

// DurablePublisher is the gateway's usage sink. An event it returns nil for
// is durable: acknowledged by JetStream, or fsync'd in the local spool (to
// be republished), or, when it cannot be published at all, fsync'd in the
// local dead-letter spool (to be moved to the dead-letter stream). No event
// is ever only logged.
type DurablePublisher struct {
	pub       *Publisher
	spool     *Spool
	dead      *Spool
	connected func() bool
	log       *slog.Logger
	maxAge    time.Duration
	obs       Observer
}

// NewDurablePublisher publishes with pub, falls back to spool, sets aside
// what cannot be published in dead, and skips straight to the spool while
// connected reports false (NATS unreachable), instead of waiting a timeout
// per event. maxAge (0: none) is the oldest a spooled event may get before
// Accepting refuses.
func NewDurablePublisher(pub *Publisher, spool, dead *Spool, connected func() bool, maxAge time.Duration, log *slog.Logger, obs Observer) *DurablePublisher {
	return &DurablePublisher{pub: pub, spool: spool, dead: dead, connected: connected, maxAge: maxAge, log: log, obs: observer(obs)}
}

// Publish normalizes e (see usage.Event.Normalize) and returns nil once it
// is durable (see DurablePublisher). It returns an error only when the
// spool cannot write it either (its disk failing, or closed): the spool's
// cap does not refuse it (see Spool.AppendOwed); Accepting refuses new
// requests at the cap instead.
func (d *DurablePublisher) Publish(ctx context.Context, e *usage.Event) error {
	return d.publish(ctx, e, false)
}

// PublishBehindSpool is Publish for an event that must not overtake what
// the spool holds: while the spool is not empty, e is appended to it, and
// the republisher sends it after the events before it. The gateway records
// the requests a crash left in flight this way: the real event of such a
// request may have been spooled (NATS down) just before the crash, and it
// must reach the stream first, since the ledger keeps the first event of
// an id and JetStream drops a later one with the same Nats-Msg-Id. Errors
// are Publish's.
func (d *DurablePublisher) PublishBehindSpool(ctx context.Context, e *usage.Event) error {
	return d.publish(ctx, e, true)
}

func (d *DurablePublisher) publish(ctx context.Context, e *usage.Event, behindSpool bool) error {
	e.Normalize()
	if err := e.Validate(); err != nil {
		return d.setAside(e, "the gateway made an invalid usage event: "+invalidDetail(err))
	}
	spooled := false
	if behindSpool {
		n, _, _ := d.spool.Stats()
		spooled = n > 0
	}
	switch {
	case spooled: // goes behind them
	case d.connected():
		start := time.Now()
		err := d.pub.Publish(ctx, e)
		d.obs.Published(time.Since(start), err)
		switch {
		case err == nil:
			return nil
		case Permanent(err):
			return d.setAside(e, "NATS refused the usage event: "+err.Error())
		}
		d.log.Warn("usage event spooled: publish failed", "request_id", e.ID, "customer_id", e.CustomerID, "err", err)
	default:
		d.obs.Published(0, errNotConnected)
	}
	// Owed: the request was admitted below the cap, or was in flight at a
	// crash. Refused at the cap, its event would stay in the crash journal
	// alone until the next start, and a start whose recovered events met a
	// full spool failed (with NATS down, every start).
	if err := d.spool.AppendOwed(e); err != nil {
		return fmt.Errorf("event %s neither published nor spooled: %w", e.ID, err)
	}
	return nil
}

// deadRecord is a dead letter kept in the dead-letter spool until the
// dead-letter stream takes it.
type deadRecord struct {
	EventID string `json:"event_id,omitempty"`
	Reason  string `json:"reason"`
	Data    []byte `json:"data"`
}

// setAside appends e, with reason, to the dead-letter spool.
func (d *DurablePublisher) setAside(e *usage.Event, reason string) error {
	data, err := json.Marshal(e)
	if err != nil {
		data = fmt.Appendf(nil, "%+v", *e)
	}
	// A retried attempt's event has an id of its own, and its request's in RequestID.
	d.log.Error("usage event set aside for the dead-letter stream", "request_id", cmp.Or(e.RequestID, e.ID), "event_id", e.ID, "customer_id", e.CustomerID, "reason", reason)
	d.obs.DeadLetter("unpublishable")
	rec, _ := json.Marshal(deadRecord{EventID: e.ID, Reason: reason, Data: data})
	if err := d.dead.AppendRecord(rec); err != nil {
		return fmt.Errorf("dead-letter spool refused event %s: %w", e.ID, err)
	}
	return nil
}

// Accepting returns an error while the spool is at its size cap or its
// oldest event is older than maxAge (when maxAge > 0): the gateway then
// refuses new requests rather than serve what it could not meter.
func (d *DurablePublisher) Accepting() error {
	events, size, oldest := d.spool.Stats()
	switch {
	case d.spool.maxSize > 0 && size >= d.spool.maxSize:
		return fmt.Errorf("%w: %d events, %d bytes waiting for NATS", ErrSpoolFull, events, size)
	case d.maxAge > 0 && oldest > d.maxAge:
		return fmt.Errorf("usage spool's oldest event is %s old (spool_max_age %s)", oldest.Round(time.Second), d.maxAge)
	}
	return nil
}
