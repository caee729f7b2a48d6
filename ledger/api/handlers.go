package api

import (
	"encoding/json"
	"fmt"
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
	c, err := a.store.CreateCustomer(r.Context(), in)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, c)
}

func (a *Admin) listCustomers(w http.ResponseWriter, r *http.Request) {
	cs, err := a.store.Customers(r.Context(), r.URL.Query().Get("name"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": cs})
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
	var raw map[string]json.RawMessage
	if err := decode(r, &raw); err != nil {
		a.fail(w, r, err)
		return
	}
	var p ledger.CustomerPatch
	for k, v := range raw {
		var err error
		switch k {
		case "name":
			err = json.Unmarshal(v, &p.Name)
		case "credit_limit":
			p.SetCreditLimit = true
			err = json.Unmarshal(v, &p.CreditLimit)
		default:
			err = fmt.Errorf("unknown field %q", k)
		}
		if err != nil {
			a.fail(w, r, &ledger.Error{Code: ledger.EInvalid, Message: k + ": " + err.Error()})
			return
		}
	}
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
	k, secret, err := a.store.CreateKey(r.Context(), chi.URLParam(r, "id"), in)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, struct {
		ledger.Key
		Secret string `json:"key"`
	}{k, secret})
}

func (a *Admin) listKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := a.store.Keys(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": ks})
}

func (a *Admin) revokeKey(w http.ResponseWriter, r *http.Request) {
	k, err := a.store.RevokeKey(r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, k)
}

// priceJSON is a price version as the API shows it: decimal strings per
// million tokens.
type priceJSON struct {
	ID int64 `json:"id"`
	ledger.PriceInput
}

func toJSON(p ledger.Price) priceJSON {
	return priceJSON{ID: p.ID, PriceInput: p.Input()}
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
	out := make([]priceJSON, len(ps))
	for i, p := range ps {
		out[i] = toJSON(p)
	}
	writeJSON(w, http.StatusOK, map[string]any{"data": out})
}

// usage answers GET /admin/v1/usage?customer_id=&from=&to=&group_by=.
func (a *Admin) usage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	uq := ledger.UsageQuery{CustomerID: q.Get("customer_id"), KeyID: q.Get("key_id"), Model: q.Get("model"),
		GroupBy: q.Get("group_by"), Cursor: q.Get("cursor")}
	if l := q.Get("limit"); l != "" {
		if _, err := fmt.Sscan(l, &uq.Limit); err != nil {
			a.fail(w, r, &ledger.Error{Code: ledger.EInvalid, Message: "limit: " + l + " is not a number"})
			return
		}
	}
	var err error
	if uq.From, err = parseTime("from", q.Get("from")); err != nil {
		a.fail(w, r, err)
		return
	}
	if uq.To, err = parseTime("to", q.Get("to")); err != nil {
		a.fail(w, r, err)
		return
	}
	page, err := a.store.Usage(r.Context(), uq)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}
