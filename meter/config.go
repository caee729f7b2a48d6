package meter

import (
	"fmt"
	"time"
)

// The defaults of the metering pipeline's settings, in one place: Config,
// WorkerConfig, StreamConfig and NewPublisher take them for zero fields,
// and docs/configuration.md states them.
const (
	DefaultStreamName      = "TOLLGATE_USAGE"
	DefaultSubject         = "tollgate.usage.v1"
	DefaultReplicas        = 1
	DefaultDuplicateWindow = 10 * time.Minute
	DefaultMaxAckPending   = 24000
	DefaultAckWait         = 30 * time.Second
	DefaultMaxDeliver      = 20
	DefaultBatchSize       = 6000
	DefaultBatchWait       = 50 * time.Millisecond
	DefaultWriteLanes      = 2
	DefaultTrimEvery       = time.Second
	DefaultPublishTimeout  = 2 * time.Second
	DefaultSpoolMaxBytes   = 1 << 30
)

// minDuplicateWindow is the shortest duplicate window JetStream takes for a
// stream (nats-server refuses a negative one, or one under 100ms).
const minDuplicateWindow = 100 * time.Millisecond

// Config is the metering pipeline's configuration (the config file's
// `meter:` section). Zero fields take the documented defaults.
type Config struct {
	// Replicas of the usage stream: 1 on one server, 3 in a cluster. Default 1.
	Replicas int `yaml:"replicas"`
	// DuplicateWindow is how long JetStream drops republished event ids.
	// Default 10m; at least 100ms, the shortest JetStream takes.
	DuplicateWindow time.Duration `yaml:"duplicate_window"`
	// MaxAckPending caps events delivered to workers and not yet
	// acknowledged. Default 24000: four batches, so that a worker's pull
	// of the next batch is not cut short while three are decoded, written
	// and acknowledged.
	MaxAckPending int `yaml:"max_ack_pending"`
	// AckWait is how long an unacknowledged event waits before redelivery.
	// Default 30s (extended while a worker retries a batch).
	AckWait time.Duration `yaml:"ack_wait"`
	// MaxDeliver caps deliveries of one event before it is set aside in the
	// dead-letter stream. Default 20.
	MaxDeliver int `yaml:"max_deliver"`
	// BatchSize caps the events pulled at once, split across WriteLanes
	// transactions (a batch can pass it by at most 30 events: a group of
	// events is never split, see WorkerConfig.BatchSize). Default 6000: a
	// backlog drains in bigger transactions, which cost Postgres less per
	// event (BenchmarkMeter, one worker, with MaxAckPending 24000: 46,000
	// events/s at 2000, 53,000 at 6000; Postgres 21.3 against 17.9 µs per
	// event); BatchWait alone bounds the latency.
	BatchSize int `yaml:"batch_size"`
	// BatchWait caps how long a batch waits to fill. Default 50ms.
	BatchWait time.Duration `yaml:"batch_wait"`
	// WriteLanes is how many ledger transactions a worker runs at once,
	// each for its own share of the customers. Default 2 (see
	// WorkerConfig.WriteLanes).
	WriteLanes int `yaml:"write_lanes"`
	// PublishTimeout bounds the wait for a PubAck before spooling. Default 2s.
	PublishTimeout time.Duration `yaml:"publish_timeout"`
	// SpoolMaxBytes caps the local spool; at the cap the gateway answers 503.
	// Default 1 GiB.
	SpoolMaxBytes int64 `yaml:"spool_max_bytes"`
	// SpoolMaxAge, when set, makes the gateway answer 503 while the oldest
	// spooled event is older. Default 0: no age limit.
	SpoolMaxAge time.Duration `yaml:"spool_max_age"`
	// SyncInterval is the embedded JetStream server's sync policy (see
	// SyncPolicy): "always" (fsync every message before its PubAck), or how
	// often it fsyncs. Default "100ms". A NATS server of your own sets its
	// own: jetstream { sync_interval: ... } (deploy/nats.conf).
	SyncInterval string `yaml:"sync_interval"`
}

