package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// BenchmarkLimitedBatch: the meter's batch of 5,000 events over 2,000 keys
// of 200 customers, the keys with a daily limit and the customers with a
// credit limit (limited=true: key spend, the marks that publish states),
// against the same keys and customers without (limited=false), in the
// same run. One op is one batch.
func BenchmarkLimitedBatch(b *testing.B) {
	for _, limited := range []bool{false, true} {
		b.Run(map[bool]string{false: "limited=false", true: "limited=true"}[limited], func(b *testing.B) {
			ctx := context.Background()
			s := ledgertest.NewStore(b)
			now := time.Now().UTC()
			if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "0",
				EffectiveFrom: now.AddDate(0, -2, 0)}); err != nil {
				b.Fatal(err)
			}
			var cin ledger.CustomerInput
			var kin ledger.KeyInput
			if limited {
				cin.CreditLimit, kin.DailyLimit = new("1000000"), new("1000000")
			}
			type account struct{ customer, key string }
			var accounts []account
			for range 200 {
				cin.Name = "c"
				c, err := s.CreateCustomer(ctx, cin)
				if err != nil {
					b.Fatal(err)
				}
				for range 10 {
					kin.Name = "k"
					k, _, err := s.CreateKey(ctx, c.ID, kin)
					if err != nil {
						b.Fatal(err)
					}
					accounts = append(accounts, account{c.ID, k.ID})
				}
			}
			i := 0
			for b.Loop() {
				evs := make([]usage.Event, 5000)
				for j := range evs {
					a := accounts[i%len(accounts)]
					i++
					evs[j] = newEvent(a.customer, a.key, "m", now, usage.Tokens{PromptTokens: 1000})
				}
				if _, err := s.WriteEvents(ctx, evs); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
