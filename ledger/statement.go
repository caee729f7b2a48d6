package ledger

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"
	"golang.org/x/text/currency"
)

// Statement is a customer's bill for one UTC calendar month, read from the
// hourly rollups and the ledger entries, never from raw events. Amounts are
// decimal strings in each section's currency.
//
// Rounding rule: every line is exact (1e-12 units and the four decimals of
// a discount, nothing dropped). Each section's exact total, the sum of its
// lines, is rounded once, half to even (banker's rounding), to the
// currency's minor unit from ISO 4217 (see MinorUnit: USD 2 decimals,
// JPY 0, KWD 3, IQD 3, IDR 2; a code it does not know: 2), and a "rounding"
// line of rounded − exact (never more than half a minor unit either way)
// closes the section, so that its lines sum exactly to Total.
type Statement struct {
	CustomerID   string    `json:"customer_id"`
	CustomerName string    `json:"customer_name"`
	Period       string    `json:"period"` // "2026-01"
	From         time.Time `json:"from"`   // the month's first instant, UTC
	To           time.Time `json:"to"`     // the next month's first instant (exclusive)
	// Sections holds one section per currency with charges, entries or a
	// balance, ordered by currency code.
	Sections []StatementSection `json:"sections"`
	// Unpriced is usage in the period with no price in force (Amount "0"),
	// listed for follow-up (add a price, then re-rate); it is not billed.
	Unpriced []StatementLine `json:"unpriced"`
}

// StatementSection is the statement in one currency.
type StatementSection struct {
	Currency string `json:"currency"`
	// MinorUnit is the number of decimals Total is rounded to.
	MinorUnit int `json:"minor_unit"`
	// Lines are the charges: one "usage" line per model (after discounts
	// and re-rating), one "adjustment" or "refund" line per entry (Amount =
	// −entry amount: an entry in the customer's favour reduces what is
	// owed), then the "rounding" line. They sum exactly to Total.
	Lines []StatementLine `json:"lines"`
	// ExactTotal is the sum of the lines before rounding; Total is it
	// rounded (see Statement), with exactly MinorUnit decimals.
	ExactTotal string `json:"exact_total"`
	Total      string `json:"total"`
	// Payments are credits (top-ups) effective in the period and
	// reversals of credits ("credit_reversal", negative): not charges.
	Payments []StatementLine `json:"payments"`
	// The account, exact: ClosingBalance = OpeningBalance + Credits −
	// Charges, where Credits sums Payments and Charges is ExactTotal.
	// A positive balance is in the customer's favour.
	OpeningBalance string `json:"opening_balance"`
	Credits        string `json:"credits"`
	Charges        string `json:"charges"`
	ClosingBalance string `json:"closing_balance"`
}

// StatementLine is one line of a statement: usage of a model (Model and
// Usage set), or a ledger entry (EntryID, EffectiveAt, Memo set), or the
// rounding. Amount is an exact decimal string in the section's currency.
type StatementLine struct {
	Kind        string     `json:"kind"`
	Model       string     `json:"model,omitempty"`
	Usage       *LineUsage `json:"usage,omitempty"`
	EntryID     int64      `json:"entry_id,omitempty"`
	EventID     string     `json:"event_id,omitempty"`
	EffectiveAt *time.Time `json:"effective_at,omitempty"`
	Memo        string     `json:"memo,omitempty"`
	Amount      string     `json:"amount"`
}

// LineUsage is a usage line's request and token counts (tokens by class,
// as in usage.Tokens: prompt includes cached and cache-write tokens,
// completion includes reasoning tokens).
type LineUsage struct {
	Requests          int64 `json:"requests"`
	PromptTokens      int64 `json:"prompt_tokens"`
	CachedTokens      int64 `json:"cached_tokens"`
	CacheWriteTokens  int64 `json:"cache_write_tokens"`
	CompletionTokens  int64 `json:"completion_tokens"`
	ReasoningTokens   int64 `json:"reasoning_tokens"`
	WebSearchRequests int64 `json:"web_search_requests"`
}