// Validate fills in defaults and checks ranges; errors name the field.
func (c *Config) Validate() error {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Replicas, DefaultReplicas)
	def(&c.MaxAckPending, DefaultMaxAckPending)
	def(&c.MaxDeliver, DefaultMaxDeliver)
	// A max_ack_pending set below the default batch (valid before the
	// default rose from 2000) takes the batch down with it.
	def(&c.BatchSize, min(DefaultBatchSize, max(c.MaxAckPending, 1)))
	def(&c.WriteLanes, DefaultWriteLanes)
	defDur(&c.DuplicateWindow, DefaultDuplicateWindow)
	defDur(&c.AckWait, DefaultAckWait)
	defDur(&c.BatchWait, DefaultBatchWait)
	defDur(&c.PublishTimeout, DefaultPublishTimeout)
	if c.SpoolMaxBytes == 0 {
		c.SpoolMaxBytes = DefaultSpoolMaxBytes
	}
	if c.SyncInterval == "" {
		c.SyncInterval = DefaultSync.String()
	}
	if _, err := ParseSyncPolicy(c.SyncInterval); err != nil {
		return fmt.Errorf("meter.%w", err)
	}
	switch {
	case c.Replicas != 1 && c.Replicas != 3 && c.Replicas != 5:
		return fmt.Errorf("meter.replicas must be 1, 3 or 5, not %d", c.Replicas)
	case c.BatchSize < 1 || c.BatchSize > 10000:
		return fmt.Errorf("meter.batch_size must be between 1 and 10000, not %d", c.BatchSize)
	case c.WriteLanes < 1 || c.WriteLanes > 16:
		return fmt.Errorf("meter.write_lanes must be between 1 and 16, not %d", c.WriteLanes)
	case c.MaxDeliver < 2:
		return fmt.Errorf("meter.max_deliver must be at least 2, not %d", c.MaxDeliver)
	case c.MaxAckPending < c.BatchSize:
		return fmt.Errorf("meter.max_ack_pending (%d) must be at least meter.batch_size (%d)", c.MaxAckPending, c.BatchSize)
	case c.BatchWait < time.Millisecond:
		return fmt.Errorf("meter.batch_wait must be at least 1ms")
	case c.AckWait < time.Second:
		return fmt.Errorf("meter.ack_wait must be at least 1s, not %s", c.AckWait)
	case c.BatchWait > c.AckWait/3:
		// A batch filling is not kept from redelivery: its first events
		// would come again, and pass max_deliver, while it fills.
		return fmt.Errorf("meter.batch_wait (%s) must be at most a third of meter.ack_wait (%s)", c.BatchWait, c.AckWait)
	case c.DuplicateWindow < minDuplicateWindow:
		// JetStream refuses such a usage stream: nothing would be metered.
		return fmt.Errorf("meter.duplicate_window must be at least %s (JetStream refuses a shorter one), not %s", minDuplicateWindow, c.DuplicateWindow)
	case c.PublishTimeout < 0:
		// NewPublisher took it for the default without a word.
		return fmt.Errorf("meter.publish_timeout must be 0 (its default) or more, not %s", c.PublishTimeout)
	case c.SpoolMaxAge < 0:
		return fmt.Errorf("meter.spool_max_age must be 0 (none) or more, not %s", c.SpoolMaxAge)
	case c.SpoolMaxBytes < 1<<20:
		return fmt.Errorf("meter.spool_max_bytes must be at least 1 MiB")
	}
	return nil
}

// CheckEmbedded returns an error when c cannot work on the embedded
// JetStream server (StartEmbedded), which is a single node: it refuses a
// usage stream of more than one replica, and nothing would reach the
// ledger. c must be validated.
func (c *Config) CheckEmbedded() error {
	if c.Replicas > 1 {
		return fmt.Errorf("meter.replicas is %d, but the embedded JetStream server (TOLLGATE_NATS_URL unset) is a single node, "+
			"which holds one replica: it would refuse the usage stream and nothing would reach the ledger; "+
			"set meter.replicas to 1, or TOLLGATE_NATS_URL to a JetStream cluster of %d servers or more", c.Replicas, c.Replicas)
	}
	return nil
}

// Stream returns the stream settings of c.
func (c *Config) Stream() StreamConfig {
	return StreamConfig{Replicas: c.Replicas, DuplicateWindow: c.DuplicateWindow}
}

// Worker returns the worker settings of c.
func (c *Config) Worker() WorkerConfig {
	return WorkerConfig{Stream: c.Stream(), BatchSize: c.BatchSize, BatchWait: c.BatchWait, WriteLanes: c.WriteLanes,
		AckWait: c.AckWait, MaxAckPending: c.MaxAckPending, MaxDeliver: c.MaxDeliver}
}

// Sync returns the embedded server's sync policy (c validated).
func (c *Config) Sync() SyncPolicy {
	p, err := ParseSyncPolicy(c.SyncInterval)
	if err != nil {
		return DefaultSync
	}
	return p
}
