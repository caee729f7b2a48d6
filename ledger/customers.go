package ledger

import (
	"context"
	"crypto/sha256"
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
	if err := checkText("name", name, MaxNameLen); err != nil {
		return Customer{}, err
	}
	if err := checkCurrency(currency, in.Currency); err != nil {
		return Customer{}, err
	}
	limit, err := optionalMicros("credit_limit", in.CreditLimit)
	if err != nil {
		return Customer{}, err
	}
	var c Customer
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		c, err = scanCustomer(tx.QueryRow(ctx,
			`INSERT INTO customers (name, currency, credit_limit_micros) VALUES ($1, $2, $3) RETURNING `+customerColumns,
			name, currency, limit))
		if err != nil || limit == nil {
			return err
		}
		_, err = outbox(ctx, tx, "customer", c.ID) // a budget from the start: the gateways hold its state
		return err
	})
	return c, dbError(err, "customer")
}

// CustomerPatch changes a customer: Name when set; the credit limit when
// SetCreditLimit, to CreditLimit (nil removes the limit).
type CustomerPatch struct {
	Name           *string
	SetCreditLimit bool
	CreditLimit    *string
}

// UpdateCustomer applies a patch. A customer's currency never changes. A
// new credit limit goes to the key outbox in the same transaction, for the
// gateways. It returns ENotFound or EInvalid.
func (s *Store) UpdateCustomer(ctx context.Context, id string, p CustomerPatch) (Customer, error) {
	if p.Name != nil && strings.TrimSpace(*p.Name) == "" {
		return Customer{}, errorf(EInvalid, "name must not be empty")
	}
	if p.Name != nil {
		if err := checkText("name", strings.TrimSpace(*p.Name), MaxNameLen); err != nil {
			return Customer{}, err
		}
	}
	limit, err := optionalMicros("credit_limit", p.CreditLimit)
	if err != nil {
		return Customer{}, err
	}
	var c Customer
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		c, err = scanCustomer(tx.QueryRow(ctx, `
			UPDATE customers SET name = coalesce($2, name),
			  credit_limit_micros = CASE WHEN $3 THEN $4 ELSE credit_limit_micros END, updated_at = now()
			WHERE id = $1 RETURNING `+customerColumns, id, p.Name, p.SetCreditLimit, limit))
		if err != nil || !p.SetCreditLimit {
			return err
		}
		_, err = outbox(ctx, tx, "customer", c.ID)
		return err
	})
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
	if err := checkText("name", name, MaxNameLen); err != nil {
		return nil, err
	}
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
