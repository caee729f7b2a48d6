package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// KeySet is an in-memory snapshot of the active API keys, refreshed from
// the ledger in the background, so that authenticating a request never
// waits on Postgres and keeps working through a Postgres outage (with the
// last snapshot). A key created or revoked shows within one refresh interval.
type KeySet struct {
	store *Store
	log   *slog.Logger
	snap  atomic.Pointer[map[[32]byte]keyOwner]
}

type keyOwner struct{ customerID, keyID string }

// NewKeySet returns an empty KeySet over s; call Refresh or Run to fill it.
func (s *Store) NewKeySet(log *slog.Logger) *KeySet {
	return &KeySet{store: s, log: log}
}

// Refresh loads the active keys from the ledger and swaps them in whole.
// On error the previous snapshot stays in force.
func (k *KeySet) Refresh(ctx context.Context) error {
	rows, err := k.store.pool.Query(ctx,
		`SELECT id, customer_id, secret_hash FROM api_keys WHERE revoked_at IS NULL`)
	if err != nil {
		return fmt.Errorf("load keys: %w", err)
	}
	defer rows.Close()
	m := map[[32]byte]keyOwner{}
	for rows.Next() {
		var o keyOwner
		var hash []byte
		if err := rows.Scan(&o.keyID, &o.customerID, &hash); err != nil {
			return fmt.Errorf("load keys: %w", err)
		}
		m[[32]byte(hash)] = o
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load keys: %w", err)
	}
	k.snap.Store(&m)
	return nil
}

// Run refreshes the snapshot every interval until ctx ends, logging (and
// otherwise riding out) failures.
func (k *KeySet) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := k.Refresh(ctx)
		if err != nil && !failing && ctx.Err() == nil {
			k.log.Warn("key snapshot refresh failing; serving the last snapshot", "err", err)
		} else if err == nil && failing {
			k.log.Info("key snapshot refresh recovered")
		}
		failing = err != nil
	}
}

// Loaded reports whether a snapshot has been loaded at least once.
func (k *KeySet) Loaded() bool { return k.snap.Load() != nil }

// LookupKey returns the customer and key ids of an active key secret, or
// ok=false for an unknown or revoked one. Only the secret's SHA-256 hash is
// compared.
func (k *KeySet) LookupKey(secret string) (customerID, keyID string, ok bool) {
	m := k.snap.Load()
	if m == nil {
		return "", "", false
	}
	o, ok := (*m)[HashKey(secret)]
	return o.customerID, o.keyID, ok
}
