package ledger

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Customer is someone billed for usage, in Currency. CreditLimit is a
// decimal string in Currency, or nil for no budget (postpaid): with a limit
// the customer may spend while balance > −credit_limit ("0": strictly
// prepaid).
type Customer struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Currency    string    `json:"currency"`
	CreditLimit *string   `json:"credit_limit"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// CustomerInput is a new customer: Currency defaults to USD; CreditLimit
// (a decimal string) to none.
type CustomerInput struct {
	Name        string  `json:"name"`
	Currency    string  `json:"currency,omitempty"`
	CreditLimit *string `json:"credit_limit,omitempty"`
}

// Key is a customer's API key, as listed: the secret itself is never stored,
// only its SHA-256 hash and a display prefix. Limits are decimal strings in
// the customer's currency, per UTC day and month; nil is no limit.
type Key struct {
	ID           string     `json:"id"`
	CustomerID   string     `json:"customer_id"`
	Name         string     `json:"name"`
	Prefix       string     `json:"prefix"`
	DailyLimit   *string    `json:"daily_limit,omitempty"`
	MonthlyLimit *string    `json:"monthly_limit,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	LastUsedAt   *time.Time `json:"last_used_at,omitempty"`
	RevokedAt    *time.Time `json:"revoked_at,omitempty"`
}

// KeyInput is a new key: a name and optional spend limits (decimal
// strings in the customer's currency).
type KeyInput struct {
	Name         string  `json:"name"`
	DailyLimit   *string `json:"daily_limit,omitempty"`
	MonthlyLimit *string `json:"monthly_limit,omitempty"`
}

// KeyPrefix starts every API key secret, so that leaked keys are easy to
// recognise and scan for.
const KeyPrefix = "tg-"

// keyPrefixLen is how much of a secret is kept for display: "tg-" and 8 characters.
const keyPrefixLen = len(KeyPrefix) + 8

// HashKey returns the SHA-256 hash under which a key secret is stored.
func HashKey(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

const customerColumns = `id, name, currency, credit_limit_micros, created_at, updated_at`

func scanCustomer(row pgx.Row) (Customer, error) {
	var c Customer
	var limit *int64
	err := row.Scan(&c.ID, &c.Name, &c.Currency, &limit, &c.CreatedAt, &c.UpdatedAt)
	c.CreditLimit = microsString(limit)
	return c, err
}

func microsString(m *int64) *string {
	if m == nil {
		return nil
	}
	s := FormatMicros(*m)
	return &s
}

// optionalMicros parses an optional non-negative decimal amount.
func optionalMicros(field string, s *string) (*int64, error) {
	if s == nil {
		return nil, nil
	}
	m, err := ParseMicros(field, *s)
	return &m, err
}

// CreateCustomer creates a customer. It returns EInvalid for an empty name,
// a bad currency or a bad credit limit.
func (s *Store) CreateCustomer(ctx context.Context, in CustomerInput) (Customer, error) {
	name := strings.TrimSpace(in.Name)
	currency := strings.ToUpper(strings.TrimSpace(in.Currency))
	if currency == "" {
		currency = "USD"
	}
	if name == "" {
		return Customer{}, errorf(EInvalid, "name is required")
	}
	if err := checkCurrency(currency, in.Currency); err != nil {
		return Customer{}, err
	}
	limit, err := optionalMicros("credit_limit", in.CreditLimit)
	if err != nil {
		return Customer{}, err
	}
	c, err := scanCustomer(s.pool.QueryRow(ctx,
		`INSERT INTO customers (name, currency, credit_limit_micros) VALUES ($1, $2, $3) RETURNING `+customerColumns,
		name, currency, limit))
	return c, dbError(err, "customer")
}

// CustomerPatch changes a customer: Name when set; the credit limit when
// SetCreditLimit, to CreditLimit (nil removes the limit).
type CustomerPatch struct {
	Name           *string
	SetCreditLimit bool
	CreditLimit    *string
}

// UpdateCustomer applies a patch. A customer's currency never changes. It
// returns ENotFound or EInvalid.
func (s *Store) UpdateCustomer(ctx context.Context, id string, p CustomerPatch) (Customer, error) {
	if p.Name != nil && strings.TrimSpace(*p.Name) == "" {
		return Customer{}, errorf(EInvalid, "name must not be empty")
	}
	limit, err := optionalMicros("credit_limit", p.CreditLimit)
	if err != nil {
		return Customer{}, err
	}
	c, err := scanCustomer(s.pool.QueryRow(ctx, `
		UPDATE customers SET name = coalesce($2, name),
		  credit_limit_micros = CASE WHEN $3 THEN $4 ELSE credit_limit_micros END, updated_at = now()
		WHERE id = $1 RETURNING `+customerColumns, id, p.Name, p.SetCreditLimit, limit))
	return c, dbError(err, "customer "+id)
}

// Customer returns the customer with the given id, or ENotFound.
func (s *Store) Customer(ctx context.Context, id string) (Customer, error) {
	c, err := scanCustomer(s.pool.QueryRow(ctx, `SELECT `+customerColumns+` FROM customers WHERE id = $1`, id))
	return c, dbError(err, "customer "+id)
}

// Customers lists customers, oldest first; name, when not empty, keeps only
// those with exactly that name.
func (s *Store) Customers(ctx context.Context, name string) ([]Customer, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+customerColumns+` FROM customers
		WHERE $1 = '' OR name = $1 ORDER BY created_at, id`, name)
	if err != nil {
		return nil, dbError(err, "customers")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Customer, error) { return scanCustomer(r) })
	if out == nil {
		out = []Customer{}
	}
	return out, dbError(err, "customers")
}

