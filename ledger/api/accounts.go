package api

import (
	"net/http"
	"strconv"

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

// overrideView is an override as the API shows it.
type overrideView struct {
	ledger.Override
	Price *ledger.PriceInput `json:"price,omitempty"`
}

func overrideJSON(o ledger.Override) overrideView {
	v := overrideView{Override: o}
	if o.Custom != nil {
		in := o.Custom.Input()
		in.Model, in.EffectiveTo = "", nil
		v.Price = &in
	}
	return v
}

func (a *Admin) listOverrides(w http.ResponseWriter, r *http.Request) {
	os, err := a.store.Overrides(r.Context(), chi.URLParam(r, "id"))
	out := make([]overrideView, len(os))
	for i, o := range os {
		out[i] = overrideJSON(o)
	}
	a.respond(w, r, http.StatusOK, map[string]any{"data": out}, err)
}

// addEntry serves POST /customers/{id}/credits and /adjustments.
func (a *Admin) addEntry(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in ledger.EntryInput
		if err := decode(r, &in); err != nil {
			a.fail(w, r, err)
			return
		}
		e, err := a.store.AddEntry(r.Context(), chi.URLParam(r, "id"), kind, in)
		a.respond(w, r, http.StatusCreated, e, err)
	}
}

func (a *Admin) listEntries(w http.ResponseWriter, r *http.Request) {
	from, err := parseTime("from", r.URL.Query().Get("from"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	to, err := parseTime("to", r.URL.Query().Get("to"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	es, err := a.store.Entries(r.Context(), chi.URLParam(r, "id"), from, to)
	a.respond(w, r, http.StatusOK, map[string]any{"data": es}, err)
}

type memoInput struct {
	Memo string `json:"memo"`
}

func (a *Admin) reverseEntry(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)
	if err != nil {
		a.fail(w, r, &ledger.Error{Code: ledger.ENotFound, Message: "entry " + chi.URLParam(r, "id") + " not found"})
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

func (a *Admin) rerate(w http.ResponseWriter, r *http.Request) {
	var in struct {
		From string `json:"from"`
		To   string `json:"to"`
	}
	if err := decode(r, &in); err != nil {
		a.fail(w, r, err)
		return
	}
	from, err := parseTime("from", in.From)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	to, err := parseTime("to", in.To)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	res, err := a.store.Rerate(r.Context(), from, to, nil)
	a.respond(w, r, http.StatusOK, res, err)
}
