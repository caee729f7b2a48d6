package meter

// A worker's acknowledgements go to the consumer that delivered its
// events, and only to it. JetStream addresses an acknowledgement by the
// stream, the consumer's name and the stream sequence, and takes it for
// whatever that consumer has pending at that sequence: a usage stream
// deleted and made again (by an operator, or NATS come back without its
// store) numbers its events from 1 again, under a consumer of the same
// name, so an acknowledgement of an event of the old stream, sent after
// the worker's commit, acknowledged the new stream's event of that
// sequence, delivered to another worker and perhaps never written, which
// JetStream then never delivered again and the trim removed (a review).
//
// A worker therefore records the consumer it set up (its creation time,
// which the same consumer keeps and one made again does not), and sends
// no acknowledgement once it knows that consumer to be gone or another:
// its subscription is told the consumer was deleted (JetStream says so at
// once to a pull waiting on it), a question to JetStream it asks anyway
// (the trim's, every TrimEvery; its subscription's check when heartbeats
// stop) finds it gone or made again, or, after its connection to NATS
// was lost (NATS may have come back without its store), one question
// asked before the next acknowledgements finds it so. An event not
// acknowledged is harmless: a gone stream does not deliver it again, and
// a redelivery is one the ledger skips. Handing an event back (Nak) and
// extending its ack wait are still sent: on a new stream they only make
// an event of that sequence come again sooner, or later.

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// errReplaced is the error a worker's pull ends with once the consumer it
// set up is gone or made again (see replacedBy): gone says so, and the
// service sets the worker up again.
var errReplaced = fmt.Errorf("the usage consumer was deleted or made again: %w", jetstream.ErrConsumerNotFound)

// consumerReplaced records that the consumer the worker set up is gone or
// another, because of why: the worker sends no acknowledgement from now
// on, and its pull ends (errReplaced). Logged once.
func (w *Worker) consumerReplaced(why error) {
	w.replacedOnce.Do(func() {
		w.cfg.Logger.Warn("meter: the usage consumer this worker set up is gone or was made again (the stream deleted, or NATS "+
			"back without its store): the events it holds are not acknowledged, as an acknowledgement could land on another "+
			"event of a new stream; the ledger has those it wrote, and skips them should they come again",
			"consumer", w.cfg.Durable, "why", why)
		close(w.replaced)
	})
}

// replacedBy reports whether info and err, JetStream's answer to a
// question about the worker's consumer, say it is gone or not the one the
// worker set up (recording it, see consumerReplaced), as errReplaced or
// err; nil when it is the worker's, or when JetStream did not say (no
// answer).
func (w *Worker) replacedBy(info *jetstream.ConsumerInfo, err error) error {
	switch {
	case gone(err):
		w.consumerReplaced(err)
		return err
	case err == nil && !info.Created.Equal(w.created):
		w.consumerReplaced(fmt.Errorf("consumer %s was created %s, not %s as the worker's was", w.cfg.Durable,
			info.Created.UTC().Format(time.RFC3339Nano), w.created.UTC().Format(time.RFC3339Nano)))
		return errReplaced
	}
	return nil
}

// ack acknowledges msgs, delivered by the worker's consumer, unless that
// consumer is gone or another (see the top of this file); not then.
func (w *Worker) ack(ctx context.Context, msgs []jetstream.Msg) {
	if len(msgs) == 0 || !w.acksReachOurs(ctx) {
		return
	}
	for _, m := range msgs {
		if err := m.Ack(); err != nil {
			// The event is committed; a lost ack only means a
			// redelivery, which the ledger skips.
			w.cfg.Logger.Warn("meter: ack", "err", err)
		}
	}
}

// acksReachOurs reports whether an acknowledgement sent now reaches the
// consumer the worker set up, as far as the worker can tell: not once it
// knows that consumer gone or another, nor while its connection is down
// (an acknowledgement would wait in nats.go's buffer, for a server that
// may come back without the consumer). After the connection was lost and
// came back, it asks JetStream once.
func (w *Worker) acksReachOurs(ctx context.Context) bool {
	if isClosed(w.replaced) || w.nc.Status() != nats.CONNECTED {
		return false
	}
	n := w.nc.Stats().Reconnects
	if n == w.reconnects.Load() {
		return true
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	info, err := w.cons.Info(ctx)
	if w.replacedBy(info, err) != nil || err != nil {
		return false // gone, another, or no answer: a redelivery is harmless
	}
	w.reconnects.Store(n)
	return true
}