// Statement line and payment kinds besides the entry kinds.
const (
	KindUsage          = "usage"           // a model's charges in the period
	KindRounding       = "rounding"        // rounded total − exact total
	KindCreditReversal = "credit_reversal" // a refund entry reversing a credit: a negative payment
)

// MinorUnit returns the decimals of currency code's minor unit and the
// rounding increment in minor units (1 for nearly all), by ISO 4217: from
// isoMinorUnit where golang.org/x/text/currency's standard rounding (CLDR's
// digits, not ISO's) differs, else from x/text; a code unknown to both gets
// 2 and 1.
func MinorUnit(code string) (scale, increment int) {
	if d, ok := isoMinorUnit[strings.ToUpper(code)]; ok {
		return d, 1
	}
	u, err := currency.ParseISO(code)
	if err != nil {
		return 2, 1
	}
	return currency.Standard.Rounding(u)
}

// isoMinorUnit is ISO 4217's minor unit for the current codes where
// golang.org/x/text/currency's standard rounding disagrees with it (x/text
// follows CLDR, which gives 0 decimals to currencies whose minor unit is
// not used in practice, and does not know UYW). Source: ISO 4217 "List
// one: current currency & funds code list", published by SIX Financial
// Information (the ISO 4217 maintenance agency), column "Minor unit".
var isoMinorUnit = map[string]int{
	// Iraqi Dinar: x/text 0.
	"IQD": 3,
	// x/text 0.
	"AFN": 2, "ALL": 2, "AMD": 2, "COP": 2, "GYD": 2, "IDR": 2, "IRR": 2,
	"KPW": 2, "LAK": 2, "LBP": 2, "MGA": 2, "MMK": 2, "MNT": 2, "MUR": 2,
	"PKR": 2, "RSD": 2, "SOS": 2, "SYP": 2, "TZS": 2, "UZS": 2, "YER": 2,
	// Leone (old, Sierra Leone): x/text 0.
	"SLL": 2,
	// Unidad Previsional (Uruguay): unknown to x/text.
	"UYW": 4,
	// Codes ISO 4217 added since x/text's data, each of 2 decimals: the
	// new leone (Sierra Leone, 2022), the bolívar soberano and digital
	// (Venezuela, 2018 and 2021), the Zimbabwe gold (2024), the
	// ouguiya (Mauritania, 2018) and the Caribbean guilder (Curaçao and
	// Sint Maarten, 2025).
	"SLE": 2, "VES": 2, "VED": 2, "ZWG": 2, "MRU": 2, "XCG": 2,
}

// RoundMinor rounds an exact amount half to even to the minor unit of
// currency code: the statement rounding rule.
func RoundMinor(exact decimal.Decimal, code string) decimal.Decimal {
	scale, inc := MinorUnit(code)
	if inc <= 1 {
		return exact.RoundBank(int32(scale))
	}
	step := decimal.New(int64(inc), -int32(scale))
	return exact.DivRound(step, 32).RoundBank(0).Mul(step)
}

