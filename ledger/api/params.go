package api

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/ledger"
)

// validID is middleware for a route with an {id} that is a UUID: it
// refuses any other id with EInvalid naming what the id identifies
// (`customer id "nope" is not valid: not a UUID`) before any query.
func (a *Admin) validID(what string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := chi.URLParam(r, "id")
			if _, err := uuid.Parse(id); err != nil || len(id) != 36 {
				a.fail(w, r, &ledger.Error{Code: ledger.EInvalid, Message: fmt.Sprintf("%s id %q is not valid: not a UUID", what, id)})
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// entryID reads the {id} of an entry: a positive integer, else EInvalid.
func entryID(r *http.Request) (int64, error) {
	s := chi.URLParam(r, "id")
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, &ledger.Error{Code: ledger.EInvalid, Message: fmt.Sprintf("entry id %q is not valid: not a positive integer", s)}
	}
	return id, nil
}

// intParam parses a query parameter that must be a base-10 integer in
// [lo, hi], or returns EInvalid naming it.
func intParam(field, s string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, &ledger.Error{Code: ledger.EInvalid, Message: fmt.Sprintf("%s: %q is not an integer from %d to %d", field, s, lo, hi)}
	}
	return n, nil
}

// optionalRange reads the optional from and to query parameters; when both
// are given, from must be before to.
func optionalRange(r *http.Request) (from, to time.Time, err error) {
	q := r.URL.Query()
	if from, err = parseTime("from", q.Get("from")); err != nil {
		return
	}
	if to, err = parseTime("to", q.Get("to")); err != nil {
		return
	}
	if to.IsZero() && q.Get("to") != "" { // Go's zero time, which reads below as no end at all
		return from, to, &ledger.Error{Code: ledger.EInvalid,
			Message: fmt.Sprintf("to: %q is the first instant of the year 0001: nothing is before it (leave to out for no end)", q.Get("to"))}
	}
	if !from.IsZero() && !to.IsZero() && !from.Before(to) {
		err = &ledger.Error{Code: ledger.EInvalid, Message: fmt.Sprintf("from (%s) must be before to (%s)", q.Get("from"), q.Get("to"))}
	}
	return
}

// requiredRange is optionalRange with both bounds required: from and to
// name the fields (query parameters or body fields).
func requiredRange(fromText, toText string) (from, to time.Time, err error) {
	for _, f := range [][2]string{{"from", fromText}, {"to", toText}} {
		if f[1] == "" {
			return from, to, &ledger.Error{Code: ledger.EInvalid, Message: f[0] + " is required (RFC 3339 or YYYY-MM-DD)"}
		}
	}
	if from, err = parseTime("from", fromText); err != nil {
		return
	}
	if to, err = parseTime("to", toText); err != nil {
		return
	}
	if !from.Before(to) {
		err = &ledger.Error{Code: ledger.EInvalid, Message: fmt.Sprintf("from (%s) must be before to (%s)", fromText, toText)}
	}
	return
}
