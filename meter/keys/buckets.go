// Package keys pushes API keys and budget states to every gateway through
// JetStream key-value buckets, so that no gateway polls the database for
// them: Postgres stays their source, a Syncer publishes each change (from
// the ledger's change outbox) within milliseconds, and each gateway's
// Cache watches the buckets and answers lookups from memory, a Postgres
// outage included. A key the cache does not know yet (issued a moment ago)
// is looked up once in the ledger, rate-limited and negatively cached, so
// that it works on every gateway as soon as the admin API has returned it.
package keys

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Bucket names.
const (
	// KeysBucket holds one usage.KeyState per active key, keyed by the hex
	// SHA-256 of its secret (usage.KeyHash).
	KeysBucket = "TOLLGATE_KEYS"
	// CustomersBucket holds one usage.CustomerState per customer with a
	// budget state or overrides to push, keyed by customer id.
	CustomersBucket = "TOLLGATE_CUSTOMERS"
	// PricesBucket holds one usage.ModelPrices per priced model, keyed by
	// PriceKey of its name.
	PricesBucket = "TOLLGATE_PRICES"
)

// PriceKey is the prices bucket's key of a model: its name in unpadded
// base64url (a model name may hold characters a key may not).
func PriceKey(model string) string { return base64.RawURLEncoding.EncodeToString([]byte(model)) }

// Buckets are the two buckets, opened or created.
type Buckets struct {
	Keys, Customers, Prices jetstream.KeyValue
	js                      jetstream.JetStream // for pipelined puts
}

// EnsureBuckets opens the buckets, creating those missing: file storage,
// the last value of each entry only, with replicas copies (1 on one
// server, 3 in a cluster). A bucket that exists is left as it is (its
// replicas change with the nats CLI).
func EnsureBuckets(ctx context.Context, js jetstream.JetStream, replicas int) (Buckets, error) {
	if replicas <= 0 {
		replicas = 1
	}
	b := Buckets{js: js}
	for _, c := range []struct {
		name, desc string
		dst        *jetstream.KeyValue
	}{
		{KeysBucket, "Tollgate API keys, by the SHA-256 of their secret: who they bill, their limits, whether they may spend", &b.Keys},
		{CustomersBucket, "Tollgate customers' budget states and overrides", &b.Customers},
		{PricesBucket, "Tollgate's price book, by model", &b.Prices},
	} {
		kv, err := js.KeyValue(ctx, c.name)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: c.name, Description: c.desc,
				History: 1, Storage: jetstream.FileStorage, Replicas: replicas})
			if errors.Is(err, jetstream.ErrBucketExists) { // created meanwhile
				kv, err = js.KeyValue(ctx, c.name)
			}
		}
		if err != nil {
			return Buckets{}, fmt.Errorf("bucket %s: %w", c.name, err)
		}
		*c.dst = kv
	}
	return b, nil
}
