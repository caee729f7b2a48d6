package ledger

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Key is a customer's API key, as listed: the secret itself is never stored,
// only its SHA-256 hash and a display prefix. Spend limits are decimal
// strings in the customer's currency, per UTC day and month; the other
// limits are counts (requests or tokens per minute, requests open at
// once); nil is no limit. AllowedModels, when not empty, are the only
// models it may use (names, or "provider/*").
type Key struct {
	ID            string     `json:"id"`
	CustomerID    string     `json:"customer_id"`
	Name          string     `json:"name"`
	Prefix        string     `json:"prefix"`
	DailyLimit    *string    `json:"daily_limit,omitempty"`
	MonthlyLimit  *string    `json:"monthly_limit,omitempty"`
	RPMLimit      *int64     `json:"rpm_limit,omitempty"`
	TPMLimit      *int64     `json:"tpm_limit,omitempty"`
	MaxConcurrent *int64     `json:"max_concurrent,omitempty"`
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
	AllowedModels []string   `json:"allowed_models"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
	LastUsedAt    *time.Time `json:"last_used_at,omitempty"`
	RevokedAt     *time.Time `json:"revoked_at,omitempty"`
	// DailySpend and MonthlySpend are what the key has been charged in
	// the current UTC day and month (as the database's clock has them),
	// as decimal strings in the customer's currency, exact (to 1e-12):
	// the events the meter has written into the ledger, so requests still
	// in flight (held by a gateway until their usage is metered) are not
	// in them. "0" when nothing. The ledger keeps this spend for keys with
	// a daily or monthly limit only: nil on a key without either, and on
	// the answers of CreateKey, UpdateKey and RevokeKey (read the key).
	DailySpend   *string `json:"daily_spend,omitempty"`
	MonthlySpend *string `json:"monthly_spend,omitempty"`
	// Change is the sequence of the change this call made in the key
	// outbox, for waiting until the gateways have it (0: none).
	Change int64 `json:"-"`
}

// KeyInput is a new key: a name (required, not blank) and optional limits
// (see Key).
type KeyInput struct {
	Name          string     `json:"name"`
	DailyLimit    *string    `json:"daily_limit,omitempty"`
	MonthlyLimit  *string    `json:"monthly_limit,omitempty"`
	RPMLimit      *int64     `json:"rpm_limit,omitempty"`
	TPMLimit      *int64     `json:"tpm_limit,omitempty"`
	MaxConcurrent *int64     `json:"max_concurrent,omitempty"`
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
	AllowedModels []string   `json:"allowed_models,omitempty"`
	// IdempotencyKey, when set (at most MaxIdempotencyKeyLen bytes), makes
	// a key at most once: a create repeating it is EConflict naming the
	// key it made (whose secret was shown only then).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// Optional is a field of a patch: left as it is when absent (Set false),
// removed when null (Set, Value nil), set otherwise.
type Optional[T any] struct {
	Set   bool
	Value *T
}

// UnmarshalJSON reads null or a value.
func (o *Optional[T]) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == "null" {
		o.Value = nil
		return nil
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	o.Value = &v
	return nil
}

// MarshalJSON writes the value or null.
func (o Optional[T]) MarshalJSON() ([]byte, error) { return json.Marshal(o.Value) }

// Of is an Optional set to v.
func Of[T any](v T) Optional[T] { return Optional[T]{Set: true, Value: &v} }

// KeyPatch changes a key: each field it sets (null removes a limit, or
// empties allowed_models). A key's customer and secret never change.
type KeyPatch struct {
	Name          Optional[string]    `json:"name,omitzero"`
	DailyLimit    Optional[string]    `json:"daily_limit,omitzero"`
	MonthlyLimit  Optional[string]    `json:"monthly_limit,omitzero"`
	RPMLimit      Optional[int64]     `json:"rpm_limit,omitzero"`
	TPMLimit      Optional[int64]     `json:"tpm_limit,omitzero"`
	MaxConcurrent Optional[int64]     `json:"max_concurrent,omitzero"`
	ExpiresAt     Optional[time.Time] `json:"expires_at,omitzero"`
	AllowedModels Optional[[]string]  `json:"allowed_models,omitzero"`
	// If, when given, makes the patch conditional on the key's stored
	// limits: it is applied only if each limit If sets holds that value
	// then, checked in the statement that writes (so two patches sent at
	// once with the same If cannot both apply); otherwise nothing changes
	// and UpdateKey returns EConflict. A caller that read the key, decided
	// from its values, and must not overwrite a change made since (the
	// console's limits form) gives the values it read.
	If *KeyCondition `json:"if,omitempty"`
}

// IsZero reports an Optional left unset (for omitzero).
func (o Optional[T]) IsZero() bool { return !o.Set }

// limits are a key's limits as columns.
type limits struct {
	daily, monthly, rpm, tpm, conc *int64
	expires                        *time.Time
	models                         []string
}

// checkCounts checks a key's count limits, each nil when not set: a
// positive count, at most what its column holds (max_concurrent is an
// integer column).
func checkCounts(rpm, tpm, concurrent *int64) error {
	for _, c := range []struct {
		name  string
		v     *int64
		limit int64
	}{{"rpm_limit", rpm, 1 << 40}, {"tpm_limit", tpm, 1 << 40}, {"max_concurrent", concurrent, math.MaxInt32}} {
		if c.v != nil && (*c.v <= 0 || *c.v > c.limit) {
			return errorf(EInvalid, "%s: %d is not a positive count of at most %d", c.name, *c.v, c.limit)
		}
	}
	return nil
}

// Bounds of a key's allowed_models. The list travels in the key's state,
// one NATS message (NATS' default max_payload is 1 MiB), as JSON, which
// writes < > & as six bytes each: a list the admin API's 1 MiB body could
// carry made a state of 5.4 MB, which the key syncer retried forever,
// holding back every key change after it. A longer allowlist is better
// written with provider/*.
const (
	MaxAllowedModels      = 1000      // entries
	MaxAllowedModelsBytes = 64 * 1024 // the list as JSON
)

func checkModels(models []string) ([]string, error) {
	if len(models) > MaxAllowedModels {
		return nil, errorf(EInvalid, "allowed_models: %d entries, more than %d; name a provider's models as provider/*",
			len(models), MaxAllowedModels)
	}
	out := []string{}
	for _, m := range models {
		m = strings.TrimSpace(m)
		if m == "" || usage.CheckString(m, usage.MaxModelLen) != nil {
			return nil, errorf(EInvalid, "allowed_models: %q is not a model name or provider/*", m)
		}
		out = append(out, m)
	}
	if b, err := json.Marshal(out); err != nil || len(b) > MaxAllowedModelsBytes {
		return nil, errorf(EInvalid, "allowed_models: %d bytes as JSON, more than %d (< > and & count six); name a provider's models as provider/*",
			len(b), MaxAllowedModelsBytes)
	}
	return out, nil
}

func newLimits(in KeyInput) (limits, error) {
	var l limits
	var err error
	if l.daily, err = optionalMicros("daily_limit", in.DailyLimit); err != nil {
		return l, err
	}
	if l.monthly, err = optionalMicros("monthly_limit", in.MonthlyLimit); err != nil {
		return l, err
	}
	if err := checkCounts(in.RPMLimit, in.TPMLimit, in.MaxConcurrent); err != nil {
		return l, err
	}
	if err := checkTime("expires_at", in.ExpiresAt); err != nil {
		return l, err
	}
	l.rpm, l.tpm, l.conc, l.expires = in.RPMLimit, in.TPMLimit, in.MaxConcurrent, in.ExpiresAt
	l.models, err = checkModels(in.AllowedModels)
	return l, err
}

// CreateKey creates an API key for a customer and returns it with its
// secret: "tg-" followed by 32 random bytes in unpadded base64url. The secret
// is returned only here; the ledger keeps its SHA-256 hash. The change goes
// to the key outbox in the same transaction (Key.Change). It returns
// ENotFound when the customer does not exist, EInvalid for an empty name
// (as UpdateKey does), a bad limit, an expires_at not in the future or an
// idempotency key too long, and EConflict when in.IdempotencyKey already
// made a key (keyMadeWith: also a retry of the same request, which cannot
// be given the secret again, and when the two race).
func (s *Store) CreateKey(ctx context.Context, customerID string, in KeyInput) (Key, string, error) {
	name := strings.TrimSpace(in.Name)
	if name == "" {
		return Key{}, "", errorf(EInvalid, "name must not be empty")
	}
	if err := checkText("name", name, MaxNameLen); err != nil {
		return Key{}, "", err
	}
	l, err := newLimits(in)
	if err != nil {
		return Key{}, "", err
	}
	if err := checkText("idempotency_key", in.IdempotencyKey, MaxIdempotencyKeyLen); err != nil {
		return Key{}, "", err
	}
	digest, err := requestDigest(in.IdempotencyKey, newKeyRequest(name, l))
	if err != nil {
		return Key{}, "", err
	}
	if digest != nil { // a retry is told so even once its expires_at has passed
		if err := s.keyMadeWith(ctx, in.IdempotencyKey, customerID, digest); !errors.Is(err, errNotMade) {
			return Key{}, "", err
		}
	}
	if l.expires != nil && !l.expires.After(time.Now()) {
		// A new key that has expired could never be used: a mistyped year, say.
		return Key{}, "", errorf(EInvalid, "expires_at: %s is not in the future; a new key must be usable",
			l.expires.UTC().Format(time.RFC3339))
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return Key{}, "", err
	}
	secret := KeyPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	hash := HashKey(secret)
	var k Key
	made := false // by a request with this idempotency key that raced this one
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		k, err = scanKey(tx.QueryRow(ctx,
			`INSERT INTO api_keys (customer_id, name, prefix, secret_hash, daily_limit_micros, monthly_limit_micros,
			   rpm_limit, tpm_limit, max_concurrent, expires_at, allowed_models, idempotency_key, request_digest)
			 SELECT id, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13 FROM customers WHERE id = $1
			 ON CONFLICT (idempotency_key) DO NOTHING
			 RETURNING `+keyColumns,
			customerID, name, secret[:keyPrefixLen], hash[:], l.daily, l.monthly,
			l.rpm, l.tpm, l.conc, l.expires, l.models, nullable(in.IdempotencyKey), digest))
		if errors.Is(err, pgx.ErrNoRows) && digest != nil { // no customer, or the idempotency key conflicts
			made = true
			return nil
		}
		if err != nil {
			return err
		}
		k.Change, err = outbox(ctx, tx, "key", k.ID)
		return err
	})
	if made {
		if err := s.keyMadeWith(ctx, in.IdempotencyKey, customerID, digest); !errors.Is(err, errNotMade) {
			return Key{}, "", err
		}
		err = pgx.ErrNoRows // the customer does not exist
	}
	if err != nil {
		return Key{}, "", dbError(err, "customer "+customerID)
	}
	return k, secret, nil
}

const keyColumns = `id, customer_id, name, prefix, daily_limit_micros, monthly_limit_micros, rpm_limit, tpm_limit,
	max_concurrent, expires_at, allowed_models, created_at, updated_at, last_used_at, revoked_at`

// scanKey scans keyColumns, then extra.
func scanKey(row pgx.Row, extra ...any) (Key, error) {
	var k Key
	var daily, monthly *int64
	var conc *int32
	err := row.Scan(append([]any{&k.ID, &k.CustomerID, &k.Name, &k.Prefix, &daily, &monthly, &k.RPMLimit, &k.TPMLimit,
		&conc, &k.ExpiresAt, &k.AllowedModels, &k.CreatedAt, &k.UpdatedAt, &k.LastUsedAt, &k.RevokedAt}, extra...)...)
	k.DailyLimit, k.MonthlyLimit = microsString(daily), microsString(monthly)
	if conc != nil {
		c := int64(*conc)
		k.MaxConcurrent = &c
	}
	if k.AllowedModels == nil {
		k.AllowedModels = []string{}
	}
	return k, err
}

// UpdateKey applies a patch to an active key, with its change in the key
// outbox in the same transaction. It returns ENotFound for an unknown key,
// EConflict for a revoked one or one whose limits do not hold what the
// patch's If requires (nothing changed), EInvalid for a bad limit or a
// patch that changes nothing.
func (s *Store) UpdateKey(ctx context.Context, keyID string, p KeyPatch) (Key, error) {
	changes := p
	changes.If = nil // an "if" alone changes nothing
	if changes == (KeyPatch{}) {
		return Key{}, errorf(EInvalid, "nothing to change: give name, daily_limit, monthly_limit, rpm_limit, tpm_limit, "+
			"max_concurrent, expires_at or allowed_models")
	}
	if p.Name.Set && (p.Name.Value == nil || strings.TrimSpace(*p.Name.Value) == "") {
		return Key{}, errorf(EInvalid, "name must not be empty")
	}
	if p.Name.Set {
		if err := checkText("name", strings.TrimSpace(*p.Name.Value), MaxNameLen); err != nil {
			return Key{}, err
		}
	}
	daily, err := optionalMicros("daily_limit", p.DailyLimit.Value)
	if err != nil {
		return Key{}, err
	}
	monthly, err := optionalMicros("monthly_limit", p.MonthlyLimit.Value)
	if err != nil {
		return Key{}, err
	}
	if err := checkCounts(p.RPMLimit.Value, p.TPMLimit.Value, p.MaxConcurrent.Value); err != nil {
		return Key{}, err
	}
	if err := checkTime("expires_at", p.ExpiresAt.Value); err != nil {
		return Key{}, err
	}
	models := []string{}
	if p.AllowedModels.Value != nil {
		if models, err = checkModels(*p.AllowedModels.Value); err != nil {
			return Key{}, err
		}
	}
	cond, err := p.If.args()
	if err != nil {
		return Key{}, err
	}
	var name *string
	if p.Name.Value != nil {
		n := strings.TrimSpace(*p.Name.Value)
		name = &n
	}
	var k Key
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if p.DailyLimit.Set || p.MonthlyLimit.Set {
			// Before the row: see the key spend lock (keystate.go), waited
			// for at most spendLockWait.
			if _, err := tx.Exec(ctx, spendLockExclusiveBounded); err != nil {
				return err
			}
		}
		var err error
		k, err = scanKey(tx.QueryRow(ctx, `
			UPDATE api_keys SET name = coalesce($2, name),
			  daily_limit_micros = CASE WHEN $3 THEN $4 ELSE daily_limit_micros END,
			  monthly_limit_micros = CASE WHEN $5 THEN $6 ELSE monthly_limit_micros END,
			  rpm_limit = CASE WHEN $7 THEN $8 ELSE rpm_limit END,
			  tpm_limit = CASE WHEN $9 THEN $10 ELSE tpm_limit END,
			  max_concurrent = CASE WHEN $11 THEN $12 ELSE max_concurrent END,
			  expires_at = CASE WHEN $13 THEN $14 ELSE expires_at END,
			  allowed_models = CASE WHEN $15 THEN $16 ELSE allowed_models END,
			  updated_at = now()
			WHERE id = $1 AND revoked_at IS NULL`+keyConditionSQL+` RETURNING `+keyColumns,
			append([]any{keyID, name, p.DailyLimit.Set, daily, p.MonthlyLimit.Set, monthly, p.RPMLimit.Set, p.RPMLimit.Value,
				p.TPMLimit.Set, p.TPMLimit.Value, p.MaxConcurrent.Set, p.MaxConcurrent.Value,
				p.ExpiresAt.Set, p.ExpiresAt.Value, p.AllowedModels.Set, models}, cond...)...))
		if err != nil {
			return err
		}
		if p.DailyLimit.Set || p.MonthlyLimit.Set {
			if err := recomputeKeySpend(ctx, tx, []string{k.ID}); err != nil {
				return err
			}
		}
		k.Change, err = outbox(ctx, tx, "key", k.ID)
		return err
	})
	if err == nil {
		return k, nil
	}
	if isCode(err, "55P03") { // lock_not_available: spendLockWait passed
		return Key{}, errorf(EUnavailable, "key %s: its spend limit could not be changed now: the meter "+
			"held a batch (or a re-rating) open for more than %s, and is not held back longer for a limit; try again", keyID, spendLockWait)
	}
	err = dbError(err, "key "+keyID)
	if ErrorCode(err) == ENotFound && s.keyRevoked(ctx, keyID) {
		return Key{}, errorf(EConflict, "key %s is revoked", keyID)
	}
	if ErrorCode(err) == ENotFound && p.If != nil && s.keyExists(ctx, keyID) {
		return Key{}, p.If.failed(keyID)
	}
	return Key{}, err
}

func (s *Store) keyExists(ctx context.Context, keyID string) bool {
	var n int
	return s.pool.QueryRow(ctx, `SELECT 1 FROM api_keys WHERE id = $1`, keyID).Scan(&n) == nil
}

func (s *Store) keyRevoked(ctx context.Context, keyID string) bool {
	var revoked bool
	return s.pool.QueryRow(ctx, `SELECT revoked_at IS NOT NULL FROM api_keys WHERE id = $1`, keyID).Scan(&revoked) == nil && revoked
}

// RevokeKey revokes an API key. Revocation is the one change an api_keys
// row takes besides its last-used time and its limits (it is not a ledger
// entry); the change goes to the key outbox in the same transaction, and
// the gateways stop accepting the key once the syncer has pushed it. It
// returns ENotFound for an unknown key and EConflict for one already
// revoked.
func (s *Store) RevokeKey(ctx context.Context, keyID string) (Key, error) {
	var k Key
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		k, err = scanKey(tx.QueryRow(ctx,
			`UPDATE api_keys SET revoked_at = now(), updated_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING `+keyColumns, keyID))
		if err != nil {
			return err
		}
		k.Change, err = outbox(ctx, tx, "key", k.ID)
		return err
	})
	if err == nil {
		return k, nil
	}
	err = dbError(err, "key "+keyID)
	if ErrorCode(err) == ENotFound && s.keyRevoked(ctx, keyID) {
		return Key{}, errorf(EConflict, "key %s is already revoked", keyID)
	}
	return Key{}, err
}

// Key pages: the number of keys a page holds when no limit is asked for,
// and the most a limit may ask for (as for customers).
const (
	DefaultKeyLimit = 1000
	MaxKeyLimit     = 10000
)

// KeyQuery selects a page of a customer's keys. Limit is the page's size
// (0: DefaultKeyLimit; at most MaxKeyLimit), Cursor the NextCursor of the
// previous page ("": the first).
type KeyQuery struct {
	Limit  int
	Cursor string
}

// KeyPage is one page of a customer's keys (never their secrets), oldest
// first, revoked and expired ones included. NextCursor, "" on the last
// page, continues with the keys created after Data's last.
type KeyPage struct {
	Data       []Key  `json:"data"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// KeysPage lists a customer's keys a page at a time, in the order
// (created_at, id): the first q.Limit after q.Cursor. Only that page is
// read however many keys the customer has (migration 11's index). A key
// is placed by its created_at, the start of the transaction that created
// it: one committed while a client pages comes after its pages, unless its
// transaction began before the page the client last read, which the client
// then does not see. It returns EInvalid for a limit out of range or a
// cursor it did not return, and ENotFound for an unknown customer.
func (s *Store) KeysPage(ctx context.Context, customerID string, q KeyQuery) (KeyPage, error) {
	limit, err := pageLimit(q.Limit, DefaultKeyLimit, MaxKeyLimit)
	if err != nil {
		return KeyPage{}, err
	}
	afterAt, afterID, err := decodeCreatedCursor(q.Cursor)
	if err != nil {
		return KeyPage{}, err
	}
	rows, err := s.pool.Query(ctx, keysPageQuery, customerID, afterAt, afterID, limit+1)
	if err != nil {
		return KeyPage{}, dbError(err, "keys")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Key, error) { return scanKeySpend(r) })
	if err != nil {
		return KeyPage{}, dbError(err, "keys")
	}
	if len(out) == 0 { // no keys here: is there such a customer? (a key is one's)
		if _, err := s.Customer(ctx, customerID); err != nil {
			return KeyPage{}, err
		}
	}
	page := KeyPage{}
	page.Data, page.NextCursor = createdPage(out, limit, func(k Key) (time.Time, string) { return k.CreatedAt, k.ID })
	return page, nil
}

