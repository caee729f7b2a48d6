package meter

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// errStreamReplaced ends a worker's Run once its usage stream is found
// deleted, or deleted and made again, since the worker was set up (see
// ackGate): the service sets a worker up again on the stream there is.
var errStreamReplaced = errors.New("the usage stream was deleted (or deleted and made again) since the worker was set up")

// ackGate keeps a worker from acknowledging (Ack, Nak, InProgress) to a
// usage stream other than the one it was set up on. JetStream takes an
// acknowledgement by the stream sequence in its reply subject alone
// (nats-server's processAckMsg), and a stream made again under the same
// name numbers its events from 1 under a consumer of the same name, which
// listens on the same acknowledgement subject: a worker's ack of a batch
// of the old stream, sent after its commit, acknowledged the new events
// at those sequences, which, delivered to another worker that then died,
// were never delivered again (lost).
//
// The stream is named by its creation time (StreamInfo.Created, which
// NATS keeps across restarts). A worker sends an acknowledgement only
// while its connection is up (nats.go buffers one sent while it
// reconnects, for whatever server it reconnects to, unless the connection
// keeps no reconnect buffer, as tollgate's does not) and after it has seen,
// since its last reconnect and since any sign that the stream went (its
// consumer deleted, or gone), that the stream is the one it was set up
// on: one STREAM.INFO request after each, not one a batch. JetStream's
// advisory of the stream's deletion replaces it at once; the advisory is
// best effort (nats-server v2.15.2 can drop it as the stream's send loop
// quits), and the consumer's loss then tells. Once replaced,
// the worker acknowledges nothing more, writes what it holds (the events
// are real), and ends its subscription.
//
// Not covered: the moment between a check and the acknowledgement leaving
// the process, and a stream restored from a backup, which keeps its
// creation time (docs/operations.md, "Backups").
type ackGate struct {
	nc     *nats.Conn
	stream jetstream.Stream // the usage stream, by name
	born   time.Time        // its creation time when the worker was set up
	log    *slog.Logger

	replaced atomic.Bool
	doubt    atomic.Bool   // a sign the stream may be gone: check it before the next acknowledgement
	verified atomic.Uint64 // the connection's reconnects when the stream was last seen to be born's
	mu       sync.Mutex    // one check at a time
	gone     chan struct{} // closed once replaced
	goneOnce sync.Once
}

// newAckGate returns the gate of a worker set up on stream, whose info
// was read after the connection had reconnected reconnects times.
func newAckGate(nc *nats.Conn, stream jetstream.Stream, reconnects uint64, log *slog.Logger) *ackGate {
	g := &ackGate{nc: nc, stream: stream, born: stream.CachedInfo().Created, log: log, gone: make(chan struct{})}
	g.verified.Store(reconnects)
	return g
}

// live reports whether the worker may acknowledge the messages it holds:
// the connection is up, and the usage stream is the one it was set up on
// (checked by one request after a reconnect or a sign of its loss, see
// check). A nil gate lets everything through.
func (g *ackGate) live(ctx context.Context) bool {
	if g == nil {
		return true
	}
	if g.replaced.Load() || !g.nc.IsConnected() {
		return false
	}
	if g.doubt.Load() || g.nc.Stats().Reconnects != g.verified.Load() {
		return g.check(ctx)
	}
	return true
}

// suspect records a sign that the stream may be gone (the consumer's
// subscription ended, the consumer is not found): the next
// acknowledgement checks the stream first.
func (g *ackGate) suspect() {
	if g != nil {
		g.doubt.Store(true)
	}
}

// check asks JetStream for the usage stream (within 5 s, even as the worker
// stops) and reports whether it is the one the worker was set up on;
// replaced when it is not there, or was made again. Unanswered, it
// reports false, and the next acknowledgement asks again.
func (g *ackGate) check(ctx context.Context) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.replaced.Load() {
		return false
	}
	r := g.nc.Stats().Reconnects
	if !g.doubt.Load() && r == g.verified.Load() {
		return true // another lane checked meanwhile
	}
	g.doubt.Store(false)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	info, err := g.stream.Info(ctx)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		g.replace("the usage stream is not there")
		return false
	case err != nil:
		g.doubt.Store(true)
		g.log.Warn("meter: cannot tell whether the usage stream is still the one the worker acknowledges to; not acknowledging until it can",
			"err", err)
		return false
	case !info.Created.Equal(g.born):
		g.replace("the usage stream was made again (created " + info.Created.UTC().Format(time.RFC3339Nano) + ")")
		return false
	}
	g.verified.Store(r)
	return true
}

