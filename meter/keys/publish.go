package keys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Publisher writes key and customer states into the buckets. It never
// replaces a state with an older one: each put compares versions under the
// bucket's compare-and-set, so publishers that race (the admin's syncer and
// a meter worker, say) leave the newest. A state too big for one message
// is published smaller, safe for the gateways, and logged (fit).
type Publisher struct {
	b   Buckets
	log *slog.Logger
}

// NewPublisher returns a Publisher into b, logging to log (slog.Default
// when nil).
func NewPublisher(b Buckets, log *slog.Logger) *Publisher {
	if log == nil {
		log = slog.Default()
	}
	return &Publisher{b: b, log: log}
}

// PutKey publishes the state of the key whose secret hashes to hash
// (usage.KeyHash), unless a newer one is there. It returns an error when
// the bucket could not be written.
func (p *Publisher) PutKey(ctx context.Context, hash string, s usage.KeyState) error {
	return p.fit(ctx, p.b.Keys, hash, s.Version, s, func(size int) []smaller { return smallerKey(s, size) },
		"key_id", s.KeyID, "customer_id", s.CustomerID)
}

// PutCustomer publishes a customer's budget state, unless a newer one is
// there.
func (p *Publisher) PutCustomer(ctx context.Context, customerID string, s usage.CustomerState) error {
	return p.fit(ctx, p.b.Customers, customerID, s.Version, s, func(int) []smaller { return smallerCustomer(s, time.Now()) },
		"customer_id", customerID)
}

// PutPrices publishes a model's prices, unless newer ones are there.
func (p *Publisher) PutPrices(ctx context.Context, s usage.ModelPrices) error {
	return p.fit(ctx, p.b.Prices, PriceKey(s.Model), s.Version, s, func(size int) []smaller { return smallerPrices(s, time.Now(), size) },
		"model", s.Model)
}

// fit puts v as put does; when it is too big for one message (tooBig), it
// puts the first of the smaller states of v that fits instead, and logs it
// at ERROR with who (the entry's attributes) and what to do. It returns
// put's error when none fits.
func (p *Publisher) fit(ctx context.Context, kv jetstream.KeyValue, key string, version int64, v any,
	smaller func(size int) []smaller, who ...any) error {
	err := put(ctx, kv, key, version, v)
	if !tooBig(err) {
		return err
	}
	data, _ := json.Marshal(v)
	for _, s := range smaller(len(data)) {
		if serr := put(ctx, kv, key, version, s.state); tooBig(serr) {
			continue
		} else if serr != nil {
			return serr
		}
		p.log.Error("key sync: a state too big for one NATS message; published a smaller one in its place",
			append(who, "bucket", kv.Bucket(), "bytes", len(data), "published", s.does)...)
		return nil
	}
	return err
}

// put writes v under key when its version is newer than the entry's.
func put(ctx context.Context, kv jetstream.KeyValue, key string, version int64, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	for range 16 {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			if _, err := kv.Create(ctx, key, data); errors.Is(err, jetstream.ErrKeyExists) {
				continue // created meanwhile: compare with it
			} else if err != nil {
				return fmt.Errorf("publish %s %s: %w", kv.Bucket(), key, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("publish %s %s: %w", kv.Bucket(), key, err)
		}
		var cur struct {
			Version int64 `json:"version"`
		}
		if json.Unmarshal(e.Value(), &cur) == nil && cur.Version >= version {
			return nil // as new or newer already
		}
		if _, err := kv.Update(ctx, key, data, e.Revision()); err == nil {
			return nil
		} else if !isWrongRevision(err) {
			return fmt.Errorf("publish %s %s: %w", kv.Bucket(), key, err)
		}
	}
	return fmt.Errorf("publish %s %s: too many concurrent updates", kv.Bucket(), key)
}

func isWrongRevision(err error) bool {
	var api *jetstream.APIError
	return errors.As(err, &api) && (api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		api.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
