package meter

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Observer receives the metering pipeline's measurements, for metrics.
// cmd/tollgate turns them into Prometheus series; nil observes nothing.
type Observer interface {
	// Published is one publish attempt: its time to PubAck, or its error
	// (the event was then spooled).
	Published(took time.Duration, err error)
	// BatchWritten is one ledger transaction: events offered, events new.
	BatchWritten(events, stored int, took time.Duration)
	// DeadLetter is a message set aside, by reason: "undecodable",
	// "refused" or "max_deliver".
	DeadLetter(reason string)
	// Redelivered is a message delivered more than once.
	Redelivered()
	// ConsumerPending is the durable consumer's backlog, sampled.
	ConsumerPending(pending, ackPending uint64)
	// TrimFailed is one failed or refused trim of the usage stream below
	// the consumer's ack floor (the stream keeps the events meanwhile).
	TrimFailed()
	// LateEvent is an event received more than usage.LateAfter after the end of
	// the UTC month it is dated in: it moves that month's statement.
	LateEvent()
	// EstimatesHeld is a change, in events, of the crash estimates the
	// worker holds back until the events stored before them are
	// acknowledged (see estimates): +n when it holds n more, −n when it
	// writes or hands back n of them.
	EstimatesHeld(change int)
}

// nopObserver observes nothing.
type nopObserver struct{}

func (nopObserver) Published(time.Duration, error)       {}
func (nopObserver) BatchWritten(int, int, time.Duration) {}
func (nopObserver) DeadLetter(string)                    {}
func (nopObserver) Redelivered()                         {}
func (nopObserver) ConsumerPending(uint64, uint64)       {}
func (nopObserver) TrimFailed()                          {}
func (nopObserver) LateEvent()                           {}
func (nopObserver) EstimatesHeld(int)                    {}

func observer(o Observer) Observer {
	if o == nil {
		return nopObserver{}
	}
	return o
}

// watchConsumer samples the consumer's backlog every interval.
func watchConsumer(ctx context.Context, o Observer, cons jetstream.Consumer, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if info, err := cons.Info(ctx); err == nil {
			o.ConsumerPending(info.NumPending, uint64(info.NumAckPending))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
