package meter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Republisher sends what a DurablePublisher spooled on to JetStream, in
// the background: the events of the spool to the usage stream, in order,
// with their own ids, and the dead-letter spool's records to the
// dead-letter stream. A spooled record NATS refuses (too large, invalid)
// is moved to the dead-letter stream with the reason, and the records
// behind it flow on; only a transient failure (NATS unreachable) pauses
// the drain until the next round. It is the spools' one drainer.
type Republisher struct {
	spool, dead *Spool
	pub         *Publisher
	js          jetstream.JetStream
	stream      StreamConfig
	connected   func() bool
	interval    time.Duration
	log         *slog.Logger

	dlqMu sync.Mutex
	dlq   *DLQ

	startOnce, stopOnce sync.Once
	stop                chan struct{}
	done                chan struct{}
}

// NewRepublisher returns a Republisher of spool and dead into js, trying
// every interval (default 1s) while connected reports true.
func NewRepublisher(spool, dead *Spool, pub *Publisher, js jetstream.JetStream, stream StreamConfig,
	connected func() bool, interval time.Duration, log *slog.Logger) *Republisher {
	if interval <= 0 {
		interval = time.Second
	}
	return &Republisher{spool: spool, dead: dead, pub: pub, js: js, stream: stream, connected: connected,
		interval: interval, log: log, stop: make(chan struct{}), done: make(chan struct{})}
}

// Start starts the background drain; it returns at once. Calling it again
// does nothing.
func (r *Republisher) Start() {
	r.startOnce.Do(func() { go r.run() })
}

func (r *Republisher) run() {
	defer close(r.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.round(ctx)
	}
}

// Stop stops the background drain and waits for it, then drains both
// spools once more while NATS is connected, within ctx (the last chance
// before a shutdown). It is idempotent, safe on a Republisher never
// started, and returns ctx.Err() if ctx ended first; what is left stays
// spooled for the next start.
func (r *Republisher) Stop(ctx context.Context) error {
	r.stopOnce.Do(func() {
		close(r.stop)
		r.startOnce.Do(func() { close(r.done) }) // never started: nothing to wait for
	})
	select {
	case <-r.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	r.round(ctx)
	return ctx.Err()
}

// round drains both spools once, logging what it did.
func (r *Republisher) round(ctx context.Context) {
	if !r.connected() {
		return
	}
	// Bytes with no event are damaged records waiting to be set aside
	// (see Spool.DrainSkipping).
	if n, size, _ := r.dead.Stats(); n > 0 || size > 0 {
		sent, err := r.dead.DrainSkipping(ctx, r.sendDead, r.skipped("dead-letter spool"))
		r.report("dead letters", sent, err, ctx)
	}
	if n, size, _ := r.spool.Stats(); n > 0 || size > 0 {
		sent, err := r.spool.DrainSkipping(ctx, r.sendEvent, r.skipped("usage spool"))
		r.report("usage events", sent, err, ctx)
	}
}

func (r *Republisher) report(what string, sent int, err error, ctx context.Context) {
	switch {
	case err != nil && ctx.Err() == nil:
		r.log.Warn("spool: republishing paused", "what", what, "sent", sent, "err", err)
	case sent > 0:
		r.log.Info("spool: republished", "what", what, "sent", sent)
	}
}

// sendEvent publishes one spooled event; an event that cannot be
// published at all goes to the dead-letter stream instead.
func (r *Republisher) sendEvent(ctx context.Context, data []byte) error {
	e, err := usage.Decode(data)
	if err == nil {
		e.Normalize() // spooled by an older gateway, perhaps
		err = e.Validate()
	}
	if err != nil {
		return r.deadLetter(ctx, data, e.ID, "a spooled record is not a valid usage event: "+err.Error(), data)
	}
	err = r.pub.Publish(ctx, &e)
	if Permanent(err) {
		return r.deadLetter(ctx, data, e.ID, "NATS refused the spooled usage event: "+err.Error(), data)
	}
	return err
}

// skipped returns what a drain of the spool named which does with bytes
// damaged on disk between intact records: they may hold an event (a
// flipped bit leaves its JSON nearly whole), so they go to the
// dead-letter stream, as they are, with the reason and where they were,
// rather than only to a log line.
func (r *Republisher) skipped(which string) func(ctx context.Context, raw []byte, where string) error {
	return func(ctx context.Context, raw []byte, where string) error {
		r.log.Error("spool: a corrupt record set aside for the dead-letter stream", "spool", which, "where", where, "bytes", len(raw))
		return r.deadLetter(ctx, raw, "", "a corrupt record of the gateway's "+which+" ("+where+"): its bytes as they were", raw)
	}
}

// sendDead moves one record of the dead-letter spool to the stream.
func (r *Republisher) sendDead(ctx context.Context, data []byte) error {
	var d deadRecord
	if err := json.Unmarshal(data, &d); err != nil {
		return r.deadLetter(ctx, data, "", "an unreadable record of the dead-letter spool", data)
	}
	return r.deadLetter(ctx, d.Data, d.EventID, d.Reason, data)
}

// deadLetter sets data aside; record is the spool record it came from,
// whose hash names it (DLQ.put's msgID), so that a drain resumed from an
// older cursor after a kill does not set it aside twice.
func (r *Republisher) deadLetter(ctx context.Context, data []byte, id, reason string, record []byte) error {
	r.dlqMu.Lock()
	defer r.dlqMu.Unlock()
	if r.dlq == nil {
		dlq, err := EnsureDLQ(ctx, r.js, r.stream)
		if err != nil {
			return err
		}
		r.dlq = dlq
	}
	sum := sha256.Sum256(append([]byte(reason+"\x00"), record...))
	return r.dlq.put(ctx, data, id, reason, "dlq-spool-"+hex.EncodeToString(sum[:16]))
}
