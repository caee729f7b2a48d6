package keys_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// TestManyPriceVersionsDoNotStopKeySync: a model's price versions are
// published together, one NATS message, and price versions are never
// removed. An API review gave a model of a 256-byte name 700 versions (a
// daily price update would, in two years): the state passed NATS'
// max_payload, and the syncer retried it forever; no key change after it
// reached the gateways. The state carries the versions that can still
// apply (not those ended or replaced by a later one), and a new version
// that would make those too big is refused.
func TestManyPriceVersionsDoNotStopKeySync(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sync := r.syncer()
	gw := r.cache(nil)
	model := strings.Repeat("<", 256)
	start := time.Now().Add(-30 * 24 * time.Hour).Truncate(time.Second)
	price := func(from time.Time, to *time.Time, input int) ledger.PriceInput {
		return ledger.PriceInput{Model: model, Currency: "USD", Input: fmt.Sprint(input), Output: "1", EffectiveFrom: from, EffectiveTo: to}
	}
	for i := range 700 {
		if _, err := r.store.CreatePrice(ctx, price(start.Add(time.Duration(i)*time.Minute), nil, i)); err != nil {
			t.Fatalf("price version %d: %v", i, err)
		}
	}
	refused := false // promotions to come, until refused
	for i := 1; i <= 700 && !refused; i++ {
		from := time.Now().Add(time.Duration(i) * time.Hour).Truncate(time.Second)
		to := from.Add(time.Minute)
		_, err := r.store.CreatePrice(ctx, price(from, &to, i))
		if le := (*ledger.Error)(nil); errors.As(err, &le) && le.Code == ledger.EInvalid && strings.Contains(le.Message, "price versions") {
			refused = true
		} else if err != nil {
			t.Fatalf("promotion %d: %v", i, err)
		}
	}
	if !refused {
		t.Errorf("700 promotions to come of a 256-byte model were all taken; want one refused before its state passes max_payload")
	}
	c, err := r.store.CreateCustomer(ctx, ledger.CustomerInput{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	k, secret, err := r.store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sync.Wait(wctx, k.Change); err != nil {
		t.Fatalf("the changes after many price versions are not published: %v", err)
	}
	if _, err := r.store.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the revocation on the gateway", func() bool {
		_, ok := gw.LookupKey(secret)
		return !ok
	})
}
