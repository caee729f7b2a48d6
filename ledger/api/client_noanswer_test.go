package api_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
)

// TestClientNoAnswerAfterTheRequest: the admin process dies (kill -9, an
// OOM) after it took a credit and committed it, before it answered. The
// client got no answer, and said "cannot reach the admin API" (the CLI's
// exit code 7, "no answer from the admin API"), as for a server that
// never saw the request: the operator, told nothing was done, sends the
// credit again and, without an idempotency key, credits it twice. A
// request that was sent and got no answer is an error saying
// that it may have been done, to look before sending it again; one that
// could not be sent is still unreachable.
func TestClientNoAnswerAfterTheRequest(t *testing.T) {
	t.Parallel()
	store := ledgertest.NewStore(t)
	adm := newAdmin(t, store)
	h := adm.Handler()
	// The process "dies" after its handler ran: the connection is closed
	// with no answer written.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close()
	}))
	t.Cleanup(srv.Close)
	c, ctx := api.NewClient(srv.URL, adminToken, nil), context.Background()
	cust, err := c.CreateCustomer(ctx, ledger.CustomerInput{Name: "a"})
	if err == nil {
		t.Fatal("CreateCustomer answered, want no answer")
	}
	cs, err := c.Customers(ctx, "")
	if err != nil || len(cs) != 1 {
		t.Fatalf("customers %+v, %v; want the one made", cs, err)
	}
	cust = cs[0]

	_, err = c.AddEntry(ctx, cust.ID, ledger.KindCredit, ledger.EntryInput{Amount: "10", Memo: "top-up"})
	var ue *api.UnreachableError
	if err == nil || errors.As(err, &ue) {
		t.Fatalf("a credit sent and not answered: %v (%T); want an error saying it may have been done, not unreachable", err, err)
	}
	for _, want := range []string{"POST /admin/v1/customers/" + cust.ID + "/credits", "no answer", "may have been done"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if bal, err := c.Balance(ctx, cust.ID); err != nil || bal.Credits != "10" {
		t.Fatalf("balance %+v, %v; want the credit applied (which is why the error must not say unreachable)", bal, err)
	}

	// Nothing listening: unreachable, as before.
	srv.Close()
	if _, err := c.AddEntry(ctx, cust.ID, ledger.KindCredit, ledger.EntryInput{Amount: "10"}); !errors.As(err, &ue) {
		t.Fatalf("a credit to a closed port: %v (%T); want an *api.UnreachableError", err, err)
	}
}

// TestNoAnswerNamesTheCreatesSafeToRetry: a customer's or a key's create
// that got no answer is the case their idempotency key is for (migration
// 15), but the error listed only credits and adjustments as safe to send
// again with one, and told the operator to look first.
func TestNoAnswerNamesTheCreatesSafeToRetry(t *testing.T) {
	t.Parallel()
	msg := (&api.NoAnswerError{URL: "http://127.0.0.1:8081", Method: "POST", Path: "/admin/v1/customers", Err: errors.New("EOF")}).Error()
	for _, want := range []string{"a customer", "a key", "same idempotency key"} {
		if !strings.Contains(strings.TrimPrefix(msg, "POST /admin/v1/customers"), want) {
			t.Errorf("error %q does not name %q among the requests safe to send again", msg, want)
		}
	}
}
