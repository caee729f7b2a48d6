package ledger

import (
	"context"

	"github.com/shopspring/decimal"
)

// Balance is a customer's prepaid position in its currency, as decimal
// strings: Balance = Credits − Charges, where Credits sums credits, refunds
// and adjustments in the customer's favour, and Charges sums usage charges
// (after discounts and re-rating) and adjustments against it. Available is
// Balance + CreditLimit, or nil without a credit limit (no budget).
//
// Balance reconciles with the entries Store.Entries lists (all of them,
// rerate entries included) and the events, in the customer's currency:
// Balance = Σ amount(entries) − Σ charge(events, as first rated).
type Balance struct {
	CustomerID  string  `json:"customer_id"`
	Currency    string  `json:"currency"`
	Balance     string  `json:"balance"`
	Credits     string  `json:"credits"`
	Charges     string  `json:"charges"`
	CreditLimit *string `json:"credit_limit"`
	Available   *string `json:"available"`
}

// Balance returns a customer's balance in its currency, from the running
// totals kept with every batch and entry. It returns ENotFound.
func (s *Store) Balance(ctx context.Context, customerID string) (Balance, error) {
	c, err := s.Customer(ctx, customerID)
	if err != nil {
		return Balance{}, err
	}
	var credits, charges string
	err = s.pool.QueryRow(ctx, `
		SELECT coalesce(sum(credits_e12), 0)::text, coalesce(sum(charges_e12), 0)::text
		FROM customer_balances WHERE customer_id = $1 AND currency = $2`, c.ID, c.Currency).Scan(&credits, &charges)
	if err != nil {
		return Balance{}, dbError(err, "balance")
	}
	cr, _ := decimal.NewFromString(credits)
	ch, _ := decimal.NewFromString(charges)
	b := Balance{CustomerID: c.ID, Currency: c.Currency, CreditLimit: c.CreditLimit,
		Balance: cr.Sub(ch).Shift(-12).String(), Credits: cr.Shift(-12).String(), Charges: ch.Shift(-12).String()}
	if c.CreditLimit != nil {
		limit, _ := decimal.NewFromString(*c.CreditLimit)
		a := cr.Sub(ch).Shift(-12).Add(limit).String()
		b.Available = &a
	}
	return b, nil
}