// Statement returns customerID's statement for period, a UTC month
// "YYYY-MM", as the ledger stands now: a late event or a re-rating changes
// the statement of its own period. It reads in one repeatable-read
// snapshot. It returns EInvalid for a malformed period or customer id and
// ENotFound for an unknown customer.
func (s *Store) Statement(ctx context.Context, customerID, period string) (Statement, error) {
	from, err := time.Parse("2006-01", period)
	if err != nil || from.Year() < 1 || from.Year() > 9998 {
		return Statement{}, errorf(EInvalid, "period: %q is not a month (YYYY-MM, e.g. 2026-01) of the years 0001 to 9998", period)
	}
	c, err := s.Customer(ctx, customerID)
	if err != nil {
		return Statement{}, err
	}
	st := Statement{CustomerID: c.ID, CustomerName: c.Name, Period: period, From: from, To: from.AddDate(0, 1, 0),
		Sections: []StatementSection{}, Unpriced: []StatementLine{}}
	acc := map[string]*sectionAcc{}
	section := func(cur string) *sectionAcc {
		if acc[cur] == nil {
			acc[cur] = &sectionAcc{s: StatementSection{Currency: cur, Lines: []StatementLine{}, Payments: []StatementLine{}}}
		}
		return acc[cur]
	}
	err = pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := st.readUsage(ctx, tx, section); err != nil {
			return err
		}
		if err := st.readEntries(ctx, tx, section); err != nil {
			return err
		}
		return st.readOpening(ctx, tx, section)
	})
	if err != nil {
		return Statement{}, dbError(err, "statement")
	}
	for _, cur := range slices.Sorted(maps.Keys(acc)) {
		st.Sections = append(st.Sections, acc[cur].finish())
	}
	return st, nil
}

// sectionAcc accumulates a section exactly, in currency units.
type sectionAcc struct {
	s                       StatementSection
	exact, credits, opening decimal.Decimal
}

func (a *sectionAcc) line(l StatementLine, amount decimal.Decimal) {
	l.Amount = amount.String()
	a.s.Lines = append(a.s.Lines, l)
	a.exact = a.exact.Add(amount)
}

func (a *sectionAcc) finish() StatementSection {
	s := a.s
	total := RoundMinor(a.exact, s.Currency)
	s.MinorUnit, _ = MinorUnit(s.Currency)
	s.Lines = append(s.Lines, StatementLine{Kind: KindRounding, Amount: total.Sub(a.exact).String()})
	s.ExactTotal, s.Total = a.exact.String(), total.StringFixed(int32(s.MinorUnit))
	s.OpeningBalance, s.Credits, s.Charges = a.opening.String(), a.credits.String(), a.exact.String()
	s.ClosingBalance = a.opening.Add(a.credits).Sub(a.exact).String()
	return s
}

// e12 parses a numeric amount in 1e-12 units into currency units.
func e12(s string) (decimal.Decimal, error) {
	d, err := decimal.NewFromString(s)
	return d.Shift(-12), err
}

func (st *Statement) readUsage(ctx context.Context, tx pgx.Tx, section func(string) *sectionAcc) error {
	rows, err := tx.Query(ctx, `
		SELECT model, currency, sum(requests)::bigint, sum(prompt_tokens)::bigint, sum(cached_tokens)::bigint,
		  sum(cache_write_tokens)::bigint, sum(completion_tokens)::bigint, sum(reasoning_tokens)::bigint,
		  sum(web_search_requests)::bigint, sum(charge_e12)::text
		FROM usage_hourly WHERE customer_id = $1 AND hour >= $2 AND hour < $3
		GROUP BY model, currency HAVING sum(requests) <> 0 OR sum(charge_e12) <> 0
		ORDER BY currency, model`, st.CustomerID, st.From, st.To)
	if err != nil {
		return err
	}
	var model, cur, charge string
	var u LineUsage
	_, err = pgx.ForEachRow(rows, []any{&model, &cur, &u.Requests, &u.PromptTokens, &u.CachedTokens,
		&u.CacheWriteTokens, &u.CompletionTokens, &u.ReasoningTokens, &u.WebSearchRequests, &charge}, func() error {
		amount, err := e12(charge)
		line := StatementLine{Kind: KindUsage, Model: model, Usage: new(u)}
		if cur == "" { // unpriced: no currency, no charge
			line.Amount = amount.String()
			st.Unpriced = append(st.Unpriced, line)
			return err
		}
		section(cur).line(line, amount)
		return err
	})
	return err
}

