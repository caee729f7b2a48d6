package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
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
// (a decimal string) to none. IdempotencyKey, when set (at most
// MaxIdempotencyKeyLen bytes), makes the create safe to retry: a request
// repeating it gets the customer it made, as it is now; one that differs
// otherwise (name, currency, credit limit, as normalized) is EConflict.
type CustomerInput struct {
	Name           string  `json:"name"`
	Currency       string  `json:"currency,omitempty"`
	CreditLimit    *string `json:"credit_limit,omitempty"`
	IdempotencyKey string  `json:"idempotency_key,omitempty"`
}

// KeyPrefix starts every API key secret, so that leaked keys are easy to
// recognise and scan for.
const KeyPrefix = "tg-"

// keyPrefixLen is how much of a secret is kept for display: "tg-" and 8 characters.
const keyPrefixLen = len(KeyPrefix) + 8

// HashKey returns the SHA-256 hash under which a key secret is stored.
func HashKey(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

const customerColumns = `id, name, currency, credit_limit_micros, created_at, updated_at`

// scanCustomer scans customerColumns, then extra.
func scanCustomer(row pgx.Row, extra ...any) (Customer, error) {
	var c Customer
	var limit *int64
	err := row.Scan(append([]any{&c.ID, &c.Name, &c.Currency, &limit, &c.CreatedAt, &c.UpdatedAt}, extra...)...)
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

// CreateCustomer creates a customer, or returns the one in.IdempotencyKey
// made (also when the two race). It returns EInvalid for an empty name, a
// bad currency, a bad credit limit or an idempotency key too long, and
// EConflict for an idempotency key that made a customer with another
// request.
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
	if err := checkText("idempotency_key", in.IdempotencyKey, MaxIdempotencyKeyLen); err != nil {
		return Customer{}, err
	}
	digest, err := requestDigest(in.IdempotencyKey, customerRequest{name, currency, limit})
	if err != nil {
		return Customer{}, err
	}
	var c Customer
	made := false // by an earlier request with this idempotency key
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		c, err = scanCustomer(tx.QueryRow(ctx,
			`INSERT INTO customers (name, currency, credit_limit_micros, idempotency_key, request_digest)
			 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (idempotency_key) DO NOTHING RETURNING `+customerColumns,
			name, currency, limit, nullable(in.IdempotencyKey), digest))
		if errors.Is(err, pgx.ErrNoRows) { // only an idempotency key conflicts
			made = true
			return nil
		}
		if err != nil || limit == nil {
			return err
		}
		_, err = outbox(ctx, tx, "customer", c.ID) // a budget from the start: the gateways hold its state
		return err
	})
	if made {
		return s.customerMadeWith(ctx, in.IdempotencyKey, digest)
	}
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
// gateways. It returns ENotFound, or EInvalid for a bad field or a patch
// that changes nothing.
func (s *Store) UpdateCustomer(ctx context.Context, id string, p CustomerPatch) (Customer, error) {
	if p.Name == nil && !p.SetCreditLimit {
		return Customer{}, errorf(EInvalid, "nothing to change: give name or credit_limit")
	}
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

// Customers lists every customer, oldest first; name, when not empty,
// keeps only those with exactly that name. It reads them a page of
// MaxCustomerLimit at a time (CustomersPage), each page a read of its own:
// a list for people (the console, the API) is CustomersPage.
func (s *Store) Customers(ctx context.Context, name string) ([]Customer, error) {
	var out []Customer
	q := CustomerQuery{Name: name, Limit: MaxCustomerLimit}
	for {
		page, err := s.CustomersPage(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Data...)
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	if out == nil {
		out = []Customer{}
	}
	return out, nil
}

// Customer pages: the number of customers a page holds when no limit is
// asked for, and the most a limit may ask for.
const (
	DefaultCustomerLimit = 1000
	MaxCustomerLimit     = 10000
)

// CustomerQuery selects a page of customers. Name, when not empty, keeps
// those with exactly that name; Search, when not empty, those whose name
// contains it (in any case) or whose id it is. Limit is the page's size
// (0: DefaultCustomerLimit; at most MaxCustomerLimit), Cursor the
// NextCursor of the previous page ("": the first).
type CustomerQuery struct {
	Name   string
	Search string
	Limit  int
	Cursor string
}

// CustomerPage is one page of customers, oldest first. NextCursor, "" on
// the last page, continues with the customers created after Data's last.
type CustomerPage struct {
	Data       []Customer `json:"data"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// CustomersPage lists the customers q selects a page at a time, in the
// order (created_at, id): the first q.Limit after q.Cursor. Only that page
// is read and sent however many customers there are. A customer is placed
// by its created_at, the start of the transaction that created it: one
// committed while a client pages comes after its pages, unless its
// transaction began before the page the client last read, which the
// client then does not see. It returns EInvalid for a
// limit out of range, a cursor it did not return, or a name or search
// text that is not valid text.
func (s *Store) CustomersPage(ctx context.Context, q CustomerQuery) (CustomerPage, error) {
	limit, err := pageLimit(q.Limit, DefaultCustomerLimit, MaxCustomerLimit)
	if err != nil {
		return CustomerPage{}, err
	}
	if err := checkText("name", q.Name, MaxNameLen); err != nil {
		return CustomerPage{}, err
	}
	search := strings.TrimSpace(q.Search)
	if err := checkText("q", search, MaxNameLen); err != nil {
		return CustomerPage{}, err
	}
	afterAt, afterID, err := decodeCreatedCursor(q.Cursor)
	if err != nil {
		return CustomerPage{}, err
	}
	// strpos, not LIKE: a search for "50%" or "a_b" means those characters.
	rows, err := s.pool.Query(ctx, customersPageQuery, q.Name, search, afterAt, afterID, limit+1)
	if err != nil {
		return CustomerPage{}, dbError(err, "customers")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Customer, error) { return scanCustomer(r) })
	if err != nil {
		return CustomerPage{}, dbError(err, "customers")
	}
	page := CustomerPage{}
	page.Data, page.NextCursor = createdPage(out, limit, func(c Customer) (time.Time, string) { return c.CreatedAt, c.ID })
	return page, nil
}

// customersPageQuery reads a page of customers: $1 a name (or ""), $2 a
// search text (or ""), $3 and $4 the creation time and id the page starts
// after, $5 the most rows. Its order is migration 10's index
// (customers_created_idx), so that a page reads its rows alone.
const customersPageQuery = `SELECT ` + customerColumns + ` FROM customers
		WHERE ($1 = '' OR name = $1)
		  AND ($2 = '' OR strpos(lower(name), lower($2)) > 0 OR id::text = lower($2))
		  AND (created_at, id) > ($3, $4::uuid)
		ORDER BY created_at, id LIMIT $5`

// encodeCreatedCursor is the cursor of a page (of CustomersPage or
// KeysPage) that ended with the row created at at with id: base64 (URL
// alphabet, unpadded) of the time in RFC 3339 to the nanosecond, a space
// and the id.
func encodeCreatedCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(at.UTC().Format(time.RFC3339Nano) + " " + id))
}

// pageLimit is a page's limit asked for: def for 0; EInvalid naming limit
// when it is not between 1 and most.
func pageLimit(limit, def, most int) (int, error) {
	if limit == 0 {
		limit = def
	}
	if limit < 1 || limit > most {
		return 0, errorf(EInvalid, "limit: %d is not between 1 and %d", limit, most)
	}
	return limit, nil
}

// createdPage is the page of rows, read in (created_at, id) order as
// limit+1 of them, and the cursor after its last ("" when rows held no
// more than limit: none follow); rows is never nil. created gives a row's
// creation time and id.
func createdPage[T any](rows []T, limit int, created func(T) (time.Time, string)) ([]T, string) {
	if rows == nil {
		rows = []T{}
	}
	if len(rows) <= limit {
		return rows, ""
	}
	rows = rows[:limit]
	return rows, encodeCreatedCursor(created(rows[limit-1]))
}

// decodeCreatedCursor returns the creation time and id of the row a page
// of CustomersPage or KeysPage ended with (encodeCreatedCursor; before the
// first row for ""), or
// EInvalid.
func decodeCreatedCursor(c string) (time.Time, string, error) {
	if c == "" { // no cursor: from the first
		return time.Time{}, "00000000-0000-0000-0000-000000000000", nil
	}
	bad := errorf(EInvalid, "cursor: %q is not a cursor this API returned", c)
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", bad
	}
	at, id, ok := strings.Cut(string(b), " ")
	t, terr := time.Parse(time.RFC3339Nano, at)
	if u, uerr := uuid.Parse(id); !ok || terr != nil || uerr != nil || u.String() != id {
		return time.Time{}, "", bad
	}
	return t, id, nil
}
