package ledger

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
)

// KeySet is an in-memory snapshot of the active API keys and of the budget
// decisions for them, refreshed from the ledger in the background (every
// second by Run), so that authenticating and admitting a request never
// waits on Postgres and keeps working through a Postgres outage (with the
// last snapshot). A key created or revoked, and a budget exhausted or
// topped up, shows within one refresh interval plus the meter's lag.
type KeySet struct {
	store *Store
	log   *slog.Logger
	now   func() time.Time
	snap  atomic.Pointer[map[[32]byte]keyOwner]
}

type keyOwner struct {
	customerID, keyID string
	hash              [32]byte
	// blocked, when not empty, says why the key may not spend now.
	blocked string
}

// NewKeySet returns an empty KeySet over s; call Refresh or Run to fill it.
func (s *Store) NewKeySet(log *slog.Logger) *KeySet {
	return &KeySet{store: s, log: log, now: time.Now}
}

// Refresh loads the active keys and their budget decisions from the ledger
// and swaps them in whole. On error the previous snapshot stays in force.
//
// A key is blocked when its customer has a credit limit and
// balance ≤ −credit_limit, or when its spend this UTC day or month has
// reached its daily or monthly limit.
func (k *KeySet) Refresh(ctx context.Context) error {
	now := k.now().UTC()
	day := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC)
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	rows, err := k.store.pool.Query(ctx, `
		SELECT k.id, k.customer_id, k.secret_hash, c.currency,
		  c.credit_limit_micros IS NOT NULL AND coalesce(b.credits_e12 - b.charges_e12, 0) <= -c.credit_limit_micros::numeric * 1000000,
		  coalesce(s.day_e12 >= k.daily_limit_micros::numeric * 1000000, false),
		  coalesce(s.month_e12 >= k.monthly_limit_micros::numeric * 1000000, false)
		FROM api_keys k
		JOIN customers c ON c.id = k.customer_id
		LEFT JOIN customer_balances b ON b.customer_id = c.id AND b.currency = c.currency AND c.credit_limit_micros IS NOT NULL
		LEFT JOIN LATERAL (
		  SELECT sum(charge_e12) FILTER (WHERE hour >= $1) AS day_e12, sum(charge_e12) AS month_e12
		  FROM usage_hourly h WHERE h.key_id = k.id AND h.hour >= $2 AND h.currency = c.currency
		) s ON k.daily_limit_micros IS NOT NULL OR k.monthly_limit_micros IS NOT NULL
		WHERE k.revoked_at IS NULL`, day, month)
	if err != nil {
		return fmt.Errorf("load keys: %w", err)
	}
	defer rows.Close()
	m := map[[32]byte]keyOwner{}
	for rows.Next() {
		var o keyOwner
		var hash []byte
		var currency string
		var noCredit, dayOut, monthOut bool
		if err := rows.Scan(&o.keyID, &o.customerID, &hash, &currency, &noCredit, &dayOut, &monthOut); err != nil {
			return fmt.Errorf("load keys: %w", err)
		}
		o.hash = [32]byte(hash)
		switch {
		case noCredit:
			o.blocked = "the account's prepaid balance and credit limit are exhausted; add credit to continue"
		case dayOut:
			o.blocked = "this API key has reached its daily spend limit"
		case monthOut:
			o.blocked = "this API key has reached its monthly spend limit"
		}
		m[o.hash] = o
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
// ok=false for an unknown or revoked one; blocked, when not empty, says
// why the key may not spend now (a budget is exhausted). Only the secret's
// SHA-256 hash is looked up, and it is compared in constant time.
func (k *KeySet) LookupKey(secret string) (customerID, keyID, blocked string, ok bool) {
	m := k.snap.Load()
	if m == nil {
		return "", "", "", false
	}
	h := HashKey(secret)
	o, ok := (*m)[h]
	if !ok || subtle.ConstantTimeCompare(o.hash[:], h[:]) != 1 {
		return "", "", "", false
	}
	return o.customerID, o.keyID, o.blocked, true
}
