package meter

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/sethvargo/go-retry"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Store is where the worker writes events: the ledger.
type Store interface {
	// WriteEvents stores a batch atomically, at most once per event id (an
	// id already stored is skipped), and returns how many were new. An error
	// means none of the batch was stored. It returns a *usage.RefusedError
	// for one event no retry can store, an error wrapping
	// usage.ErrBatchRefused for data it cannot take without saying which
	// event holds it, and any other error for a failure a retry may cure
	// (the database unreachable, a serialization failure).
	WriteEvents(ctx context.Context, events []usage.Event) (int, error)
}

// StoredChecker is a Store that can say which events it holds already:
// given event ids, it returns those it has stored (ids that are not UUIDs
// are not stored). A worker whose Store is one asks it about an event
// delivered more than MaxDeliver times before setting it aside: one the
// ledger holds (a worker that crashed, or lost its acks, after its commit)
// is acknowledged instead, so that the dead-letter stream holds only what
// the ledger does not.
type StoredChecker interface {
	StoredIDs(ctx context.Context, ids []string) (map[string]bool, error)
}

// WorkerConfig configures a Worker. Zero fields take the defaults named.
type WorkerConfig struct {
	Stream StreamConfig
	// Durable is the durable consumer's name, shared by all workers so that
	// adding workers adds throughput. Default "tollgate-meter".
	Durable string
	// BatchSize caps the events in a batch, and the messages delivered to
	// the worker and not yet batched (a group, HeaderEvents, is one message
	// of up to 16 events). A group is never split across batches, so a
	// batch can pass BatchSize by the groups read at its cut: by at most 30
	// events (two groups less one event each). Default 6000
	// (DefaultBatchSize).
	BatchSize int
	// WriteLanes is how many ledger transactions the worker runs at once.
	// A pulled batch of a backlog (splitAt events or more) is split by
	// customer (a hash of customer_id), each customer always in the same
	// lane, so the lanes never wait on each other's rollup, balance or key
	// rows; each lane writes its share in one transaction while the next
	// batch is pulled and decoded. Default 2 (DefaultWriteLanes).
	WriteLanes int
	// BatchWait caps how long a batch waits to fill after its first event,
	// and so the latency the worker adds. Default 50ms.
	BatchWait time.Duration
	// AckWait is how long JetStream waits for an ack before redelivering.
	// Default 30s; the worker extends it while it retries a batch, and
	// bounds each write attempt to a third of it.
	AckWait time.Duration
	// MaxAckPending caps the messages delivered and not yet acknowledged
	// across all workers (a group is one). Default 24000 (DefaultMaxAckPending).
	MaxAckPending int
	// MaxDeliver caps deliveries of one event (default 20): past it the
	// event goes to the dead-letter stream rather than block the others.
	MaxDeliver int
	// TrimEvery is how often the worker removes from the usage stream the
	// events below the consumer's ack floor, all acknowledged (streams with
	// limits retention; see EnsureStream). The stream holds up to about
	// this long of events already in the ledger. Default 1s.
	TrimEvery time.Duration
	// Logger receives the worker's logs. Default slog.Default().
	Logger *slog.Logger
	// Observer, when set, receives the worker's measurements.
	Observer Observer

	// pullExpiry is how long each pull request of the subscription lasts
	// (nats.go's PullExpiry, default 30 s); its heartbeats, and so how soon
	// a consumer that stops answering is noticed, follow from it. Tests
	// shorten it.
	pullExpiry time.Duration
}

