package keys_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestOlderSyncersCustomerStateKeepsCreditLimit: during a rolling upgrade
// a syncer of the release before publishes a changed customer's state in
// its shape, without credit_limited (a budget flip, an override: any
// change; its version is newer). A gateway must go on holding the
// customer's keys SpendLimited (the currency rule), as it does for a key
// state in the old shape (Cache.LookupKey reads those again from the
// ledger). (Found by a review: the old-shape customer state cleared the
// credit limit, and the customer's keys were served models priced in
// another currency.)
func TestOlderSyncersCustomerStateKeepsCreditLimit(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.syncer()
	g := r.cache(r.store) // a gateway's cache, the ledger its loader
	c, err := r.store.CreateCustomer(ctx, ledger.CustomerInput{Name: "acme", Currency: "EUR", CreditLimit: new("100")})
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := r.store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the key, spend limited by its customer's credit limit", func() bool {
		s, ok := g.LookupKey(secret)
		return ok && s.SpendLimited && s.Currency == "EUR"
	})

	// A syncer of the release before publishes the customer's state (say
	// after a top-up): its CustomerState has no CreditLimited.
	b, err := r.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	old := `{"currency":"EUR","version":` + strconv.FormatInt(time.Now().UnixNano(), 10) + `}` // the older shape
	if _, err := b.Customers.Put(ctx, c.ID, []byte(old)); err != nil {
		t.Fatal(err)
	}
	if err := g.CatchUp(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if s, ok := g.LookupKey(secret); !ok || !s.SpendLimited {
		t.Fatalf("after an older syncer's customer state, the key of a customer with a credit limit is %+v (ok=%v): not SpendLimited, so the currency rule no longer holds it", s, ok)
	}
}
