package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestConsoleCreditResentAfterLostAnswer: a credit the API recorded but
// whose answer was lost (the console was told 503) is sent again from the
// page that says it failed, and credits once. The page gave the form a new
// idempotency key, so the second send was a second credit: 100 credited
// twice.
func TestConsoleCreditResentAfterLostAnswer(t *testing.T) {
	var lose atomic.Bool
	g := newRigWrapped(t, nil, func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/credits") && lose.CompareAndSwap(true, false) {
				next.ServeHTTP(httptest.NewRecorder(), r) // recorded, the answer lost
				http.Error(w, `{"error":{"code":"unavailable","message":"the connection was reset","type":"unavailable"}}`, http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		})
	})
	cu, _, _ := g.customer("acme", "sim-pro", 0)
	c := g.browser()
	g.signIn(c, "console", "token", adminToken)
	page := "/console/customers/" + cu.ID
	form := regexp.MustCompile(`(?s)<form method="post" action="` + regexp.QuoteMeta(page) + `/credits".*?</form>`)
	field := regexp.MustCompile(`name="([a-z_]+)" value="([^"]*)"`)
	// send sends the credit form of the page body as it shows it, amount typed in.
	send := func(body, amount string) {
		t.Helper()
		v := url.Values{}
		for _, m := range field.FindAllStringSubmatch(form.FindString(body), -1) {
			v.Set(m[1], m[2])
		}
		v.Set("amount", amount)
		g.do(c, "POST", page+"/credits", v)
	}
	_, body, _ := g.do(c, "GET", page, nil)
	lose.Store(true)
	send(body, "100")
	_, body, _ = g.do(c, "GET", page, nil)
	if !strings.Contains(body, "the connection was reset") {
		t.Fatalf("the page does not say the credit failed")
	}
	send(body, "100") // again, from the page that says it failed
	es, err := g.api.Entries(context.Background(), cu.ID, time.Time{}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 {
		t.Errorf("a credit of 100 sent again after its answer was lost is %d entries; want 1: %+v", len(es), es)
	}
}
