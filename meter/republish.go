package meter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// spoolCursor is how far the spool has been published: everything before
// Offset in Segment, and every earlier segment.
type spoolCursor struct {
	Segment uint64 `json:"segment"`
	Offset  int64  `json:"offset"`
}

func (s *Spool) readCursor() (spoolCursor, error) {
	var c spoolCursor
	b, err := os.ReadFile(filepath.Join(s.dir, "cursor"))
	if os.IsNotExist(err) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("spool cursor: %w", err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("spool cursor %s: %w", filepath.Join(s.dir, "cursor"), err)
	}
	return c, nil
}

// writeCursor replaces the cursor atomically and durably.
func (s *Spool) writeCursor(c spoolCursor) error {
	b, _ := json.Marshal(c)
	tmp := filepath.Join(s.dir, "cursor.tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	f.Close()
	if err := os.Rename(tmp, filepath.Join(s.dir, "cursor")); err != nil {
		return err
	}
	return syncDir(s.dir)
}

// Drain publishes the unpublished events in the order they were spooled,
// advancing the cursor as it goes (durably, every 256 events and at the
// end) and deleting segments it has finished. It stops at the first event
// publish refuses and returns how many it published. An event published
// whose cursor advance was lost to a crash is published again later, with
// the same id, which JetStream and the ledger drop.
func (s *Spool) Drain(ctx context.Context, publish func(context.Context, *Event) error) (int, error) {
	cur, err := s.readCursor()
	if err != nil {
		return 0, err
	}
	segs, err := s.segments()
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	active := s.segNum
	s.mu.Unlock()
	published := 0
	for _, n := range segs {
		if n < cur.Segment {
			continue
		}
		from := int64(0)
		if n == cur.Segment {
			from = cur.Offset
		}
		sinceSave := 0
		err := scanSegment(s.segPath(n), from, func(data []byte, next int64) error {
			var e Event
			if err := json.Unmarshal(data, &e); err != nil {
				return fmt.Errorf("spool: segment %d: %w", n, err)
			}
			if err := publish(ctx, &e); err != nil {
				return err
			}
			published++
			cur = spoolCursor{Segment: n, Offset: next}
			s.mu.Lock()
			s.count--
			s.size -= 8 + int64(len(data))
			if s.count == 0 {
				s.oldest = time.Time{}
			}
			s.mu.Unlock()
			if sinceSave++; sinceSave == 256 {
				sinceSave = 0
				return s.writeCursor(cur)
			}
			return nil
		})
		if werr := s.writeCursor(cur); err == nil {
			err = werr
		}
		if err != nil {
			return published, err
		}
		if n < active {
			// Finished and no longer written to.
			if err := os.Remove(s.segPath(n)); err != nil {
				return published, fmt.Errorf("spool: %w", err)
			}
			cur = spoolCursor{Segment: n + 1}
		}
	}
	return published, s.writeCursor(cur)
}

// Republish drains the spool into pub every interval while ctx lasts,
// logging each round that published something or failed.
func (s *Spool) Republish(ctx context.Context, pub *Publisher, interval time.Duration, log *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if events, _, _ := s.Stats(); events == 0 {
			continue
		}
		n, err := s.Drain(ctx, pub.Publish)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("spool: republishing paused", "published", n, "err", err)
		case n > 0:
			log.Info("spool: republished usage events", "events", n)
		}
	}
}

var errNotConnected = errors.New("not connected to NATS")

// DurablePublisher publishes usage events to JetStream and, when that
// fails, appends them to the spool: an event it returns nil for is either
// acknowledged by JetStream or fsync'd locally.
type DurablePublisher struct {
	pub       *Publisher
	spool     *Spool
	connected func() bool
	log       *slog.Logger
	maxAge    time.Duration
	obs       Observer
}

// NewDurablePublisher publishes with pub, falls back to spool, and skips
// straight to the spool while connected reports false (NATS unreachable),
// instead of waiting a timeout per event. maxAge (0: none) is the oldest a
// spooled event may get before Accepting refuses.
func NewDurablePublisher(pub *Publisher, spool *Spool, connected func() bool, maxAge time.Duration, log *slog.Logger, obs Observer) *DurablePublisher {
	return &DurablePublisher{pub: pub, spool: spool, connected: connected, maxAge: maxAge, log: log, obs: observer(obs)}
}

// Publish returns nil once e is acknowledged by JetStream or on disk in
// the spool. It returns an error for an invalid event, or when both fail.
func (d *DurablePublisher) Publish(ctx context.Context, e *Event) error {
	if err := e.Validate(); err != nil {
		return err
	}
	if d.connected() {
		start := time.Now()
		err := d.pub.Publish(ctx, e)
		d.obs.Published(time.Since(start), err)
		if err == nil {
			return nil
		}
		d.log.Warn("usage event spooled: publish failed", "request_id", e.ID, "customer_id", e.CustomerID, "err", err)
	} else {
		d.obs.Published(0, errNotConnected)
	}
	if err := d.spool.Append(e); err != nil {
		return fmt.Errorf("publish failed and spool refused event %s: %w", e.ID, err)
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
