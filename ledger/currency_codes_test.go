package ledger_test

import (
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestCurrentISO4217CodesUnknownToXText: the Mauritanian ouguiya (MRU,
// since 2018) and the Caribbean guilder (XCG, since 2025) are current ISO
// 4217 codes of 2 decimals that golang.org/x/text/currency does not know:
// customers and prices in them were refused as "not a known ISO 4217
// code" (found by a finance review).
func TestCurrentISO4217CodesUnknownToXText(t *testing.T) {
	b := newBilling(t, nil)
	for _, code := range []string{"MRU", "XCG"} {
		if got, _ := ledger.MinorUnit(code); got != 2 {
			t.Errorf("MinorUnit(%s) = %d, ISO 4217 minor unit is 2", code, got)
		}
		c, err := b.s.CreateCustomer(b.ctx, ledger.CustomerInput{Name: "in " + code, Currency: code})
		if err != nil {
			t.Errorf("a customer billed in %s: %v", code, err)
			continue
		}
		b.c = c
		if b.k, _, err = b.s.CreateKey(b.ctx, c.ID, ledger.KeyInput{Name: "k"}); err != nil {
			t.Fatal(err)
		}
		model := "model-" + code
		b.price(model, code, "0", "0", "0.125")
		b.write(b.event(model, jan.Add(time.Hour), usage.Tokens{}))
		st := b.statement("2026-01")
		if len(st.Sections) != 1 || st.Sections[0].Currency != code || st.Sections[0].Total != "0.12" {
			t.Errorf("%s statement: %+v; want total 0.12 at ISO 4217's 2 decimals", code, st.Sections)
		}
	}
}
