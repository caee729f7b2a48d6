package api

import (
	"context"
	"strconv"

	"github.com/tollgate-dev/tollgate/ledger"
)

// call sends in (JSON, when not nil) and returns the answer decoded.
func call[T any](ctx context.Context, c *Client, method, path string, in any) (T, error) {
	var out T
	err := c.do(ctx, method, path, in, &out)
	return out, err
}

// getList GETs one of the API's lists ({"data": [...]}) and returns it.
func getList[T any](ctx context.Context, c *Client, path string) ([]T, error) {
	out, err := call[struct {
		Data []T `json:"data"`
	}](ctx, c, "GET", path, nil)
	return out.Data, err
}

// CreateCustomer creates a customer and returns it. Returns EInvalid for
// an empty name, a currency ISO 4217 does not have or a bad credit limit.
func (c *Client) CreateCustomer(ctx context.Context, in ledger.CustomerInput) (ledger.Customer, error) {
	return call[ledger.Customer](ctx, c, "POST", "/admin/v1/customers", in)
}

// Customers returns the customers, oldest first: all of them, or those
// named exactly name when it is not empty (see AllCustomers).
func (c *Client) Customers(ctx context.Context, name string) ([]ledger.Customer, error) {
	return c.AllCustomers(ctx, ledger.CustomerQuery{Name: name})
}

// AllCustomers returns every customer q selects, oldest first, asking for
// them a page (of q.Limit, or the server's default size) at a time
// (CustomersPage) and following the cursors from q.Cursor.
func (c *Client) AllCustomers(ctx context.Context, q ledger.CustomerQuery) ([]ledger.Customer, error) {
	return allPages(q.Cursor, func(cursor string) ([]ledger.Customer, string, error) {
		q.Cursor = cursor
		page, err := c.CustomersPage(ctx, q)
		return page.Data, page.NextCursor, err
	})
}

