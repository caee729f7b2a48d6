package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate-dev/tollgate/ledger"
)

func (a *Admin) createCustomer(w http.ResponseWriter, r *http.Request) {
	var in ledger.CustomerInput
	if err := decode(r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := idempotencyKey(r, &in.IdempotencyKey); err != nil {
		a.fail(w, r, err)
		return
	}
	c, err := a.store.CreateCustomer(r.Context(), in)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, c)
}

// listCustomers serves GET /admin/v1/customers?name=&q=&limit=&cursor=:
// one page of customers, oldest first, the first limit (1 to
// ledger.MaxCustomerLimit; ledger.DefaultCustomerLimit when not given)
// after cursor, with the next_cursor of those after them
// (ledger.Store.CustomersPage). It listed every customer in one answer:
// with 100,000 customers, 20 MB built in memory for each console page.
func (a *Admin) listCustomers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	cq := ledger.CustomerQuery{Name: q.Get("name"), Search: q.Get("q"), Cursor: q.Get("cursor")}
	if l := q.Get("limit"); l != "" { // limit= is no limit given, as for entries
		var err error
		if cq.Limit, err = intParam("limit", l, 1, ledger.MaxCustomerLimit); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	page, err := a.store.CustomersPage(r.Context(), cq)
	a.respond(w, r, http.StatusOK, page, err)
}

func (a *Admin) getCustomer(w http.ResponseWriter, r *http.Request) {
	c, err := a.store.Customer(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// patchCustomer applies {"name"?, "credit_limit"? (string, or null to remove)}.
func (a *Admin) patchCustomer(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Name        ledger.Optional[string] `json:"name"`
		CreditLimit ledger.Optional[string] `json:"credit_limit"`
	}
	if err := decode(r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	p := ledger.CustomerPatch{Name: in.Name.Value, SetCreditLimit: in.CreditLimit.Set, CreditLimit: in.CreditLimit.Value}
	c, err := a.store.UpdateCustomer(r.Context(), chi.URLParam(r, "id"), p)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// createKey answers with the key and, this once, its secret as "key".
func (a *Admin) createKey(w http.ResponseWriter, r *http.Request) {
	var in ledger.KeyInput
	if err := decode(r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	if err := idempotencyKey(r, &in.IdempotencyKey); err != nil {
		a.fail(w, r, err)
		return
	}
	k, secret, err := a.store.CreateKey(r.Context(), chi.URLParam(r, "id"), in)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.propagate(w, r, k.Change)
	writeJSON(w, http.StatusCreated, CreatedKey{k, secret})
}

func (a *Admin) getKey(w http.ResponseWriter, r *http.Request) {
	k, err := a.store.Key(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, k)
}

// patchKey applies a ledger.KeyPatch: each field present is set, null
// removes a limit.
func (a *Admin) patchKey(w http.ResponseWriter, r *http.Request) {
	var p ledger.KeyPatch
	if err := decode(r, &p); err != nil {
		a.fail(w, r, err)
		return
	}
	k, err := a.store.UpdateKey(r.Context(), chi.URLParam(r, "id"), p)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.propagate(w, r, k.Change)
	writeJSON(w, http.StatusOK, k)
}

// listKeys serves GET /admin/v1/customers/{id}/keys?limit=&cursor=: one
// page of the customer's keys, oldest first, the first limit (1 to
// ledger.MaxKeyLimit; ledger.DefaultKeyLimit when not given) after cursor,
// with the next_cursor of those after them (ledger.Store.KeysPage). It
// listed every key in one answer: a customer with 100,000 keys made the
// console's keys page 239 MB.
func (a *Admin) listKeys(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	kq := ledger.KeyQuery{Cursor: q.Get("cursor")}
	if l := q.Get("limit"); l != "" { // limit= is no limit given, as for customers
		var err error
		if kq.Limit, err = intParam("limit", l, 1, ledger.MaxKeyLimit); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	page, err := a.store.KeysPage(r.Context(), chi.URLParam(r, "id"), kq)
	a.respond(w, r, http.StatusOK, page, err)
}

func (a *Admin) revokeKey(w http.ResponseWriter, r *http.Request) {
	k, err := a.store.RevokeKey(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.propagate(w, r, k.Change)
	writeJSON(w, http.StatusOK, k)
}

// CreatedKey is a new API key as the API answers its creation: the key,
// and this once its secret.
type CreatedKey struct {
	ledger.Key
	// Secret is the key itself (tg-…): it is not stored, only its hash.
	Secret string `json:"key"`
}

// Price is a price version as the API shows it: its id, and its prices as
// decimal strings in currency units per million tokens (per request for
// the fees).
type Price struct {
	ID int64 `json:"id"`
	ledger.PriceInput
}

func toJSON(p ledger.Price) Price {
	return Price{ID: p.ID, PriceInput: ledger.PriceInputOf(p)}
}

func (a *Admin) createPrice(w http.ResponseWriter, r *http.Request) {
	var in ledger.PriceInput
	if err := decode(r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	p, err := a.store.CreatePrice(r.Context(), in)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, toJSON(p))
}

func (a *Admin) listPrices(w http.ResponseWriter, r *http.Request) {
	ps, err := a.store.Prices(r.Context(), r.URL.Query().Get("model"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	out := make([]Price, len(ps))
	for i, p := range ps {
		out[i] = toJSON(p)
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": out})
}

// usage answers GET /admin/v1/usage?customer_id=&key_id=&model=&end_user=
// &from=&to=&group_by=&limit=&cursor=. limit, when given, is an integer from 1 to
// 1000; the rest is checked by the ledger (ledger.Store.Usage).
func (a *Admin) usage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	uq := ledger.UsageQuery{CustomerID: q.Get("customer_id"), KeyID: q.Get("key_id"), Model: q.Get("model"),
		EndUser: q.Get("end_user"), GroupBy: q.Get("group_by"), Cursor: q.Get("cursor")}
	var err error
	if q.Get("limit") != "" { // limit= is no limit given, as from= is no from
		if uq.Limit, err = intParam("limit", q.Get("limit"), 1, 1000); err != nil {
			a.fail(w, r, err)
			return
		}
	}
	if uq.From, uq.To, err = optionalRange(r); err != nil {
		a.fail(w, r, err)
		return
	}
	page, err := a.store.Usage(r.Context(), uq)
	if err == nil && len(page.Data) == 0 && uq.CustomerID != "" {
		// An unknown customer is 404, as on its balance and statements,
		// not an empty page that reads as a customer with no usage.
		_, err = a.store.Customer(r.Context(), uq.CustomerID)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}
