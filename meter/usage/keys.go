package usage

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// KeyState is what a gateway knows of one API key, pushed to every gateway
// when it changes (the ledger is its source): who it bills, its limits,
// and whether it may spend now. The keys bucket holds one per key, keyed
// by KeyHash of the secret; a key revoked keeps a last state that says so.
type KeyState struct {
	// KeyID and CustomerID are UUIDs.
	KeyID      string `json:"key_id"`
	CustomerID string `json:"customer_id"`
	// ExpiresAt, when set, is when the key stops working (401 from then).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// RPMLimit caps the key's requests per minute; 0 is no limit.
	RPMLimit int64 `json:"rpm_limit,omitempty"`
	// TPMLimit caps the key's tokens per minute (prompt + completion, as
	// the providers report them); 0 is no limit.
	TPMLimit int64 `json:"tpm_limit,omitempty"`
	// MaxConcurrent caps the key's requests open at once; 0 is no limit.
	MaxConcurrent int64 `json:"max_concurrent,omitempty"`
	// AllowedModels, when not empty, are the only models the key may use:
	// model names, or "provider/*" for every model of a provider.
	AllowedModels []string `json:"allowed_models,omitempty"`
	// Blocked, when not empty, says why the key may not spend now (its
	// daily or monthly spend limit reached), until BlockedUntil when set
	// (the start of the next UTC day or month).
	Blocked      string     `json:"blocked,omitempty"`
	BlockedUntil *time.Time `json:"blocked_until,omitempty"`
	// SpendLimited reports that the key's spend is limited: the ledger
	// sets it for a key with a daily or monthly spend limit, and the
	// gateway's cache folds in its customer's credit limit. A limit is
	// held only on charges in the customer's currency (there are no
	// exchange rates), so a limited key is refused a model priced in
	// another one.
	SpendLimited bool `json:"spend_limited,omitempty"`
	// Currency is the key's customer's currency (ISO 4217), in which its
	// spend limits and its customer's credit limit are counted.
	Currency string `json:"currency,omitempty"`
	// DailyLimitMicros and MonthlyLimitMicros are the key's spend limits,
	// in micro-units of Currency (nil: none). DaySpentMicros and
	// MonthSpentMicros are its spend of the UTC day and month of Version
	// as the ledger had it then (rounded up): a gateway holds what is left
	// against the requests it admits (gateway's spend holds), counting
	// what it has charged since.
	DailyLimitMicros   *int64 `json:"daily_limit_micros,omitempty"`
	MonthlyLimitMicros *int64 `json:"monthly_limit_micros,omitempty"`
	DaySpentMicros     int64  `json:"day_spent_micros,omitempty"`
	MonthSpentMicros   int64  `json:"month_spent_micros,omitempty"`
	// CreditLeftMicros, for a key whose customer has a credit limit, is
	// what the customer may still spend as of CustomerVersion: its
	// prepaid balance plus its credit limit, in micro-units of Currency
	// (rounded down; negative once overspent). A gateway's cache folds it
	// in from the customer's state; it is not part of the key's.
	CreditLeftMicros *int64 `json:"-"`
	CustomerVersion  int64  `json:"-"`
	// Revoked marks a revoked key's last state: kept in the bucket so that
	// no older state can bring the key back; gateways forget the key.
	Revoked bool `json:"revoked,omitempty"`
	// Version orders the states of one key: a gateway keeps the highest
	// (the ledger's time of the change, in Unix nanoseconds).
	Version int64 `json:"version"`
}

