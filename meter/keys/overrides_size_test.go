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

// TestManyOverridesDoNotStopKeySync: a customer's overrides are published
// in its state, one NATS message, and overrides are append-only. An API
// review gave a customer 700 overrides of 256-byte model names (as a
// nightly job changing a discount would, in time): its state passed NATS'
// max_payload, and the syncer retried it forever, with no way to remove
// them; no key change after it reached the gateways. The state carries
// the overrides that can still apply (not those ended or replaced by a
// later one), and a new override that would make those too big is
// refused.
func TestManyOverridesDoNotStopKeySync(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	sync := r.syncer()
	gw := r.cache(nil)
	c, err := r.store.CreateCustomer(ctx, ledger.CustomerInput{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	model := func(i int) string {
		id := fmt.Sprint(i)
		return strings.Repeat("<", 256-len(id)) + id
	}
	// 700 discounts of one model, each replacing the one before.
	start := time.Now().Add(-30 * 24 * time.Hour).Truncate(time.Second)
	for i := range 700 {
		if _, err := r.store.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: model(0),
			DiscountPercent: fmt.Sprint(i % 100), EffectiveFrom: start.Add(time.Duration(i) * time.Minute)}); err != nil {
			t.Fatalf("override %d: %v", i, err)
		}
	}
	// Discounts of other models to come, until refused.
	refused := false
	for i := 1; i <= 700 && !refused; i++ {
		_, err := r.store.CreateOverride(ctx, c.ID, ledger.OverrideInput{Model: model(i), DiscountPercent: "5",
			EffectiveFrom: time.Now().Add(time.Hour)})
		if le := (*ledger.Error)(nil); errors.As(err, &le) && le.Code == ledger.EInvalid && strings.Contains(le.Message, "overrides") {
			refused = true
		} else if err != nil {
			t.Fatalf("override of model %d: %v", i, err)
		}
	}
	if !refused {
		t.Errorf("700 overrides to come of 256-byte models were all taken; want one refused before the state passes max_payload")
	}
	k, secret, err := r.store.CreateKey(ctx, c.ID, ledger.KeyInput{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sync.Wait(wctx, k.Change); err != nil {
		t.Fatalf("the changes after many overrides are not published: %v", err)
	}
	if _, err := r.store.RevokeKey(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the revocation on the gateway", func() bool {
		_, ok := gw.LookupKey(secret)
		return !ok
	})
}
