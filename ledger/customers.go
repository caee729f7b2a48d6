package ledger

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"time"
)

// Customer is someone billed for usage.
type Customer struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// Key is a customer's API key, as listed: the secret itself is never stored,
// only its SHA-256 hash and a display prefix.
type Key struct {
	ID         string     `json:"id"`
	CustomerID string     `json:"customer_id"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	CreatedAt  time.Time  `json:"created_at"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// KeyPrefix starts every API key secret, so that leaked keys are easy to
// recognise and scan for.
const KeyPrefix = "tg-"

// keyPrefixLen is how much of a secret is kept for display: "tg-" and 8 characters.
const keyPrefixLen = len(KeyPrefix) + 8

// HashKey returns the SHA-256 hash under which a key secret is stored.
func HashKey(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// CreateCustomer creates a customer. It returns EInvalid for an empty name.
func (s *Store) CreateCustomer(ctx context.Context, name string) (Customer, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return Customer{}, errorf(EInvalid, "name is required")
	}
	var c Customer
	err := s.pool.QueryRow(ctx,
		`INSERT INTO customers (name) VALUES ($1) RETURNING id, name, created_at`, name,
	).Scan(&c.ID, &c.Name, &c.CreatedAt)
	return c, dbError(err, "customer")
}

// Customer returns the customer with the given id, or ENotFound.
func (s *Store) Customer(ctx context.Context, id string) (Customer, error) {
	var c Customer
	err := s.pool.QueryRow(ctx,
		`SELECT id, name, created_at FROM customers WHERE id = $1`, id,
	).Scan(&c.ID, &c.Name, &c.CreatedAt)
	return c, dbError(err, "customer "+id)
}

// Customers lists customers, oldest first; name, when not empty, keeps only
// those with exactly that name.
func (s *Store) Customers(ctx context.Context, name string) ([]Customer, error) {
	rows, err := s.pool.Query(ctx,
		`SELECT id, name, created_at FROM customers
		 WHERE $1 = '' OR name = $1 ORDER BY created_at, id`, name)
	if err != nil {
		return nil, dbError(err, "customers")
	}
	defer rows.Close()
	out := []Customer{}
	for rows.Next() {
		var c Customer
		if err := rows.Scan(&c.ID, &c.Name, &c.CreatedAt); err != nil {
			return nil, dbError(err, "customers")
		}
		out = append(out, c)
	}
	return out, dbError(rows.Err(), "customers")
}

// CreateKey creates an API key for a customer and returns it with its
// secret: "tg-" followed by 32 random bytes in unpadded base64url. The secret
// is returned only here; the ledger keeps its SHA-256 hash. It returns
// ENotFound when the customer does not exist.
func (s *Store) CreateKey(ctx context.Context, customerID, name string) (Key, string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return Key{}, "", err
	}
	secret := KeyPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	hash := HashKey(secret)
	k := Key{CustomerID: customerID, Name: strings.TrimSpace(name), Prefix: secret[:keyPrefixLen]}
	err := s.pool.QueryRow(ctx,
		`INSERT INTO api_keys (customer_id, name, prefix, secret_hash)
		 SELECT id, $2, $3, $4 FROM customers WHERE id = $1
		 RETURNING id, created_at`,
		customerID, k.Name, k.Prefix, hash[:],
	).Scan(&k.ID, &k.CreatedAt)
	if err != nil {
		return Key{}, "", dbError(err, "customer "+customerID)
	}
	return k, secret, nil
}

// RevokeKey revokes an API key. Revocation is the one change an api_keys
// row takes (it is not a ledger entry); gateways stop accepting the key at
// their next key snapshot refresh (every second). It returns ENotFound for
// an unknown key and EConflict for one already revoked.
func (s *Store) RevokeKey(ctx context.Context, keyID string) (Key, error) {
	var k Key
	err := s.pool.QueryRow(ctx,
		`UPDATE api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL
		 RETURNING id, customer_id, name, prefix, created_at, revoked_at`, keyID,
	).Scan(&k.ID, &k.CustomerID, &k.Name, &k.Prefix, &k.CreatedAt, &k.RevokedAt)
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
	rows, err := s.pool.Query(ctx,
		`SELECT id, customer_id, name, prefix, created_at, revoked_at FROM api_keys
		 WHERE customer_id = $1 ORDER BY created_at, id`, customerID)
	if err != nil {
		return nil, dbError(err, "keys")
	}
	defer rows.Close()
	out := []Key{}
	for rows.Next() {
		var k Key
		if err := rows.Scan(&k.ID, &k.CustomerID, &k.Name, &k.Prefix, &k.CreatedAt, &k.RevokedAt); err != nil {
			return nil, dbError(err, "keys")
		}
		out = append(out, k)
	}
	return out, dbError(rows.Err(), "keys")
}