// CustomerState is what a gateway knows of one customer: whether it may
// spend now. The customers bucket holds one per customer with a budget,
// keyed by its id.
type CustomerState struct {
	// Blocked, when not empty, says why the customer's keys may not spend:
	// its prepaid balance and credit limit are exhausted.
	Blocked string `json:"blocked,omitempty"`
	// Currency is the customer's currency (ISO 4217).
	Currency string `json:"currency,omitempty"`
	// CreditLimited reports that the customer has a credit limit (its
	// prepaid balance may not go below minus that limit). It is always
	// written, so that a gateway can tell a state without it (published by
	// an older release) from one that says false.
	CreditLimited bool `json:"credit_limited"`
	// CreditLeftMicros, when CreditLimited, is what the customer may still
	// spend as of Version: its prepaid balance plus its credit limit, in
	// micro-units of Currency (rounded down; negative once overspent). Nil
	// in a state published by a release before it.
	CreditLeftMicros *int64 `json:"credit_left_micros,omitempty"`
	// Overrides are the customer's own terms (custom prices, discounts),
	// for showing callers what a request costs them.
	Overrides []Override `json:"overrides,omitempty"`
	// Version orders the states of one customer, as KeyState.Version.
	Version int64 `json:"version"`
}

// KeyHash is the hex SHA-256 of a key secret: what the ledger stores and
// the keys bucket is keyed by.
func KeyHash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// BlockedAt reports why s may not spend at t, or "" when it may. When the
// block ends by itself (BlockedUntil: a daily or monthly spend limit, at
// the start of the next UTC day or month), it says when, in UTC, so that
// the caller's 402 tells the client when to come back, not only why.
func (s *KeyState) BlockedAt(t time.Time) string {
	switch {
	case s.Blocked == "":
		return ""
	case s.BlockedUntil == nil:
		return s.Blocked
	case t.Before(*s.BlockedUntil):
		return s.Blocked + "; it resets at " + s.BlockedUntil.UTC().Format(time.RFC3339)
	}
	return ""
}

// ExpiredAt reports whether s has expired at t.
func (s *KeyState) ExpiredAt(t time.Time) bool { return s.ExpiresAt != nil && !t.Before(*s.ExpiresAt) }

// KeyChange is the state of one key to publish, under KeyHash of its
// secret.
type KeyChange struct {
	Hash  string
	State KeyState
}

// CustomerChange is the budget state of one customer to publish, under
// its id.
type CustomerChange struct {
	CustomerID string
	State      CustomerState
}

// ModelPrices are every price version of one model, sorted by
// EffectiveFrom (none: the model has no price any more).
type ModelPrices struct {
	Model    string  `json:"model"`
	Versions []Price `json:"versions"`
	// Withheld, when not empty, says why Versions are not here: they were
	// too big to publish. A gateway then cannot estimate the model's costs
	// (rather than take it for unpriced); the ledger still rates it.
	Withheld string `json:"withheld,omitempty"`
	// Version orders the states of one model, as KeyState.Version.
	Version int64 `json:"version"`
}

// Changes are states to publish to the gateways, read together from the
// source: the keys', the customers' and the models' prices.
type Changes struct {
	Keys      []KeyChange
	Customers []CustomerChange
	Prices    []ModelPrices
}

// Len is the number of states in c.
func (c Changes) Len() int { return len(c.Keys) + len(c.Customers) + len(c.Prices) }

// LimitCounts is one key's counts on one gateway, as the gateways share
// them so that rate and concurrency limits hold across gateways.
type LimitCounts struct {
	KeyID string `json:"k"`
	// Requests and Tokens are over the last minute; Open is now.
	Requests int64 `json:"r"`
	Tokens   int64 `json:"t"`
	Open     int64 `json:"o"`
	// Seq orders one gateway's counts: it grows with each reading of
	// them, and a receiver keeps a key's counts of the highest Seq it has
	// heard from that gateway, as publications read in one order may
	// reach NATS in another. 0 (an earlier release) is not ordered.
	Seq uint64 `json:"s,omitempty"`
	// Seconds are Requests and Tokens by the second they were counted in,
	// oldest first, the seconds of the minute holding none left out, so
	// that a receiver slides the minute itself (second s counts until
	// s+60) and tells when the counts leave it (a 429's Retry-After).
	// Empty from an earlier release: only the sums are known.
	// On the wire, "b", packed (LimitCountsWire).
	Seconds []LimitSecond `json:"-"`
	// Partial says Seconds holds only the second a change moved (none when
	// that second has left the minute), the others being as last heard:
	// a gateway sends its whole minute every second, and at each change
	// its sums, its open requests and the one second. On the wire, "p"
	// (LimitCountsWire).
	Partial bool `json:"-"`
}
