package meter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// noJetStream says what "no responders" means on a connection that is up:
// the NATS server answers, but no JetStream does, as when nats-server runs
// without -js (a new operator's first try). Without it the log said only
// "meter worker waiting for NATS ... no responders available for request"
// while NATS was there, and the worker waited forever.
func noJetStream(js jetstream.JetStream, err error) error {
	if errors.Is(err, nats.ErrNoResponders) && js.Conn().IsConnected() {
		return fmt.Errorf("%w (NATS is connected but no JetStream answers: enable JetStream on the server, "+
			"nats-server -js or a jetstream {} block as deploy/nats.conf has)", err)
	}
	return err
}

// StreamConfig describes the JetStream stream that carries usage events.
type StreamConfig struct {
	// Name of the stream. Default "TOLLGATE_USAGE".
	Name string
	// Subject events are published on. Default "tollgate.usage.v1".
	Subject string
	// Replicas is 1 on one server, 3 in a cluster. Default 1.
	Replicas int
	// DuplicateWindow is how long JetStream remembers Nats-Msg-Ids to drop
	// republished events. It is a first filter only: the ledger's unique key
	// is the guarantee. Default 10 minutes.
	DuplicateWindow time.Duration
}

func (c *StreamConfig) defaults() {
	if c.Name == "" {
		c.Name = DefaultStreamName
	}
	if c.Subject == "" {
		c.Subject = DefaultSubject
	}
	if c.Replicas == 0 {
		c.Replicas = DefaultReplicas
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = DefaultDuplicateWindow
	}
}

// EnsureStream creates the usage stream, or updates it to cfg if it exists.
// Events are kept on file storage until the meter has them in the ledger,
// so JetStream holds them while Postgres is down.
//
// Its duplicate window is cfg's or, when the stream has a longer one,
// the stream's: it is never lowered (see below). Its replicas are never
// lowered either: cfg.Replicas below the stream's leaves them as they are
// (lower them with `nats stream edit --replicas`). A stream given a count
// or size limit refuses events past it (DiscardNew) rather than discard
// one; a max_age still removes events at that age, written or not.
//
// A new stream has limits retention with no limit: nothing removes an event
// but the meter workers, which trim the stream below their durable
// consumer's ack floor (Worker.Run), every event of it acknowledged. That
// costs JetStream half the CPU per event of work-queue retention, which
// removes each message as it is acknowledged and writes a tombstone to the
// store for each (BENCHMARKS.md, "Issue 16, stop 25").
// JetStream cannot change a stream's retention to or from work-queue, so a
// stream made work-queue by an earlier version keeps it (the workers do not
// trim it); docs/operations.md says how to move it. On a NATS server older
// than 2.9.15, where a trim could remove events not yet written (see
// minTrimServer), a new stream is made work-queue as before.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) (jetstream.Stream, error) {
	cfg.defaults()
	retention := jetstream.LimitsPolicy
	if !trimmable(js.Conn().ConnectedServerVersion()) {
		retention = jetstream.WorkQueuePolicy // see minTrimServer
	}
	switch old, err := js.Stream(ctx, cfg.Name); {
	case err == nil:
		if old.CachedInfo().Config.Retention == jetstream.WorkQueuePolicy {
			retention = jetstream.WorkQueuePolicy
		}
		// Never lowered: a worker holds a crash estimate back until an
		// exact event of its id would have been dropped by this window
		// (estimates.go), and a process with a shorter
		// meter.duplicate_window shrinking it under running workers let
		// an estimate be billed in place of its exact event.
		cfg.DuplicateWindow = max(cfg.DuplicateWindow, old.CachedInfo().Config.Duplicates)
		// Nor are its replicas: a process with meter.replicas 1 (the
		// default, as for a `tollgate meter` or `admin` started without
		// --config) scaled an R3 stream down to one copy beside gateways
		// configured for three (a review).
		cfg.Replicas = max(cfg.Replicas, old.CachedInfo().Config.Replicas)
	case !errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, fmt.Errorf("usage stream %s: %w", cfg.Name, noJetStream(js, err))
	}
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        cfg.Name,
		Description: "Tollgate usage events, one per upstream request (schema v1)",
		Subjects:    []string{cfg.Subject},
		Retention:   retention,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		Duplicates:  cfg.DuplicateWindow,
		// No limit is set, and should an operator set a count or size
		// limit (nats stream edit), a full stream refuses new events (the
		// gateways spool them, durable) rather than discarding the
		// oldest, which may not be in the ledger yet. The next
		// EnsureStream takes the limit off.
		Discard: jetstream.DiscardNew,
	})
	if err != nil {
		return nil, fmt.Errorf("usage stream %s: %w", cfg.Name, noJetStream(js, err))
	}
	return s, nil
}
