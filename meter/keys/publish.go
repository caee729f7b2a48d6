package keys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Publisher writes key and customer states into the buckets. It never
// replaces a state with an older one: each put compares versions under the
// bucket's compare-and-set, so publishers that race (the admin's syncer and
// a meter worker, say) leave the newest.
type Publisher struct {
	b Buckets
}

// NewPublisher returns a Publisher into b.
func NewPublisher(b Buckets) *Publisher { return &Publisher{b: b} }

// PutKey publishes the state of the key whose secret hashes to hash
// (usage.KeyHash), unless a newer one is there. It returns an error when
// the bucket could not be written.
func (p *Publisher) PutKey(ctx context.Context, hash string, s usage.KeyState) error {
	return put(ctx, p.b.Keys, hash, s.Version, s)
}

// PutCustomer publishes a customer's budget state, unless a newer one is
// there.
func (p *Publisher) PutCustomer(ctx context.Context, customerID string, s usage.CustomerState) error {
	return put(ctx, p.b.Customers, customerID, s.Version, s)
}

// PutPrices publishes a model's prices, unless newer ones are there.
func (p *Publisher) PutPrices(ctx context.Context, s usage.ModelPrices) error {
	return put(ctx, p.b.Prices, PriceKey(s.Model), s.Version, s)
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
