package meter

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

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
// Events are kept on file storage until the meter worker acknowledges them
// (work-queue retention), so JetStream holds them while Postgres is down.
func EnsureStream(ctx context.Context, js jetstream.JetStream, cfg StreamConfig) (jetstream.Stream, error) {
	cfg.defaults()
	s, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        cfg.Name,
		Description: "Tollgate usage events, one per upstream request (schema v1)",
		Subjects:    []string{cfg.Subject},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    cfg.Replicas,
		Duplicates:  cfg.DuplicateWindow,
		Discard:     jetstream.DiscardOld,
	})
	if err != nil {
		return nil, fmt.Errorf("usage stream %s: %w", cfg.Name, err)
	}
	return s, nil
}
