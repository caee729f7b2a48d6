package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// TestIssueFormSentTwiceIssuesOneKey: the issue form sent twice (a double
// click, the browser's resend), at once or one after the other, issues
// one key, and both sendings show its secret; the form shown again (a new
// form_id) issues another. Each sending issued a live key, the operator
// seeing the secret of the second only (a review).
func TestIssueFormSentTwiceIssuesOneKey(t *testing.T) {
	g := newRig(t)
	cust, _, _ := g.customer("twice-co", "m1", 0)
	c := g.browser()
	csrf := g.signIn(c, "console", "token", adminToken)
	formID := func() string {
		_, body, _ := g.do(c, "GET", "/console/keys?customer="+cust.ID, nil)
		id := between(body, `name="form_id" value="`, `"`)
		if id == "" {
			t.Fatalf("the keys page's issue form has no form_id:\n%s", body)
		}
		return id
	}
	keys := func() int {
		ks, err := g.api.Keys(context.Background(), cust.ID)
		if err != nil {
			t.Fatal(err)
		}
		return len(ks)
	}
	issue := func(id string) string {
		status, body, h := g.do(c, "POST", "/console/customers/"+cust.ID+"/keys", url.Values{"csrf": {csrf}, "name": {"web"}, "form_id": {id}})
		if status != http.StatusSeeOther || h.Get("Location") != "/console/keys/issued?customer="+cust.ID {
			t.Fatalf("issue = %d %s (to %q), want 303 to the issued page", status, body, h.Get("Location"))
		}
		_, body, _ = g.do(c, "GET", h.Get("Location"), nil)
		return between(body, `aria-label="The new key's secret">`, "<")
	}

	id := formID()
	first := issue(id)
	if again := issue(id); first == "" || again != first {
		t.Errorf("the form sent again showed the secret %q, the first sending %q: want the same key's", again, first)
	}
	if n := keys(); n != 2 { // the rig's own key, and the form's
		t.Errorf("after one form sent twice the customer has %d keys, want 2", n)
	}

	// Two sendings at once: the second waits for the first's key.
	id = formID()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			status, _, h := g.do(c, "POST", "/console/customers/"+cust.ID+"/keys", url.Values{"csrf": {csrf}, "name": {"web"}, "form_id": {id}})
			if status != http.StatusSeeOther || h.Get("Location") != "/console/keys/issued?customer="+cust.ID {
				t.Errorf("issue at once = %d (to %q)", status, h.Get("Location"))
			}
		})
	}
	wg.Wait()
	if n := keys(); n != 3 {
		t.Errorf("after a new form sent twice at once the customer has %d keys, want 3", n)
	}
	if _, body, _ := g.do(c, "GET", "/console/keys/issued", nil); !strings.Contains(body, `id="secret"`) {
		t.Errorf("after the form sent twice at once, the issued page shows no secret:\n%s", body)
	}
}

// TestIssueFormIDSentToAnotherCustomer: an issue form's form_id sent again
// to another customer's address issues nothing there and does not show
// the first customer's key as that customer's: the page says the form
// already issued a key for another customer. A mutation audit: dropping
// that check (the first customer's secret shown under the second's
// address) passed every test.
func TestIssueFormIDSentToAnotherCustomer(t *testing.T) {
	g := newRig(t)
	a, _, _ := g.customer("first-co", "m1", 0)
	b, _, _ := g.customer("second-co", "m1", 0)
	c := g.browser()
	csrf := g.signIn(c, "console", "token", adminToken)
	_, body, _ := g.do(c, "GET", "/console/keys?customer="+a.ID, nil)
	id := between(body, `name="form_id" value="`, `"`)
	for _, cu := range []string{a.ID, b.ID} {
		g.do(c, "POST", "/console/customers/"+cu+"/keys", url.Values{"csrf": {csrf}, "name": {"web"}, "form_id": {id}})
	}
	_, body, _ = g.do(c, "GET", "/console/keys?customer="+b.ID, nil)
	if !strings.Contains(body, "that form already issued a key for another customer") {
		t.Errorf("the form_id sent to another customer: the keys page does not say it already issued a key for another customer")
	}
	if ks, err := g.api.Keys(context.Background(), b.ID); err != nil || len(ks) != 1 {
		t.Errorf("the second customer has %d keys (%v), want its own 1", len(ks), err)
	}
}
