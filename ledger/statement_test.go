package ledger_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/shopspring/decimal"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/ledgertest"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

var (
	jan = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	feb = time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
)

// billing is a store with one customer and key, for billing tests.
type billing struct {
	t   *testing.T
	ctx context.Context
	s   *ledger.Store
	c   ledger.Customer
	k   ledger.Key
}

func newBilling(t *testing.T, s *ledger.Store) *billing {
	t.Helper()
	if s == nil {
		s = ledgertest.NewStore(t)
	}
	b := &billing{t: t, ctx: context.Background(), s: s}
	var err error
	if b.c, err = s.CreateCustomer(b.ctx, ledger.CustomerInput{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	if b.k, _, err = s.CreateKey(b.ctx, b.c.ID, ledger.KeyInput{Name: "ci"}); err != nil {
		t.Fatal(err)
	}
	return b
}

// price adds a price version from January on; empty amounts are zero.
func (b *billing) price(model, currency, input, output, fee string) {
	b.t.Helper()
	in := ledger.PriceInput{Model: model, Currency: currency, Input: input, Output: output, RequestFee: fee, EffectiveFrom: jan}
	if _, err := b.s.CreatePrice(b.ctx, in); err != nil {
		b.t.Fatal(err)
	}
}

func (b *billing) event(model string, at time.Time, u usage.Tokens) usage.Event {
	return usage.Event{Version: usage.SchemaVersion, ID: uuid.NewString(), Time: at, CustomerID: b.c.ID,
		KeyID: b.k.ID, Provider: "sim", Model: model, Endpoint: "/v1/chat/completions", Status: usage.StatusOK,
		HTTPStatus: 200, Usage: u, UsageSource: usage.SourceUpstream}
}

func (b *billing) write(events ...usage.Event) {
	b.t.Helper()
	if _, err := b.s.WriteEvents(b.ctx, events); err != nil {
		b.t.Fatal(err)
	}
}

// export returns the ledger's export of [from, to) (ExportLines) as CSV
// records, its header first.
func (b *billing) export(from, to time.Time) [][]string {
	b.t.Helper()
	var buf bytes.Buffer
	if _, err := b.s.ExportLines(b.ctx, from, to, &buf); err != nil {
		b.t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		b.t.Fatal(err)
	}
	return recs
}

// statement returns the statement after checking its invariants.
func (b *billing) statement(period string) ledger.Statement {
	b.t.Helper()
	st, err := b.s.Statement(b.ctx, b.c.ID, period)
	if err != nil {
		b.t.Fatal(err)
	}
	for _, sec := range st.Sections {
		sum, exact := decimal.Zero, decimal.Zero
		for _, l := range sec.Lines {
			sum = sum.Add(dec(b.t, l.Amount))
			if l.Kind != ledger.KindRounding {
				exact = exact.Add(dec(b.t, l.Amount))
			}
		}
		total, rounding := dec(b.t, sec.Total), dec(b.t, sec.Lines[len(sec.Lines)-1].Amount)
		half := decimal.New(5, -int32(sec.MinorUnit)-1)
		if !sum.Equal(total) || !exact.Equal(dec(b.t, sec.ExactTotal)) || rounding.Abs().GreaterThan(half) ||
			total.Exponent() != -int32(sec.MinorUnit) && !total.IsZero() {
			b.t.Errorf("%s: lines sum to %s (exact %s), total %s %s, rounding %s", sec.Currency, sum, exact, sec.ExactTotal, sec.Total, rounding)
		}
		closing := dec(b.t, sec.OpeningBalance).Add(dec(b.t, sec.Credits)).Sub(dec(b.t, sec.Charges))
		if !closing.Equal(dec(b.t, sec.ClosingBalance)) || sec.Charges != sec.ExactTotal {
			b.t.Errorf("%s: balance %+v does not add up", sec.Currency, sec)
		}
	}
	return st
}

func dec(t *testing.T, s string) decimal.Decimal {
	t.Helper()
	d, err := decimal.NewFromString(s)
	if err != nil {
		t.Fatalf("amount %q: %v", s, err)
	}
	return d
}

func TestStatementRoundsOnceHalfToEven(t *testing.T) {
	s := ledgertest.NewStore(t)
	for _, tc := range []struct {
		currency string
		fees     []string // one model and one event per fee
		total    string
		rounding string
	}{
		{"USD", []string{"0.125"}, "0.12", "-0.005"},
		{"USD", []string{"0.135"}, "0.14", "0.005"},
		{"USD", []string{"0.004", "0.004"}, "0.01", "0.002"}, // once on the total, not per line (0.00 + 0.00)
		{"USD", []string{"0.126"}, "0.13", "0.004"},
		{"JPY", []string{"12.5"}, "12", "-0.5"},
		{"JPY", []string{"13.5"}, "14", "0.5"},
		{"KWD", []string{"0.0125"}, "0.012", "-0.0005"},
		{"EUR", []string{"2"}, "2.00", "0"},
	} {
		b := newBilling(t, s)
		for i, fee := range tc.fees {
			model := b.c.ID + "-" + strconv.Itoa(i)
			b.price(model, tc.currency, "0", "0", fee)
			b.write(b.event(model, jan.Add(time.Hour), usage.Tokens{}))
		}
		st := b.statement("2026-01")
		if len(st.Sections) != 1 || st.Sections[0].Currency != tc.currency || st.Sections[0].Total != tc.total ||
			st.Sections[0].Lines[len(tc.fees)].Amount != tc.rounding {
			t.Errorf("%s %v: statement %+v, want total %s, rounding %s", tc.currency, tc.fees, st.Sections, tc.total, tc.rounding)
		}
	}
}

// TestStatementRoundsToTheISO4217MinorUnit: docs/billing.md rounds a
// statement's total to the currency's minor unit from ISO 4217.
// golang.org/x/text/currency's standard rounding is CLDR's digits, which
// differ from ISO 4217 for IQD (ISO 3), IDR, COP, PKR, RSD and others
// (ISO 2; CLDR 0), and it does not know UYW (ISO 4).
func TestStatementRoundsToTheISO4217MinorUnit(t *testing.T) {
	for code, iso := range map[string]int{"IQD": 3, "IDR": 2, "COP": 2, "PKR": 2, "RSD": 2, "UYW": 4,
		"AFN": 2, "MUR": 2, "TZS": 2, "USD": 2, "JPY": 0, "KWD": 3, "CLF": 4, "iqd": 3,
		"SLL": 2, "SLE": 2, "VES": 2, "VED": 2, "ZWG": 2} { // SLL: x/text 0; the others unknown to it (found by review)
		if got, _ := ledger.MinorUnit(code); got != iso {
			t.Errorf("MinorUnit(%s) = %d, ISO 4217 minor unit is %d", code, got, iso)
		}
	}
	// A statement in IQD: 0.125 is billed as 0.125, not 0.
	b := newBilling(t, nil)
	b.price("iqd-model", "IQD", "0", "0", "0.125")
	b.write(b.event("iqd-model", jan.Add(time.Hour), usage.Tokens{}))
	st := b.statement("2026-01")
	if len(st.Sections) != 1 || st.Sections[0].Total != "0.125" || st.Sections[0].MinorUnit != 3 {
		t.Errorf("IQD statement: %+v; want total 0.125 at ISO 4217's 3 decimals", st.Sections)
	}
	// UYW has a minor unit, so it is a currency prices and customers may
	// use: it was refused as "not a known ISO 4217 code", x/text not
	// knowing it. 0.12345 is billed as 0.1234 (half to even, 4 decimals).
	u := newBilling(t, nil)
	if _, err := u.s.CreateCustomer(u.ctx, ledger.CustomerInput{Name: "montevideo", Currency: "uyw"}); err != nil {
		t.Fatalf("a customer billed in UYW: %v", err)
	}
	u.price("uyw-model", "UYW", "0", "0", "0.12345")
	u.write(u.event("uyw-model", jan.Add(time.Hour), usage.Tokens{}))
	if st := u.statement("2026-01"); len(st.Sections) != 1 || st.Sections[0].Currency != "UYW" ||
		st.Sections[0].Total != "0.1234" || st.Sections[0].MinorUnit != 4 {
		t.Errorf("UYW statement: %+v; want total 0.1234 at ISO 4217's 4 decimals", st.Sections)
	}
	if _, err := u.s.CreateCustomer(u.ctx, ledger.CustomerInput{Name: "nowhere", Currency: "XYZ"}); ledger.ErrorCode(err) != ledger.EInvalid {
		t.Errorf("a customer in XYZ: %v; want EInvalid", err)
	}
}

func TestStatementDiscountEntriesAndBalances(t *testing.T) {
	b := newBilling(t, nil)
	b.s.UseClockForTest(func() time.Time { return jan.Add(20 * 24 * time.Hour) })
	b.price("m", "USD", "2", "8", "")
	if _, err := b.s.CreateOverride(b.ctx, b.c.ID, ledger.OverrideInput{DiscountPercent: "12.5", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	// 1000×2 + 500×8 = 6000 micro-units = 0.006, less 12.5% = 0.00525; twice.
	e1 := b.event("m", jan.Add(time.Hour), usage.Tokens{PromptTokens: 1000, CompletionTokens: 500})
	b.write(e1, b.event("m", jan.Add(2*time.Hour), usage.Tokens{PromptTokens: 3000}))
	add := func(kind, amount string) ledger.Entry {
		e, err := b.s.AddEntry(b.ctx, b.c.ID, kind, ledger.EntryInput{Amount: amount, Memo: kind + " " + amount, EffectiveAt: jan.Add(24 * time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	credit := add(ledger.KindCredit, "10")
	add(ledger.KindAdjustment, "0.5")   // in the customer's favour: owed −0.5
	add(ledger.KindAdjustment, "-1.25") // against: owed +1.25
	if _, err := b.s.Reverse(b.ctx, credit.ID, "mistaken top-up"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.RefundEvent(b.ctx, e1.ID, "bad answer"); err != nil {
		t.Fatal(err)
	}
	st := b.statement("2026-01")
	if len(st.Sections) != 1 {
		t.Fatalf("sections = %+v", st.Sections)
	}
	sec := st.Sections[0]
	var kinds, amounts []string
	for _, l := range sec.Lines {
		kinds, amounts = append(kinds, l.Kind), append(amounts, l.Amount)
	}
	wantKinds := []string{"usage", "adjustment", "adjustment", "refund", "rounding"}
	wantAmounts := []string{"0.0105", "-0.5", "1.25", "-0.00525", "0.00475"}
	if !reflect.DeepEqual(kinds, wantKinds) || !reflect.DeepEqual(amounts, wantAmounts) ||
		sec.ExactTotal != "0.75525" || sec.Total != "0.76" || sec.Lines[0].Usage.Requests != 2 {
		t.Fatalf("lines %v %v, totals %s %s; want %v %v", kinds, amounts, sec.ExactTotal, sec.Total, wantKinds, wantAmounts)
	}
	if len(sec.Payments) != 2 || sec.Payments[0].Amount != "10" || sec.Payments[1].Kind != ledger.KindCreditReversal ||
		sec.Payments[1].Amount != "-10" || sec.Credits != "0" || sec.OpeningBalance != "0" || sec.ClosingBalance != "-0.75525" {
		t.Fatalf("payments and balances: %+v", sec)
	}
	bal, err := b.s.Balance(b.ctx, b.c.ID)
	if err != nil || bal.Balance != sec.ClosingBalance {
		t.Fatalf("Balance = %+v, %v; want the closing balance %s", bal, err, sec.ClosingBalance)
	}
	next := b.statement("2026-02")
	if len(next.Sections) != 1 || next.Sections[0].OpeningBalance != "-0.75525" || next.Sections[0].Total != "0.00" {
		t.Fatalf("February = %+v, want the January closing balance carried", next.Sections)
	}
	testStatementCSV(t, st)
}

// testStatementCSV checks that the CSV parses and says what the JSON says.
func testStatementCSV(t *testing.T, st ledger.Statement) {
	var buf bytes.Buffer
	if err := st.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil || !reflect.DeepEqual(recs[0], ledger.StatementColumns) {
		t.Fatalf("CSV: %v, header %v", err, recs)
	}
	raw, _ := json.Marshal(st)
	var js ledger.Statement
	if err := json.Unmarshal(raw, &js); err != nil {
		t.Fatal(err)
	}
	i := 1
	expect := func(cur, record, kind, amount string) {
		t.Helper()
		r := recs[i]
		if r[0] != js.CustomerID || r[1] != js.Period || r[2] != cur || r[3] != record || r[4] != kind || r[17] != amount {
			t.Errorf("CSV row %d = %v, want %s %s %s %s", i, r, cur, record, kind, amount)
		}
		i++
	}
	for _, sec := range js.Sections {
		for _, l := range sec.Lines {
			if l.Usage != nil && recs[i][10] != strconv.FormatInt(l.Usage.Requests, 10) {
				t.Errorf("CSV row %d requests = %s, want %d", i, recs[i][10], l.Usage.Requests)
			}
			// An entry's line names its entry and, for a refund of an event, the event.
			if r := recs[i]; r[5] != l.Model || r[7] != l.EventID || l.EntryID != 0 && r[6] != strconv.FormatInt(l.EntryID, 10) {
				t.Errorf("CSV row %d = %v, want model %q, entry %d, event %q", i, r, l.Model, l.EntryID, l.EventID)
			}
			expect(sec.Currency, "line", l.Kind, l.Amount)
		}
		expect(sec.Currency, "total", "exact", sec.ExactTotal)
		expect(sec.Currency, "total", "rounded", sec.Total)
		for _, p := range sec.Payments {
			expect(sec.Currency, "payment", p.Kind, p.Amount)
		}
		for _, b := range [][2]string{{"opening", sec.OpeningBalance}, {"credits", sec.Credits}, {"charges", sec.Charges}, {"closing", sec.ClosingBalance}} {
			expect(sec.Currency, "balance", b[0], b[1])
		}
	}
	for _, u := range js.Unpriced {
		expect("", "unpriced", u.Kind, u.Amount)
	}
	if i != len(recs) {
		t.Errorf("CSV has %d rows, JSON accounts for %d", len(recs), i)
	}
}

func TestStatementLateEventLandsInItsOwnMonth(t *testing.T) {
	b := newBilling(t, nil)
	b.price("m", "USD", "0", "0", "1")
	b.write(b.event("m", feb.Add(time.Hour), usage.Tokens{}))
	if st := b.statement("2026-01"); len(st.Sections) != 0 {
		t.Fatalf("January before the late event: %+v", st.Sections)
	}
	b.write(b.event("m", feb.Add(-time.Minute), usage.Tokens{})) // January's, written in February
	janSt, febSt := b.statement("2026-01"), b.statement("2026-02")
	if janSt.Sections[0].Total != "1.00" || febSt.Sections[0].Lines[0].Amount != "1" || febSt.Sections[0].OpeningBalance != "-1" {
		t.Fatalf("January %+v, February %+v", janSt.Sections, febSt.Sections)
	}
}

func TestStatementSectionPerCurrencyAndUnpriced(t *testing.T) {
	b := newBilling(t, nil)
	b.price("eu", "EUR", "1", "0", "")
	b.price("us", "USD", "3", "0", "")
	u := usage.Tokens{PromptTokens: 1_000_000}
	b.write(b.event("eu", jan, u), b.event("us", jan, u), b.event("us", jan, u), b.event("none", jan, u))
	st := b.statement("2026-01")
	if len(st.Sections) != 2 || st.Sections[0].Currency != "EUR" || st.Sections[0].Total != "1.00" ||
		st.Sections[1].Currency != "USD" || st.Sections[1].Total != "6.00" {
		t.Fatalf("sections = %+v", st.Sections)
	}
	if len(st.Unpriced) != 1 || st.Unpriced[0].Model != "none" || st.Unpriced[0].Usage.PromptTokens != 1_000_000 {
		t.Fatalf("unpriced = %+v", st.Unpriced)
	}
	testStatementCSV(t, st)
}

func TestStatementErrors(t *testing.T) {
	b := newBilling(t, nil)
	for _, p := range []string{"2026-13", "2026-1", "202601", "", "2026-01-01"} {
		if _, err := b.s.Statement(b.ctx, b.c.ID, p); ledger.ErrorCode(err) != ledger.EInvalid {
			t.Errorf("period %q: %v, want invalid", p, err)
		}
	}
	if _, err := b.s.Statement(b.ctx, uuid.NewString(), "2026-01"); ledger.ErrorCode(err) != ledger.ENotFound {
		t.Errorf("unknown customer: %v, want not found", err)
	}
	if _, err := b.s.Statement(b.ctx, "nope", "2026-01"); ledger.ErrorCode(err) != ledger.EInvalid {
		t.Errorf("malformed customer id: %v, want invalid", err)
	}
}

// TestStatementMonthsAreUTCWhateverTheServerZone: initdb takes the
// server's TimeZone from the host. With it at Asia/Kolkata (UTC+05:30), an
// event of 2026-02-01 00:10 UTC still belongs to February's statement, and
// its usage to the UTC hour 00:00: the ledger's sessions run in UTC.
func TestStatementMonthsAreUTCWhateverTheServerZone(t *testing.T) {
	ctx := context.Background()
	url := ledgertest.NewDatabase(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	var db string
	if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` SET timezone = 'Asia/Kolkata'`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	s, err := ledger.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	c, k := newCustomer(t, s)
	jan := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := s.CreatePrice(ctx, ledger.PriceInput{Model: "m", Currency: "USD", Input: "1", Output: "1", EffectiveFrom: jan}); err != nil {
		t.Fatal(err)
	}
	feb := time.Date(2026, 2, 1, 0, 10, 0, 0, time.UTC)
	if _, err := s.WriteEvents(ctx, []usage.Event{newEvent(c.ID, k.ID, "m", feb, usage.Tokens{PromptTokens: 1_000_000})}); err != nil {
		t.Fatal(err)
	}
	janSt, err := s.Statement(ctx, c.ID, "2026-01")
	if err != nil {
		t.Fatal(err)
	}
	febSt, err := s.Statement(ctx, c.ID, "2026-02")
	if err != nil {
		t.Fatal(err)
	}
	if len(janSt.Sections) != 0 || len(febSt.Sections) != 1 || febSt.Sections[0].Total != "1.00" {
		t.Fatalf("January statement %+v, February statement %+v: want the 1.00 USD event in February only", janSt.Sections, febSt.Sections)
	}
	page, err := s.Usage(ctx, ledger.UsageQuery{CustomerID: c.ID, From: feb.Truncate(time.Hour), To: feb.Truncate(time.Hour).Add(time.Hour), GroupBy: "hour"})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].Requests != 1 {
		t.Fatalf("usage of February's first UTC hour: %+v", page.Data)
	}
}