func (c *WorkerConfig) defaults() {
	c.Stream.defaults()
	if c.Durable == "" {
		c.Durable = "tollgate-meter"
	}
	if c.BatchSize <= 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.BatchWait <= 0 {
		c.BatchWait = DefaultBatchWait
	}
	if c.WriteLanes <= 0 {
		c.WriteLanes = DefaultWriteLanes
	}
	if c.AckWait <= 0 {
		c.AckWait = DefaultAckWait
	}
	if c.MaxAckPending <= 0 {
		c.MaxAckPending = DefaultMaxAckPending
	}
	if c.MaxDeliver <= 0 {
		c.MaxDeliver = DefaultMaxDeliver
	}
	if c.TrimEvery <= 0 {
		c.TrimEvery = DefaultTrimEvery
	}
	if c.pullExpiry <= 0 {
		c.pullExpiry = 30 * time.Second // nats.go's default
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Worker moves usage events from JetStream into a Store: it pulls batches
// from a durable consumer, writes each batch in one call to the Store, and
// acknowledges the batch only after the Store has committed it.
//
// No event can keep the others from the ledger: an event that no retry can
// store (undecodable, invalid, refused by the Store, or delivered more than
// MaxDeliver times) is set aside in the dead-letter stream with the
// reason; a batch the Store refuses as data is split until the refused
// events are found; only transient failures are retried.
type Worker struct {
	cfg    WorkerConfig
	cons   jetstream.Consumer
	stream jetstream.Stream // the stream the worker trims; nil: not trimmed (work-queue, or a server older than 2.9.15)
	// usage is the usage stream, whose duplicate window is dupWindow (see
	// estimates).
	usage     jetstream.Stream
	dupWindow time.Duration
	store     Store
	dlq       *DLQ
	obs       Observer
	// stopFailed is set once a write fails after Run's context ended:
	// the ledger is taken to be out of reach, and every part still to come
	// is handed back without an attempt (each could hang a third of
	// AckWait). One transient failure (a deadlock) does it too: those
	// parts are redelivered 10 s later, one delivery more.
	stopFailed atomic.Bool
	// gate holds back the acknowledgements of a usage stream that is gone
	// (see ackGate).
	gate *ackGate
	// onProgress, when set (by Service), is called once per Run, when the
	// worker first makes progress (see madeProgress); progressed says
	// whether it has in this Run.
	onProgress func()
	progressed atomic.Bool
	// onStall, when set (by Service), is called when the worker's
	// consumer stops answering (see stall); onProgress again when it
	// answers. stalled says whether it does not answer now.
	onStall func(error)
	stalled atomic.Bool
	// onWrite, when set (by Service), is called with the outcome of each
	// attempt to write a part of a batch that is not refused as data: nil
	// once written, the error while the attempts fail and are retried.
	onWrite func(error)
}

// stallRecheck is how often a worker whose consumer does not answer (see
// stall) asks JetStream for it again.
const stallRecheck = 2 * time.Second

// stall records that the worker's consumer does not answer: its
// subscription had no heartbeat, and JetStream, asked for the consumer,
// did not answer or answered err (a cluster that lost its quorum has no
// leader for it). Nothing is delivered meanwhile, and the worker's
// subscription, which nats.go keeps pulling, says nothing else of it.
func (w *Worker) stall(err error) {
	if w.stalled.CompareAndSwap(false, true) {
		w.cfg.Logger.Warn("meter: the usage consumer does not answer (JetStream has no leader for it: a cluster without a quorum?); "+
			"nothing is written to the ledger until it does, and events wait in JetStream or the gateways' spools", "err", err)
		if w.onStall != nil {
			w.onStall(err)
		}
	}
}

// unstall records that the worker's consumer answers again (see stall).
func (w *Worker) unstall() {
	if w.stalled.CompareAndSwap(true, false) {
		w.cfg.Logger.Info("meter: the usage consumer answers again")
		if w.onProgress != nil {
			w.onProgress()
		}
	}
}

// progressAfter is how long a subscription of the consumer must last,
// with no message delivered, before the worker asks JetStream for its
// consumer, and counts as running if it is there: one that ends sooner
// (its consumer deleted again at once, say) made no progress.
const progressAfter = time.Second

// madeProgress records that the worker consumes: a message was delivered
// to it, or its subscription lasted progressAfter and its consumer is
// there. The first time in a Run it calls onProgress.
func (w *Worker) madeProgress() {
	if !w.progressed.Load() && w.progressed.CompareAndSwap(false, true) && w.onProgress != nil {
		w.onProgress()
	}
}

// NewWorker creates (or updates) the durable consumer on the usage stream
// and the dead-letter stream, and returns a Worker over them. The usage
// stream must exist (see EnsureStream).
func NewWorker(ctx context.Context, js jetstream.JetStream, store Store, cfg WorkerConfig) (*Worker, error) {
	cfg.defaults()
	reconnects := js.Conn().Stats().Reconnects // before the stream's info: a reconnect after it is checked
	stream, err := js.Stream(ctx, cfg.Stream.Name)
	if err != nil {
		return nil, fmt.Errorf("usage stream %s: %w", cfg.Stream.Name, noJetStream(js, err))
	}
	usageStream, dupWindow := stream, stream.CachedInfo().Config.Duplicates
	switch version := js.Conn().ConnectedServerVersion(); {
	case stream.CachedInfo().Config.Retention != jetstream.LimitsPolicy:
		stream = nil // JetStream removes each event as it is acknowledged
	case !trimmable(version):
		cfg.Logger.Error("meter: the usage stream has limits retention on a NATS server older than 2.9.15, where trimming it could lose events: it is not trimmed and keeps every event; upgrade the server",
			"stream", cfg.Stream.Name, "server_version", version)
		stream = nil
	}
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
	return &Worker{cfg: cfg, cons: cons, stream: stream, usage: usageStream, dupWindow: dupWindow, store: store, dlq: dlq,
		obs: observer(cfg.Observer), gate: newAckGate(js.Conn(), usageStream, reconnects, cfg.Logger)}, nil
}

// Run moves events until ctx ends, then stops: its subscription drains
// (the server stops delivering to it, within drainWait), and the events
// the worker was sent are written one last time (the attempt bounded by a
// third of AckWait) and acknowledged, or handed back (Nak) when the write
// fails, to be redelivered after handBackDelay, not the ack wait. Run
// returns when its goroutines have; the
// error is non-nil only when the consumer cannot be read at all (it was
// deleted, say), or the usage stream the worker was set up on is gone
// (deleted, perhaps made again: see ackGate), when nothing it holds is
// acknowledged.
//
// Three stages overlap: one goroutine gathers the next batch (see pull), Run decodes
// the last one, and the lanes' goroutines write the one before (a lane is
// one transaction at a time). A batch of splitAt events or more (a
// backlog) is split between the lanes by customer; a smaller one is
// written whole, once the lanes are idle. A crashed event (a gateway's
// estimate after a crash) is written at once unless an event stored more
// than the stream's duplicate window before it is not acknowledged yet:
// then it is held out of the batches until that is so, so that a
// request's exact event reaches the ledger before its estimate (see
// estimates).
func (w *Worker) Run(ctx context.Context) error {
	w.stopFailed.Store(false)
	w.progressed.Store(false)
	defer w.gate.watch()()
	var wg sync.WaitGroup
	defer wg.Wait()
	// The consumer's watch and the stream's trim end with the pull (the
	// consumer may be gone) or with ctx.
	hctx, stopHelpers := context.WithCancel(ctx)
	defer stopHelpers()
	if w.cfg.Observer != nil {
		wg.Go(func() { watchConsumer(hctx, w.cfg.Observer, w.cons, 5*time.Second) })
	}
	if w.stream != nil {
		wg.Go(func() { w.trim(hctx) })
	}
	lanes := make([]chan pending, w.cfg.WriteLanes)
	for i := range lanes {
		lanes[i] = make(chan pending) // unbuffered: a part is in handOver (kept alive) or being written
		wg.Go(func() {
			for p := range lanes[i] {
				w.write(ctx, p)
				close(p.done)
			}
		})
	}
	batches := make(chan []jetstream.Msg) // unbuffered, as lanes: a batch waiting is in the batcher's flush
	var fetchErr error
	wg.Go(func() {
		defer close(batches)
		defer stopHelpers()
		fetchErr = w.pull(ctx, batches)
	})
	seed := maphash.MakeSeed()
	wasWhole := false
	var inFlight []chan struct{}                               // the parts handed to the lanes and not yet written
	est := estimates{every: min(time.Second, w.cfg.AckWait/3)} // crashed events waiting for those before them
	defer func() {
		handBack(w.gate, est.msgs)
		est.events, est.msgs = nil, nil
		est.report(w.obs)
	}()
	for {
		var ds pending
		var over []jetstream.Msg // delivered more than MaxDeliver times
		select {
		case b, ok := <-batches:
			if !ok {
				for _, l := range lanes {
					close(l)
				}
				wg.Wait()
				return fetchErr
			}
			var d pending
			d, over = w.decode(ctx, b)
			if ds = est.hold(d); len(ds.events) < len(d.events) { // crashed events came: those that may, go now
				r := w.release(ctx, &est)
				ds.events, ds.msgs = append(ds.events, r.events...), append(ds.msgs, r.msgs...)
			}
		case <-est.recheck():
			ds = w.release(ctx, &est)
		}
		inFlight = w.handOut(ds, lanes, inFlight, &wasWhole, seed)
		if len(over) > 0 {
			// A message's earlier delivery may be in this batch or in a
			// lane still (they pile up behind a Postgres outage): the
			// ledger is asked once what is in flight is written, or it
			// would not hold them yet, and they would be set aside.
			await(w.gate, inFlight, over, w.cfg.AckWait/3)
			w.setAsideOverDelivered(ctx, notHeld(over, est.msgs))
		}
	}
}

// decode reads a pulled batch's events, a group's one by one (ungroup).
// Events that no retry can store (undecodable or invalid) are set aside in
// the dead-letter stream with the reason, each alone, not returned (a
// malformed group whole, ungroup); those delivered more than MaxDeliver times are
// returned apart (overDelivered), for Run to check against the ledger once
// what is in flight is written. Nothing is silently dropped.
func (w *Worker) decode(ctx context.Context, msgs []jetstream.Msg) (out pending, overDelivered []jetstream.Msg) {
	msgs, malformed := ungroup(msgs) // a group's events, each as a message of its own
	for _, b := range malformed {
		w.obs.DeadLetter("undecodable")
		w.setAside(ctx, b.msg, b.why.Error()+"; set aside whole")
	}
	out = pending{events: make([]usage.Event, 0, len(msgs)), msgs: make([]jetstream.Msg, 0, len(msgs))}
	var late lateEvents
	defer late.log(w.cfg.Logger)
	for _, m := range msgs {
		md, mdErr := m.Metadata()
		if mdErr == nil && md.NumDelivered > 1 {
			w.obs.Redelivered()
			if md.NumDelivered > uint64(w.cfg.MaxDeliver) {
				overDelivered = append(overDelivered, m)
				continue
			}
		}
		e, err := usage.Decode(m.Data())
		if err == nil {
			e.Normalize() // an event from an older or foreign publisher
			err = e.Validate()
		}
		if err == nil && mdErr == nil {
			e.NotAheadOf(md.Timestamp) // a gateway's clock ahead: dated when stored
			if !md.Timestamp.IsZero() && usage.Late(e.Time, md.Timestamp) {
				w.obs.LateEvent()
				late.add(&e, md.Timestamp)
			}
		}
		if err != nil {
			w.obs.DeadLetter("undecodable")
			w.setAside(ctx, m, invalidReason(err))
			continue
		}
		out.events = append(out.events, e)
		out.msgs = append(out.msgs, m)
	}
	return out, overDelivered
}

// lateEvents are the events of a batch received (stored in the usage
// stream) more than usage.LateAfter after the end of their UTC month,
// counted by Observer.LateEvent each and logged once a batch (a spool
// drained days after a month's end holds thousands). Such an event is
// stored as any other, at its own time: it moves its month's statement
// (docs/billing.md, "What moves a past statement"), which may have been
// issued already. A redelivery is reported again.
type lateEvents struct {
	n        int
	first    usage.Event // its id, customer and time
	received time.Time
}

func (l *lateEvents) add(e *usage.Event, received time.Time) {
	if l.n == 0 {
		l.first, l.received = *e, received
	}
	l.n++
}

// log warns of the batch's late events, naming the first (its time as
// event_time: "time" is the JSON record's own).
func (l *lateEvents) log(log *slog.Logger) {
	if l.n == 0 {
		return
	}
	t := l.first.Time.UTC()
	log.Warn("meter: events of a month already over were received: they move that month's statement",
		"events", l.n, "event_id", l.first.ID, "customer_id", l.first.CustomerID, "period", t.Format("2006-01"),
		"event_time", t.Format(time.RFC3339Nano), "received", l.received.UTC().Format(time.RFC3339Nano))
}

// setAsideOverDelivered sets aside the messages delivered more than
// MaxDeliver times, but for the events the ledger holds already, which it
// acknowledges: one question to the Store for them all (storedAlready).
func (w *Worker) setAsideOverDelivered(ctx context.Context, msgs []jetstream.Msg) {
	stored := w.storedAlready(ctx, msgs)
	for i, m := range msgs {
		var delivered uint64
		if md, err := m.Metadata(); err == nil {
			delivered = md.NumDelivered
		}
		if stored[i] {
			w.cfg.Logger.Warn("meter: an event delivered more than max_deliver times is in the ledger already; acknowledged",
				"event_id", eventID(m), "deliveries", delivered)
			w.ack(ctx, []jetstream.Msg{m}, "an event delivered more than max_deliver times is in the ledger already")
			continue
		}
		w.obs.DeadLetter("max_deliver")
		w.setAside(ctx, m, fmt.Sprintf("delivered %d times without being written", delivered))
	}
}

// write stores one lane's share of a batch and acknowledges it. A part
// the store refuses as data is split until the refused events are found
// and set aside; transient failures are retried.
func (w *Worker) write(ctx context.Context, first pending) {
	// A stack of parts to write: the batch, then the halves of any part
	// the store refuses as data.
	todo := []pending{first}
	// Stay under the ack wait (InProgress extends it every retry), so a long
	// Postgres outage does not turn into redeliveries.
	retryLimit := min(5*time.Second, w.cfg.AckWait/2)
	backoff := newBackoff(retryLimit)
	failing := false // a run of transient failures is logged once at WARN, its end at INFO
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		if len(p.events) == 0 {
			todo = todo[:len(todo)-1]
			continue
		}
		if ctx.Err() != nil && w.stopFailed.Load() {
			for _, p := range todo {
				handBack(w.gate, p.msgs)
			}
			return
		}
		start := time.Now()
		n, err := w.attempt(ctx, p.events)
		var refused *usage.RefusedError
		switch {
		case err == nil:
			if failing {
				w.cfg.Logger.Info("meter: writing to the ledger again", "events", len(p.events))
				failing = false
			}
			if w.onWrite != nil {
				w.onWrite(nil)
			}
			w.obs.BatchWritten(len(p.events), n, time.Since(start))
			// Acknowledged unless their stream is gone (ackGate): the
			// commit stands either way, the events are real.
			w.ack(ctx, p.msgs, "a batch written to the ledger")
			todo = todo[:len(todo)-1]
			backoff = newBackoff(retryLimit)
			continue
		case errors.As(err, &refused):
			i := indexOf(p.events, refused.ID)
			if i < 0 {
				break // not one of ours: treat as transient
			}
			w.obs.DeadLetter("refused")
			w.setAside(ctx, p.msgs[i], refused.Reason)
			todo[len(todo)-1] = p.without(i)
			continue
		case errors.Is(err, usage.ErrBatchRefused):
			todo = todo[:len(todo)-1]
			if len(p.events) == 1 {
				w.obs.DeadLetter("refused")
				w.setAside(ctx, p.msgs[0], "the ledger refused the event: "+err.Error())
				continue
			}
			half := len(p.events) / 2
			todo = append(todo, pending{events: p.events[half:], msgs: p.msgs[half:]},
				pending{events: p.events[:half], msgs: p.msgs[:half]})
			continue
		}
		// Transient: retry this part after a backoff, unless the worker is
		// stopping, when everything not written is handed back.
		if ctx.Err() != nil {
			w.stopFailed.Store(true)
			for _, p := range todo {
				handBack(w.gate, p.msgs)
			}
			return
		}
		if w.onWrite != nil {
			w.onWrite(err)
		}
		wait, _ := backoff.Next()
		level := slog.LevelWarn
		if failing {
			level = slog.LevelDebug // every retry of the run, after the first
		}
		w.cfg.Logger.Log(ctx, level, "meter: write batch failed; retrying until the ledger takes it (check Postgres: the events wait in JetStream meanwhile)",
			"events", len(p.events), "backoff", wait, "err", err)
		failing = true
		for _, p := range todo {
			inProgress(w.gate, p.msgs) // keep the ack wait from running out
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

// attempt is one attempt to store events, bounded to a third of the ack
// wait so that a write hanging on a lost connection cannot outlive its
// messages' ack wait. It is not cut short when ctx ends: a stopping
// worker finishes the attempt in progress.
func (w *Worker) attempt(ctx context.Context, events []usage.Event) (int, error) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.AckWait/3)
	defer cancel()
	return w.store.WriteEvents(actx, events)
}

func indexOf(events []usage.Event, id string) int {
	for i := range events {
		if events[i].ID == id {
			return i
		}
	}
	return -1
}

// storedAlready reports, for each of msgs, whether the Store holds its
// event already (see StoredChecker), in one call bounded by 5 seconds;
// false where it cannot say: the message cannot be decoded or is not a
// valid event, the Store is not a StoredChecker, or the check fails (set
// aside then, as before: a replay of a stored event is dropped by the
// ledger).
func (w *Worker) storedAlready(ctx context.Context, msgs []jetstream.Msg) []bool {
	out := make([]bool, len(msgs))
	sc, ok := w.store.(StoredChecker)
	if !ok {
		return out
	}
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		// Only a valid event can be in the ledger: an invalid one's id may
		// parse to a stored event's UUID ("{…}", "urn:uuid:…").
		if e, err := usage.Decode(m.Data()); err == nil {
			if e.Normalize(); e.Validate() == nil {
				ids[i] = e.ID
			}
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	stored, err := sc.StoredIDs(ctx, ids)
	if err != nil {
		return out
	}
	for i, id := range ids {
		out[i] = id != "" && stored[id]
	}
	return out
}

// setAside moves m to the dead-letter stream, retrying until it is there
// (or ctx ends, leaving m to be redelivered), then acknowledges it.
func (w *Worker) setAside(ctx context.Context, m jetstream.Msg, reason string) {
	id, customer := namedIn(m.Data())
	w.cfg.Logger.Error("meter: usage event set aside in the dead-letter stream", "reason", reason,
		"event_id", cmp.Or(eventID(m), id), "customer_id", customer)
	var msgID string // the usage stream message's: a redelivery of it is set aside once
	if meta, err := m.Metadata(); err == nil {
		// The stream's sequence and the message's time: a stream deleted
		// and made again numbers its messages from 1 again, and a sequence
		// alone would name a new message as one set aside before, which
		// the dead-letter stream would drop as a resend.
		msgID = "dlq-" + meta.Stream + "-" + strconv.FormatUint(meta.Sequence.Stream, 10) +
			"-" + strconv.FormatInt(meta.Timestamp.UnixNano(), 10)
		if em, ok := m.(*eventMsg); ok { // one event of a group: its place in it
			msgID += "-" + strconv.Itoa(em.index)
		}
	}
	err := retry.Do(ctx, newBackoff(5*time.Second), func(ctx context.Context) error {
		err := w.dlq.put(ctx, m.Data(), eventID(m), reason, msgID)
		if err != nil && ctx.Err() == nil {
			w.cfg.Logger.Warn("meter: dead-letter stream unreachable; retrying", "err", err)
		}
		return retry.RetryableError(err)
	})
	if err != nil {
		handBack(w.gate, []jetstream.Msg{m}) // stopping: redelivered, and set aside then
		return
	}
	w.ack(ctx, []jetstream.Msg{m}, "an event set aside in the dead-letter stream")
}

// eventID is the event id m's headers give: HeaderEventID on a replayed
// dead letter, else its Nats-Msg-Id, which a publisher sets to the event id;
// for one event of a group, the id its JSON gives.
// namedIn returns the id and customer_id that data, an event set aside,
// names, each cut to maxLoggedName bytes, or "" for one it does not name
// (data that is not a JSON object, or a member that is not a string): for
// the log line of an event whose message carries no id header, and so that
// an operator knows whose usage waits in the dead-letter stream.
func namedIn(data []byte) (id, customer string) {
	var named struct {
		ID         any `json:"id"`
		CustomerID any `json:"customer_id"`
	}
	if json.Unmarshal(data, &named) != nil {
		return "", ""
	}
	cut := func(v any) string {
		s, _ := v.(string)
		return s[:min(len(s), maxLoggedName)]
	}
	return cut(named.ID), cut(named.CustomerID)
}

// maxLoggedName bounds, in bytes, an id or customer id namedIn takes from
// an event's data (a valid one is a 36-byte UUID).
const maxLoggedName = 64

func eventID(m jetstream.Msg) string {
	if em, ok := m.(*eventMsg); ok {
		return em.id()
	}
	if id := m.Headers().Get(HeaderEventID); id != "" {
		return id
	}
	return m.Headers().Get(nats.MsgIdHdr)
}

// invalidReason is the dead-letter reason of an event that does not
// decode or validate: "undecodable or invalid usage event: " and what is
// wrong (invalidDetail).
func invalidReason(err error) string {
	return "undecodable or invalid usage event: " + invalidDetail(err)
}

// invalidDetail is err's text less the "invalid usage event: " that
// Validate's errors begin with (usage.ErrInvalidEvent): the reasons that
// quote it say so already, and would say it twice.
func invalidDetail(err error) string {
	return strings.TrimPrefix(err.Error(), usage.ErrInvalidEvent.Error()+": ")
}
