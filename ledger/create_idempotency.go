package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// requestDigest returns the SHA-256 digest of req as JSON: a creating
// request (a customer's, a key's) as the ledger normalized it, kept
// beside the row its idempotency key made (request_digest, migration 15)
// so that a retry is told from another request with the same key. It
// returns nil when key is "" (no idempotency key: nothing is kept).
func requestDigest(key string, req any) ([]byte, error) {
	if key == "" {
		return nil, nil
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return sum[:], nil
}

// nullable is s, or NULL when s is "".
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// customerRequest is a customer's creating request, normalized, for its
// digest: the name trimmed, the currency upper-cased and defaulted, the
// credit limit in micro-units (nil: none).
type customerRequest struct {
	Name        string `json:"name"`
	Currency    string `json:"currency"`
	CreditLimit *int64 `json:"credit_limit"`
}

// customerMadeWith returns the customer the idempotency key key made,
// when it was made by a request whose digest is digest; EConflict naming
// it when by another request.
func (s *Store) customerMadeWith(ctx context.Context, key string, digest []byte) (Customer, error) {
	var made []byte
	row := s.pool.QueryRow(ctx, `SELECT `+customerColumns+`, request_digest FROM customers WHERE idempotency_key = $1`, key)
	c, err := scanCustomer(row, &made)
	if err != nil {
		return Customer{}, dbError(err, "customer with idempotency_key "+key)
	}
	if string(made) != string(digest) {
		return Customer{}, errorf(EConflict, "idempotency_key %q was used to create customer %s (%q) with a different request; "+
			"give another customer another key", key, c.ID, c.Name)
	}
	return c, nil
}

// keyRequest is a key's creating request, normalized, for its digest:
// the name trimmed, amounts in micro-units, expires_at in UTC to the
// microsecond (as stored), allowed models trimmed. The customer is the
// row's own column, compared apart.
type keyRequest struct {
	Name    string     `json:"name"`
	Daily   *int64     `json:"daily_limit"`
	Monthly *int64     `json:"monthly_limit"`
	RPM     *int64     `json:"rpm_limit"`
	TPM     *int64     `json:"tpm_limit"`
	Conc    *int64     `json:"max_concurrent"`
	Expires *time.Time `json:"expires_at"`
	Models  []string   `json:"allowed_models"`
}

func newKeyRequest(name string, l limits) keyRequest {
	r := keyRequest{Name: name, Daily: l.daily, Monthly: l.monthly, RPM: l.rpm, TPM: l.tpm, Conc: l.conc, Models: l.models}
	if l.expires != nil {
		t := l.expires.UTC().Truncate(time.Microsecond)
		r.Expires = &t
	}
	return r
}

// errNotMade is keyMadeWith's answer when the idempotency key made no key.
var errNotMade = errors.New("no key made with this idempotency key")

// keyMadeWith answers a key's create whose idempotency key already made
// a key: always EConflict, naming that key. Its secret was shown only in
// the first answer (the ledger keeps its hash), so a retry cannot be
// given the key again; the message says to revoke it when the secret
// was lost. It returns errNotMade when key made no key.
func (s *Store) keyMadeWith(ctx context.Context, key, customerID string, digest []byte) error {
	var made []byte
	row := s.pool.QueryRow(ctx, `SELECT `+keyColumns+`, request_digest FROM api_keys WHERE idempotency_key = $1`, key)
	k, err := scanKey(row, &made)
	if errors.Is(err, pgx.ErrNoRows) {
		return errNotMade
	}
	if err != nil {
		return dbError(err, "key with idempotency_key "+key)
	}
	if !strings.EqualFold(k.CustomerID, customerID) || string(made) != string(digest) {
		return errorf(EConflict, "idempotency_key %q was used to create key %s (%q) of customer %s with a different request; "+
			"give another key another idempotency key", key, k.ID, k.Name, k.CustomerID)
	}
	if k.RevokedAt != nil { // nothing left to revoke
		return errorf(EConflict, "idempotency_key %q already created key %s (%q, %s…) at %s, which was revoked at %s; "+
			"its secret was shown only in that answer: to issue a key, create another with a new idempotency key",
			key, k.ID, k.Name, k.Prefix, k.CreatedAt.UTC().Format(time.RFC3339), k.RevokedAt.UTC().Format(time.RFC3339))
	}
	return errorf(EConflict, "idempotency_key %q already created key %s (%q, %s…) at %s; its secret was shown only in that "+
		"answer and is not kept: if it was not received, revoke that key and create another with a new idempotency key",
		key, k.ID, k.Name, k.Prefix, k.CreatedAt.UTC().Format(time.RFC3339))
}