func (st *Statement) readEntries(ctx context.Context, tx pgx.Tx, section func(string) *sectionAcc) error {
	rows, err := tx.Query(ctx, `
		SELECT e.id, e.kind, e.amount_e12::text, e.currency, e.effective_at, coalesce(e.event_id::text, ''),
		  e.memo, coalesce(r.kind, '')
		FROM ledger_entries e LEFT JOIN ledger_entries r ON r.id = e.reverses
		WHERE e.customer_id = $1 AND e.effective_at >= $2 AND e.effective_at < $3 AND e.kind <> 'rerate'
		ORDER BY e.effective_at, e.id`, st.CustomerID, st.From, st.To)
	if err != nil {
		return err
	}
	var l StatementLine
	var amountText, cur, reversed string
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&l.EntryID, &l.Kind, &amountText, &cur, &at, &l.EventID, &l.Memo, &reversed}, func() error {
		amount, err := e12(amountText)
		line := l
		line.EffectiveAt = new(at.UTC())
		acc := section(cur)
		switch {
		case l.Kind == KindCredit || reversed == KindCredit: // payments, not charges
			if l.Kind != KindCredit {
				line.Kind = KindCreditReversal
			}
			line.Amount = amount.String()
			acc.s.Payments = append(acc.s.Payments, line)
			acc.credits = acc.credits.Add(amount)
		default: // adjustments and refunds: what is owed moves against the entry
			acc.line(line, amount.Neg())
		}
		return err
	})
	return err
}

// readOpening reads the balance at the start of the period: entries
// before it (rerate entries are in the rollups' charges) less charges.
//
// Summed from the customer's first rollup, it read every rollup row of
// the customer before the period: a statement's cost grew with the
// customer's age (3.5 s for the 13th month of a customer with 3,000,000
// rollup rows). The balance the ledger keeps (customer_balances, moved in
// the same transactions as the entries and rollups, checked by
// reconciliation) is the same sums over all time, so the opening is also
// that balance less what came after the period's start; whichever side
// of the period holds fewer months of the customer's rollups is read.
func (st *Statement) readOpening(ctx context.Context, tx pgx.Tx, section func(string) *sectionAcc) error {
	query := `
		SELECT currency, sum(amount)::text FROM (
		  SELECT currency, amount_e12 AS amount FROM ledger_entries
		  WHERE customer_id = $1 AND effective_at < $2 AND kind <> 'rerate'
		  UNION ALL
		  SELECT currency, -charge_e12 FROM usage_hourly WHERE customer_id = $1 AND hour < $2 AND currency <> ''
		) m GROUP BY currency HAVING sum(amount) <> 0`
	var first, last *time.Time
	if err := tx.QueryRow(ctx, `SELECT (SELECT min(hour) FROM usage_hourly WHERE customer_id = $1),
		(SELECT max(hour) FROM usage_hourly WHERE customer_id = $1)`, st.CustomerID).Scan(&first, &last); err != nil {
		return err
	}
	if first != nil && last != nil && last.Sub(st.From) < st.From.Sub(*first) {
		query = `
		SELECT currency, sum(amount)::text FROM (
		  SELECT currency, credits_e12 - charges_e12 AS amount FROM customer_balances WHERE customer_id = $1
		  UNION ALL
		  SELECT currency, -amount_e12 FROM ledger_entries
		  WHERE customer_id = $1 AND effective_at >= $2 AND kind <> 'rerate'
		  UNION ALL
		  SELECT currency, charge_e12 FROM usage_hourly WHERE customer_id = $1 AND hour >= $2 AND currency <> ''
		) m GROUP BY currency HAVING sum(amount) <> 0`
	}
	rows, err := tx.Query(ctx, query, st.CustomerID, st.From)
	if err != nil {
		return err
	}
	var cur, amountText string
	_, err = pgx.ForEachRow(rows, []any{&cur, &amountText}, func() error {
		amount, err := e12(amountText)
		section(cur).opening = amount
		return err
	})
	return err
}
