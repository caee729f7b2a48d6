package ledger_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestBalanceIsInTheCustomersCurrencyAlone: a customer whose usage was
// priced in another currency (a model priced in EUR for a USD customer)
// has those charges in a balance row of that currency; Balance, the
// customer's prepaid position in its own currency, does not add euros to
// dollars.
func TestBalanceIsInTheCustomersCurrencyAlone(t *testing.T) {
	b := newBilling(t, nil)
	b.price("m", "EUR", "1", "0", "")
	b.write(b.event("m", jan.AddDate(0, 0, 1), usage.Tokens{PromptTokens: 1_000_000})) // 1 EUR
	if _, err := b.s.AddEntry(b.ctx, b.c.ID, ledger.KindCredit, ledger.EntryInput{Amount: "5"}); err != nil {
		t.Fatal(err)
	}
	bal, err := b.s.Balance(b.ctx, b.c.ID)
	if err != nil || bal.Currency != b.c.Currency || bal.Currency == "EUR" || bal.Balance != "5" || bal.Charges != "0" || bal.Credits != "5" {
		t.Fatalf("balance = %+v, %v; want 5 %s credited and nothing charged in it", bal, err, b.c.Currency)
	}
}