// replace records that the worker's usage stream is gone, once: nothing
// it holds is acknowledged any more, and its subscription ends (gone).
func (g *ackGate) replace(why string) {
	g.goneOnce.Do(func() {
		g.replaced.Store(true)
		close(g.gone)
		g.log.Warn("meter: the usage stream this worker was set up on is gone; it writes what it holds but acknowledges none of it "+
			"(an acknowledgement would name another event of a new stream), and is set up again", "why", why,
			"stream", g.stream.CachedInfo().Config.Name, "created", g.born.UTC().Format(time.RFC3339Nano))
	})
}

// done is closed once the stream is replaced; nil (never) for a nil gate.
func (g *ackGate) done() <-chan struct{} {
	if g == nil {
		return nil
	}
	return g.gone
}

// watch subscribes to JetStream's advisory of the usage stream's deletion,
// which replaces the stream at once; it returns the unsubscribe. Without
// it, or when the server drops the advisory (it queues it on the deleted
// stream's send loop as that loop quits, stream.go stop), the stream is
// checked only after each reconnect and each sign of its loss. A NATS
// user not allowed the subject does not fail Subscribe: the server
// refuses it afterwards, and nats.go reports the permissions
// violation to the connection's error handler (tollgate logs it as an
// asynchronous error); only a Subscribe that fails at once (a closed
// connection) is logged here.
func (g *ackGate) watch() (stop func()) {
	if g == nil {
		return func() {}
	}
	name := g.stream.CachedInfo().Config.Name
	sub, err := g.nc.Subscribe("$JS.EVENT.ADVISORY.STREAM.DELETED."+name, func(*nats.Msg) {
		g.replace("JetStream advised its deletion")
	})
	if err != nil {
		g.log.Warn("meter: cannot watch for the usage stream's deletion; it is checked after each reconnect instead", "err", err)
		return func() {}
	}
	return func() { _ = sub.Unsubscribe() }
}

// ack acknowledges msgs, written to the ledger or set aside (what says
// which), unless the gate holds them back (live): then it sends none, and
// logs the count at WARN. Once the connection refuses one (dropped,
// closed or draining since the gate's check), it sends none of the rest,
// and logs their count once. Those of a stream still there are delivered
// again, and the ledger drops them (or the dead-letter stream, a resend).
func (w *Worker) ack(ctx context.Context, msgs []jetstream.Msg, what string) {
	if len(msgs) == 0 {
		return
	}
	if !w.gate.live(ctx) {
		w.cfg.Logger.Warn("meter: "+what+" but not acknowledged: the usage stream it came from is gone, or NATS reconnected "+
			"and that is not known yet (delivered again if it is there, and dropped then as a duplicate)",
			"events", len(msgs), "stream_gone", w.gate.replaced.Load())
		return
	}
	for i, m := range msgs {
		if err := m.Ack(); err != nil {
			// Committed or set aside; a lost ack only means a
			// redelivery, which the ledger skips.
			if errors.Is(err, nats.ErrReconnectBufExceeded) || errors.Is(err, nats.ErrConnectionClosed) || errors.Is(err, nats.ErrConnectionDraining) {
				// The connection dropped after the gate's check (it keeps
				// no reconnect buffer): none of the rest is sent, not one
				// a warning each, nor to the server it may have reached
				// meanwhile, which the gate has not checked.
				w.cfg.Logger.Warn("meter: "+what+" but not acknowledged: the connection to NATS dropped "+
					"(delivered again, and dropped then as a duplicate)", "messages", len(msgs)-i, "err", err)
				return
			}
			w.cfg.Logger.Warn("meter: ack", "err", err)
		}
	}
}
