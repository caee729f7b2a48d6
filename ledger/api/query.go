package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate-dev/tollgate/ledger"
)

// queryParams are the query parameters of each operation openapi.json
// describes, by "METHOD /path/{param}" (chi's patterns are the document's).
var queryParams = sync.OnceValue(func() map[string][]string {
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Parameters map[string]param `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(openAPIDocument, &doc); err != nil {
		panic("openapi.json: " + err.Error()) // embedded, and tested
	}
	ops := map[string][]string{}
	for path, item := range doc.Paths {
		for method, raw := range item {
			var op struct {
				Parameters []param `json:"parameters"`
			}
			if method == "parameters" || json.Unmarshal(raw, &op) != nil {
				continue
			}
			names := []string{}
			for _, p := range op.Parameters {
				if p.Ref != "" {
					p = doc.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
				}
				if p.In == "query" {
					names = append(names, p.Name)
				}
			}
			ops[strings.ToUpper(method)+" "+path] = names
		}
	}
	return ops
})

// param is an OpenAPI parameter object, or a reference to one.
type param struct {
	Ref  string `json:"$ref"`
	Name string `json:"name"`
	In   string `json:"in"`
}

// checkQuery refuses (400, ledger.EInvalid) a request whose query has a
// parameter its operation does not take, or one parameter given twice.
// Either was ignored: a typo (?form=2026-01-01) answered a finance
// question for all time instead of the period asked, and ?from=a&from=b
// for whichever came first. The parameters are openapi.json's for op
// ("GET /v1/usage"), and extra; checkQuery panics at set-up for an op the
// document does not describe.
func checkQuery(op string, extra ...string) func(http.Handler) http.Handler {
	allowed, ok := queryParams()[op]
	if !ok {
		panic("api: " + op + " is not in openapi.json")
	}
	allowed = append(slices.Clone(allowed), extra...)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := queryError(r, allowed); err != nil {
				writeError(w, err.Code, err.Message)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// MaxQueryParams is the most parameters (pairs between '&') a query
// string may have: net/url's own bound, past which url.Values drops the
// whole query.
const MaxQueryParams = 10000

// QueryStringError is the error (*ledger.Error, code EInvalid) of a query
// string (a URL's RawQuery) that does not parse whole, or nil when it
// does: "too many query parameters" past MaxQueryParams, "malformed query
// string: ..." for a bad %-escape or a ';'. url.Values drops what does not
// parse without a word (a bad pair, or every pair past the bound), and a
// handler reading the rest ran unfiltered: ?to=2026-11-02% answered from
// the start date on, for ever. Every route that reads a query checks this
// first.
func QueryStringError(rawQuery string) error {
	if e := queryStringError(rawQuery); e != nil {
		return e
	}
	return nil
}

func queryStringError(rawQuery string) *ledger.Error {
	if rawQuery == "" {
		return nil
	}
	if n := strings.Count(rawQuery, "&") + 1; n > MaxQueryParams {
		return &ledger.Error{Code: ledger.EInvalid, Message: fmt.Sprintf("too many query parameters: %d, at most %d", n, MaxQueryParams)}
	}
	if _, err := url.ParseQuery(rawQuery); err != nil {
		return &ledger.Error{Code: ledger.EInvalid, Message: "malformed query string: " + err.Error()}
	}
	return nil
}

// checkQueryString refuses (400, ledger.EInvalid) a request whose query
// string does not parse whole (QueryStringError), before anything reads a
// parameter of it (the customer API's key, say).
func checkQueryString(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := queryStringError(r.URL.RawQuery); err != nil {
			writeError(w, err.Code, err.Message)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// queryError is the error of r's query against the allowed names, or nil:
// a query that does not parse whole is one.
func queryError(r *http.Request, allowed []string) *ledger.Error {
	if r.URL.RawQuery == "" {
		return nil
	}
	if err := queryStringError(r.URL.RawQuery); err != nil {
		return err
	}
	for name, vs := range r.URL.Query() {
		switch {
		case !slices.Contains(allowed, name):
			takes := "none"
			if len(allowed) > 0 {
				takes = strings.Join(allowed, ", ")
			}
			return &ledger.Error{Code: ledger.EInvalid, Message: fmt.Sprintf("%s: not a query parameter of %s %s (it takes %s)", name, r.Method, r.URL.Path, takes)}
		case len(vs) > 1:
			return &ledger.Error{Code: ledger.EInvalid, Message: fmt.Sprintf("%s: given %d times in the query; give it once", name, len(vs))}
		}
	}
	return nil
}

// checkRoutedQuery is checkQuery for every operation of router, found by
// routing the request (the admin API's routes are registered without it):
// a path router does not route, or that openapi.json does not describe,
// is checked only for a query string that does not parse whole.
func checkRoutedQuery(router chi.Routes, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := queryStringError(r.URL.RawQuery); err != nil {
			writeError(w, err.Code, err.Message)
			return
		}
		if r.URL.RawQuery != "" {
			rctx := chi.NewRouteContext()
			if router.Match(rctx, r.Method, r.URL.Path) {
				if allowed, ok := queryParams()[r.Method+" "+rctx.RoutePattern()]; ok {
					if err := queryError(r, allowed); err != nil {
						writeError(w, err.Code, err.Message)
						return
					}
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}
