package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate-dev/tollgate/ledger"
)

// respond writes v with status, or the error.
func (a *Admin) respond(w http.ResponseWriter, r *http.Request, status int, v any, err error) {
	if err != nil {
		a.fail(w, r, err)
		return
	}
	writeJSON(w, status, v)
}

func (a *Admin) createOverride(w http.ResponseWriter, r *http.Request) {
	var in ledger.OverrideInput
	if err := decode(r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	o, err := a.store.CreateOverride(r.Context(), chi.URLParam(r, "id"), in)
	a.respond(w, r, http.StatusCreated, overrideJSON(o), err)
}

// Override is an override as the API shows it: a discount (DiscountBP),
// or a custom Price (decimal strings per million tokens, without model or
// dates: the override's own).
type Override struct {
	ledger.Override
	Price *ledger.PriceInput `json:"price,omitempty"`
}

// MarshalJSON writes a discount's discount_bp even when it is 0 (an
// override that ends a discount: without it, the override showed neither
// discount_bp nor price), and a custom price's price without discount_bp.
func (o Override) MarshalJSON() ([]byte, error) {
	type plain Override // without this method
	if o.Price != nil {
		return json.Marshal(plain(o))
	}
	return json.Marshal(struct {
		plain
		DiscountBP int `json:"discount_bp"` // shadows the ledger's omitempty one
	}{plain(o), o.DiscountBP})
}

func overrideJSON(o ledger.Override) Override {
	v := Override{Override: o}
	if o.Custom != nil {
		in := ledger.PriceInputOf(*o.Custom)
		in.Model, in.EffectiveTo = "", nil
		v.Price = &in
	}
	return v
}

func (a *Admin) listOverrides(w http.ResponseWriter, r *http.Request) {
	os, err := a.store.Overrides(r.Context(), chi.URLParam(r, "id"))
	out := make([]Override, len(os))
	for i, o := range os {
		out[i] = overrideJSON(o)
	}
	a.respond(w, r, http.StatusOK, map[string]any{"data": out}, err)
}

// idempotencyKeyHeader is the request header that may carry the
// idempotency key of a create (a credit, an adjustment, a customer, a
// key) instead of the body's idempotency_key: the IETF httpapi draft's
// name, which Stripe and most payment APIs use. Given with the body's
// key, the two must be equal.
const idempotencyKeyHeader = "Idempotency-Key"

// idempotencyKey sets *body, the decoded body's idempotency_key, to r's
// Idempotency-Key header when it has one, and returns EInvalid when both
// are given and differ, or when the header is given empty.
func idempotencyKey(r *http.Request, body *string) error {
	vs := r.Header.Values(idempotencyKeyHeader)
	if len(vs) == 0 {
		return nil
	}
	h := strings.TrimSpace(vs[0])
	if h == "" { // a script's unset variable: taken for no key, each retry made another
		return &ledger.Error{Code: ledger.EInvalid, Message: idempotencyKeyHeader +
			": the header is empty; give a key, or leave the header out"}
	}
	if *body != "" && *body != h {
		return &ledger.Error{Code: ledger.EInvalid, Message: fmt.Sprintf(
			"%s: header %q and body idempotency_key %q differ; give one key", idempotencyKeyHeader, h, *body)}
	}
	*body = h
	return nil
}

// addEntry serves POST /customers/{id}/credits and /adjustments.
func (a *Admin) addEntry(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in ledger.EntryInput
		if err := decode(r, &in); err != nil {
			a.fail(w, r, err)
			return
		}
		// Ignored, the header let a client that retried a top-up with it
		// be credited twice.
		if err := idempotencyKey(r, &in.IdempotencyKey); err != nil {
			a.fail(w, r, err)
			return
		}
		e, err := a.store.AddEntry(r.Context(), chi.URLParam(r, "id"), kind, in)
		a.respond(w, r, http.StatusCreated, e, err)
	}
}

// listEntries serves GET /admin/v1/customers/{id}/entries?from=&to=&limit=
// &cursor=: one page of the entries that move the balance, the latest
// limit (1 to ledger.MaxEntryLimit; ledger.DefaultEntryLimit when not
// given) before cursor, oldest first, with the next_cursor of the entries
// before them (ledger.Store.EntriesPage). It listed every entry of the
// range in one answer: after a re-rate, 40,000 entries were 10.7 MB built
// in memory.
func (a *Admin) listEntries(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, to, err := optionalRange(r)
	limit := 0
	if l := q.Get("limit"); err == nil && l != "" { // limit= is no limit given, as from= is no from
		limit, err = intParam("limit", l, 1, ledger.MaxEntryLimit)
	}
	if err != nil {
		a.fail(w, r, err)
		return
	}
	page, err := a.store.EntriesPage(r.Context(), chi.URLParam(r, "id"), from, to, limit, q.Get("cursor"))
	a.respond(w, r, http.StatusOK, page, err)
}

type memoInput struct {
	Memo string `json:"memo"`
}

func (a *Admin) reverseEntry(w http.ResponseWriter, r *http.Request) {
	id, err := entryID(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	var in memoInput
	if err := decodeOptional(r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	e, err := a.store.Reverse(r.Context(), id, in.Memo)
	a.respond(w, r, http.StatusCreated, e, err)
}

func (a *Admin) refundEvent(w http.ResponseWriter, r *http.Request) {
	var in memoInput
	if err := decodeOptional(r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	e, err := a.store.RefundEvent(r.Context(), chi.URLParam(r, "id"), in.Memo)
	a.respond(w, r, http.StatusCreated, e, err)
}

func (a *Admin) getEvent(w http.ResponseWriter, r *http.Request) {
	e, err := a.store.Event(r.Context(), chi.URLParam(r, "id"))
	a.respond(w, r, http.StatusOK, e, err)
}

func (a *Admin) balance(w http.ResponseWriter, r *http.Request) {
	b, err := a.store.Balance(r.Context(), chi.URLParam(r, "id"))
	a.respond(w, r, http.StatusOK, b, err)
}
