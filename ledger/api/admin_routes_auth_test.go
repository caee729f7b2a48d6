package api_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
)

// TestEveryAdminRouteNeedsTheToken walks every route the admin API
// serves: each but /healthz and the API's description answers 401
// with a wrong admin token (401, or 429 once the wrong guesses pass
// GuessBurst). A mutation audit: an
// admin route (GET /admin/v1/export) registered outside the group that
// authenticates served every customer's usage to anyone and passed every
// test; the tests named the routes they checked, so a new route missing
// the middleware went unnoticed.
func TestEveryAdminRouteNeedsTheToken(t *testing.T) {
	t.Parallel()
	store := ledgertest.NewStore(t)
	adm := newAdmin(t, store)
	h := adm.Handler()
	routes, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("the admin handler is a %T, not a chi router: walk its routes some other way", h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	const id = "0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff"
	n := 0
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if route == "/healthz" || route == "/admin/v1/openapi.json" || method == http.MethodHead {
			return nil
		}
		path := strings.NewReplacer("{id}", id, "{period}", "2026-01").Replace(route)
		// 429 once the wrong tokens from this address pass GuessBurst:
		// refused too.
		status, body, err := send(method, srv.URL+path, "wrong-"+adminToken, "{}")
		if err != nil || (status != http.StatusUnauthorized && status != http.StatusTooManyRequests) {
			t.Errorf("%s %s with a wrong token = %d %s %v; want 401 (or 429)", method, path, status, body, err)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 25 {
		t.Errorf("walked %d admin routes; the handler serves more: is the walk finding them?", n)
	}
}