// CreateKey creates an API key for a customer and returns it with its
// secret: "tg-" followed by 32 random bytes in unpadded base64url. The secret
// is returned only here; the ledger keeps its SHA-256 hash. It returns
// ENotFound when the customer does not exist, EInvalid for a bad limit.
func (s *Store) CreateKey(ctx context.Context, customerID string, in KeyInput) (Key, string, error) {
	daily, err := optionalMicros("daily_limit", in.DailyLimit)
	if err != nil {
		return Key{}, "", err
	}
	monthly, err := optionalMicros("monthly_limit", in.MonthlyLimit)
	if err != nil {
		return Key{}, "", err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return Key{}, "", err
	}
	secret := KeyPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	hash := HashKey(secret)
	k, err := scanKey(s.pool.QueryRow(ctx,
		`INSERT INTO api_keys (customer_id, name, prefix, secret_hash, daily_limit_micros, monthly_limit_micros)
		 SELECT id, $2, $3, $4, $5, $6 FROM customers WHERE id = $1
		 RETURNING `+keyColumns,
		customerID, strings.TrimSpace(in.Name), secret[:keyPrefixLen], hash[:], daily, monthly))
	if err != nil {
		return Key{}, "", dbError(err, "customer "+customerID)
	}
	return k, secret, nil
}

const keyColumns = `id, customer_id, name, prefix, daily_limit_micros, monthly_limit_micros, created_at, last_used_at, revoked_at`

func scanKey(row pgx.Row) (Key, error) {
	var k Key
	var daily, monthly *int64
	err := row.Scan(&k.ID, &k.CustomerID, &k.Name, &k.Prefix, &daily, &monthly, &k.CreatedAt, &k.LastUsedAt, &k.RevokedAt)
	k.DailyLimit, k.MonthlyLimit = microsString(daily), microsString(monthly)
	return k, err
}

// RevokeKey revokes an API key. Revocation is the one change an api_keys
// row takes besides its last-used time (it is not a ledger entry);
// gateways stop accepting the key at their next key snapshot refresh
// (every second). It returns ENotFound for an unknown key and EConflict for
// one already revoked.
func (s *Store) RevokeKey(ctx context.Context, keyID string) (Key, error) {
	k, err := scanKey(s.pool.QueryRow(ctx,
		`UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL RETURNING `+keyColumns, keyID))
	if err == nil {
		return k, nil
	}
	err = dbError(err, "key "+keyID)
	if ErrorCode(err) == ENotFound {
		var revoked bool
		if s.pool.QueryRow(ctx, `SELECT revoked_at IS NOT NULL FROM api_keys WHERE id = $1`, keyID).Scan(&revoked) == nil && revoked {
			return Key{}, errorf(EConflict, "key %s is already revoked", keyID)
		}
	}
	return Key{}, err
}

// Keys lists a customer's keys (never their secrets), oldest first.
func (s *Store) Keys(ctx context.Context, customerID string) ([]Key, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE customer_id = $1 ORDER BY created_at, id`, customerID)
	if err != nil {
		return nil, dbError(err, "keys")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Key, error) { return scanKey(r) })
	if out == nil {
		out = []Key{}
	}
	return out, dbError(err, "keys")
}