// allPages reads the pages page returns from cursor on, each naming the
// next's cursor ("": the last), and returns their items in order, or the
// first error.
func allPages[T any](cursor string, page func(cursor string) ([]T, string, error)) ([]T, error) {
	out := []T{}
	for {
		items, next, err := page(cursor)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

// CustomersPage returns one page of the customers q selects, oldest
// first: the first q.Limit (1 to ledger.MaxCustomerLimit; 0: the server's
// default, ledger.DefaultCustomerLimit) after q.Cursor ("": the first
// page). Its NextCursor, "" on the last page, asks for the next. Returns
// EInvalid for a limit out of range or a cursor the server did not return.
func (c *Client) CustomersPage(ctx context.Context, q ledger.CustomerQuery) (ledger.CustomerPage, error) {
	l := ""
	if q.Limit != 0 {
		l = strconv.Itoa(q.Limit)
	}
	path := "/admin/v1/customers" + query("name", q.Name, "q", q.Search, "limit", l, "cursor", q.Cursor)
	return call[ledger.CustomerPage](ctx, c, "GET", path, nil)
}

// Customer returns a customer. Returns ENotFound if it does not exist,
// EInvalid if id is not a UUID.
func (c *Client) Customer(ctx context.Context, id string) (ledger.Customer, error) {
	return call[ledger.Customer](ctx, c, "GET", "/admin/v1/customers/"+seg(id), nil)
}

// UpdateCustomer renames a customer or changes its credit limit, and
// returns it changed. Returns ENotFound if it does not exist, EInvalid if
// id is not a UUID or for an empty name or a bad limit.
func (c *Client) UpdateCustomer(ctx context.Context, id string, p ledger.CustomerPatch) (ledger.Customer, error) {
	patch := map[string]any{}
	if p.Name != nil {
		patch["name"] = *p.Name
	}
	if p.SetCreditLimit {
		patch["credit_limit"] = p.CreditLimit // nil: null, no limit
	}
	return call[ledger.Customer](ctx, c, "PATCH", "/admin/v1/customers/"+seg(id), patch)
}

// Balance returns a customer's balance. Returns ENotFound if the customer
// does not exist, EInvalid if id is not a UUID.
func (c *Client) Balance(ctx context.Context, customerID string) (ledger.Balance, error) {
	return call[ledger.Balance](ctx, c, "GET", "/admin/v1/customers/"+seg(customerID)+"/balance", nil)
}

// CreateKey creates an API key for a customer and returns it with its
// secret, which is never shown again. Returns ENotFound if the customer
// does not exist, EInvalid if its id is not a UUID or for a bad limit.
func (c *Client) CreateKey(ctx context.Context, customerID string, in ledger.KeyInput) (CreatedKey, error) {
	return call[CreatedKey](ctx, c, "POST", "/admin/v1/customers/"+seg(customerID)+"/keys", in)
}

// Keys returns every API key of a customer (never their secrets), oldest
// first, revoked and expired ones included: AllKeys from the first page,
// a page of the server's default size at a time. A list for people (the
// console) is KeysPage: a customer may have many thousands of keys.
// Returns ENotFound if the customer does not exist, EInvalid if its id is
// not a UUID.
func (c *Client) Keys(ctx context.Context, customerID string) ([]ledger.Key, error) {
	return c.AllKeys(ctx, customerID, ledger.KeyQuery{})
}

// AllKeys returns every key of a customer from q.Cursor on ("": the
// first), oldest first, asking for them a page (of q.Limit, or the
// server's default size) at a time (KeysPage) and following the cursors.
// Returns ENotFound if the customer does not exist, EInvalid if its id is
// not a UUID or for a limit out of range or a cursor the server did not
// return.
func (c *Client) AllKeys(ctx context.Context, customerID string, q ledger.KeyQuery) ([]ledger.Key, error) {
	return allPages(q.Cursor, func(cursor string) ([]ledger.Key, string, error) {
		q.Cursor = cursor
		page, err := c.KeysPage(ctx, customerID, q)
		return page.Data, page.NextCursor, err
	})
}

// KeysPage returns one page of a customer's keys (never their secrets),
// oldest first: the first q.Limit (1 to ledger.MaxKeyLimit; 0: the
// server's default, ledger.DefaultKeyLimit) after q.Cursor ("": the first
// page). Its NextCursor, "" on the last page, asks for the next. Returns
// ENotFound if the customer does not exist, EInvalid if its id is not a
// UUID or for a limit out of range or a cursor the server did not return.
func (c *Client) KeysPage(ctx context.Context, customerID string, q ledger.KeyQuery) (ledger.KeyPage, error) {
	l := ""
	if q.Limit != 0 {
		l = strconv.Itoa(q.Limit)
	}
	path := "/admin/v1/customers/" + seg(customerID) + "/keys" + query("limit", l, "cursor", q.Cursor)
	return call[ledger.KeyPage](ctx, c, "GET", path, nil)
}

// RevokeKey revokes an API key and returns it. Returns ENotFound if it
// does not exist, EConflict if it is revoked already, EInvalid if id is
// not a UUID.
func (c *Client) RevokeKey(ctx context.Context, id string) (ledger.Key, error) {
	return call[ledger.Key](ctx, c, "POST", "/admin/v1/keys/"+seg(id)+"/revoke", nil)
}

// CreatePrice adds a price version to the price book and returns it.
// Returns EInvalid naming the field at fault, EConflict when it overlaps a
// version of the same model and currency.
func (c *Client) CreatePrice(ctx context.Context, in ledger.PriceInput) (Price, error) {
	return call[Price](ctx, c, "POST", "/admin/v1/prices", in)
}

// Prices returns the price versions: all, or those of model when it is
// not empty.
func (c *Client) Prices(ctx context.Context, model string) ([]Price, error) {
	return getList[Price](ctx, c, "/admin/v1/prices"+query("model", model))
}

// CreateOverride gives a customer a discount or a custom price, and
// returns it. Returns ENotFound if the customer does not exist, EInvalid
// for bad terms or a customer id that is not a UUID, EConflict when
// another override of the same customer and model starts at the same
// instant, or both are bounded and overlap (a later one otherwise takes
// over from its start: ledger.Store.CreateOverride).
func (c *Client) CreateOverride(ctx context.Context, customerID string, in ledger.OverrideInput) (Override, error) {
	return call[Override](ctx, c, "POST", "/admin/v1/customers/"+seg(customerID)+"/overrides", in)
}

// Overrides returns a customer's overrides. Returns ENotFound if the
// customer does not exist, EInvalid if its id is not a UUID.
func (c *Client) Overrides(ctx context.Context, customerID string) ([]Override, error) {
	return getList[Override](ctx, c, "/admin/v1/customers/"+seg(customerID)+"/overrides")
}

// Key returns one API key, without its secret. Returns ENotFound if it
// does not exist, EInvalid if id is not a UUID.
func (c *Client) Key(ctx context.Context, id string) (ledger.Key, error) {
	return call[ledger.Key](ctx, c, "GET", "/admin/v1/keys/"+seg(id), nil)
}

// UpdateKey changes an API key's name or limits (each field the patch
// sets; null removes a limit) and returns it once the change is in the
// gateways' key buckets. Returns ENotFound if it does not exist,
// EConflict if it is revoked, EInvalid for a bad value.
func (c *Client) UpdateKey(ctx context.Context, id string, p ledger.KeyPatch) (ledger.Key, error) {
	return call[ledger.Key](ctx, c, "PATCH", "/admin/v1/keys/"+seg(id), p)
}