// keysPageQuery reads a page of a customer's keys: $1 the customer, $2 and
// $3 the creation time and id the page starts after, $4 the most rows. Its
// order is migration 11's index (api_keys_customer_created_idx), so that a
// page reads its rows alone.
const keysPageQuery = `SELECT ` + keyColumns + keySpendColumns + ` FROM api_keys` + keySpendJoin + `
		WHERE customer_id = $1 AND (created_at, id) > ($2, $3::uuid)
		ORDER BY created_at, id LIMIT $4`

// outbox records in tx that the state of a key or a customer changed, and
// returns the change's sequence.
func outbox(ctx context.Context, tx pgx.Tx, kind, ref string) (int64, error) {
	var seq int64
	err := tx.QueryRow(ctx, `INSERT INTO key_outbox (kind, ref) VALUES ($1, $2) RETURNING seq`, kind, ref).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("key outbox: %w", err)
	}
	return seq, nil
}

// Key returns one key (never its secret), or ENotFound.
func (s *Store) Key(ctx context.Context, keyID string) (Key, error) {
	k, err := scanKeySpend(s.pool.QueryRow(ctx, `SELECT `+keyColumns+keySpendColumns+` FROM api_keys`+keySpendJoin+` WHERE id = $1`, keyID))
	return k, dbError(err, "key "+keyID)
}
