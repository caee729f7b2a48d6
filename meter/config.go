package meter

import (
	"fmt"
	"time"
)

// Config is the metering pipeline's configuration (the config file's
// `meter:` section). Zero fields take the documented defaults.
type Config struct {
	// Replicas of the usage stream: 1 on one server, 3 in a cluster. Default 1.
	Replicas int `yaml:"replicas"`
	// DuplicateWindow is how long JetStream drops republished event ids.
	// Default 10m.
	DuplicateWindow time.Duration `yaml:"duplicate_window"`
	// MaxAckPending caps events delivered to workers and not yet
	// acknowledged. Default 20000.
	MaxAckPending int `yaml:"max_ack_pending"`
	// AckWait is how long an unacknowledged event waits before redelivery.
	// Default 30s (extended while a worker retries a batch).
	AckWait time.Duration `yaml:"ack_wait"`
	// MaxDeliver caps deliveries of one event before it is set aside in the
	// dead-letter stream. Default 20.
	MaxDeliver int `yaml:"max_deliver"`
	// BatchSize caps the events per ledger transaction. Default 2000: a
	// backlog drains in bigger transactions, which cost Postgres and the worker
	// less per event (BenchmarkMeter); BatchWait alone bounds the latency.
	BatchSize int `yaml:"batch_size"`
	// BatchWait caps how long a batch waits to fill. Default 50ms.
	BatchWait time.Duration `yaml:"batch_wait"`
	// PublishTimeout bounds the wait for a PubAck before spooling. Default 2s.
	PublishTimeout time.Duration `yaml:"publish_timeout"`
	// SpoolMaxBytes caps the local spool; at the cap the gateway answers 503.
	// Default 1 GiB.
	SpoolMaxBytes int64 `yaml:"spool_max_bytes"`
	// SpoolMaxAge, when set, makes the gateway answer 503 while the oldest
	// spooled event is older. Default 0: no age limit.
	SpoolMaxAge time.Duration `yaml:"spool_max_age"`
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
	def(&c.Replicas, 1)
	def(&c.MaxAckPending, 20000)
	def(&c.MaxDeliver, 20)
	def(&c.BatchSize, 2000)
	defDur(&c.DuplicateWindow, 10*time.Minute)
	defDur(&c.AckWait, 30*time.Second)
	defDur(&c.BatchWait, 50*time.Millisecond)
	defDur(&c.PublishTimeout, 2*time.Second)
	if c.SpoolMaxBytes == 0 {
		c.SpoolMaxBytes = 1 << 30
	}
	switch {
	case c.Replicas != 1 && c.Replicas != 3 && c.Replicas != 5:
		return fmt.Errorf("meter.replicas must be 1, 3 or 5, not %d", c.Replicas)
	case c.BatchSize < 1 || c.BatchSize > 10000:
		return fmt.Errorf("meter.batch_size must be between 1 and 10000, not %d", c.BatchSize)
	case c.MaxDeliver < 2:
		return fmt.Errorf("meter.max_deliver must be at least 2, not %d", c.MaxDeliver)
	case c.MaxAckPending < c.BatchSize:
		return fmt.Errorf("meter.max_ack_pending (%d) must be at least meter.batch_size (%d)", c.MaxAckPending, c.BatchSize)
	case c.BatchWait < time.Millisecond:
		return fmt.Errorf("meter.batch_wait must be at least 1ms")
	case c.SpoolMaxBytes < 1<<20:
		return fmt.Errorf("meter.spool_max_bytes must be at least 1 MiB")
	}
	return nil
}

// Stream returns the stream settings of c.
func (c *Config) Stream() StreamConfig {
	return StreamConfig{Replicas: c.Replicas, DuplicateWindow: c.DuplicateWindow}
}

// Worker returns the worker settings of c.
func (c *Config) Worker() WorkerConfig {
	return WorkerConfig{Stream: c.Stream(), BatchSize: c.BatchSize, BatchWait: c.BatchWait,
		AckWait: c.AckWait, MaxAckPending: c.MaxAckPending, MaxDeliver: c.MaxDeliver}
}
