package ledger

import (
	"context"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/text/currency"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// PriceInput is a new price version as an operator states it: decimal
// strings in currency units, per million tokens for token classes, per
// request for request_fee, per unit for web_search.
type PriceInput struct {
	Model       string `json:"model" yaml:"model"`
	Currency    string `json:"currency" yaml:"currency"`
	Input       string `json:"input" yaml:"input"`
	CachedInput string `json:"cached_input,omitempty" yaml:"cached_input"`
	CacheWrite  string `json:"cache_write,omitempty" yaml:"cache_write"`
	Output      string `json:"output" yaml:"output"`
	// Reasoning, when set, prices reasoning tokens apart from output.
	Reasoning  string `json:"reasoning,omitempty" yaml:"reasoning"`
	RequestFee string `json:"request_fee,omitempty" yaml:"request_fee"`
	WebSearch  string `json:"web_search,omitempty" yaml:"web_search"`
	// EffectiveFrom is required; EffectiveTo, when set, ends the version.
	EffectiveFrom time.Time  `json:"effective_from,omitzero" yaml:"effective_from"`
	EffectiveTo   *time.Time `json:"effective_to,omitempty" yaml:"effective_to"`
}

// Price parses in into a Price. Empty cached_input and cache_write default
// to the input price; empty request_fee and web_search to zero. It returns
// EInvalid naming the field at fault.
func (in PriceInput) Price() (Price, error) {
	p := Price{Model: strings.TrimSpace(in.Model), Currency: strings.ToUpper(strings.TrimSpace(in.Currency)),
		EffectiveFrom: in.EffectiveFrom.UTC()}
	if p.Model == "" {
		return Price{}, errorf(EInvalid, "model is required")
	}
	if err := usage.CheckString(p.Model, usage.MaxModelLen); err != nil { // no event's model is longer
		return Price{}, errorf(EInvalid, "model: %v", err)
	}
	if err := checkCurrency(p.Currency, in.Currency); err != nil {
		return Price{}, err
	}
	if in.EffectiveFrom.IsZero() {
		return Price{}, errorf(EInvalid, "effective_from is required (RFC 3339, e.g. 2026-01-01T00:00:00Z)")
	}
	if err := checkTime("effective_from", &in.EffectiveFrom); err != nil {
		return Price{}, err
	}
	p.EffectiveFrom = in.EffectiveFrom.UTC()
	if err := checkTime("effective_to", in.EffectiveTo); err != nil {
		return Price{}, err
	}
	if in.EffectiveTo != nil {
		to := in.EffectiveTo.UTC()
		if !to.After(p.EffectiveFrom) {
			return Price{}, errorf(EInvalid, "effective_to must be after effective_from")
		}
		p.EffectiveTo = &to
	}
	if in.CachedInput == "" {
		in.CachedInput = in.Input
	}
	if in.CacheWrite == "" {
		in.CacheWrite = in.Input
	}
	for _, f := range []struct {
		name, val string
		dst       *int64
	}{
		{"input", in.Input, &p.InputMicros},
		{"cached_input", in.CachedInput, &p.CachedInputMicros},
		{"cache_write", in.CacheWrite, &p.CacheWriteMicros},
		{"output", in.Output, &p.OutputMicros},
		{"request_fee", orZero(in.RequestFee), &p.RequestFeeMicros},
		{"web_search", orZero(in.WebSearch), &p.WebSearchMicros},
	} {
		var err error
		if *f.dst, err = ParseMicros(f.name, f.val); err != nil {
			return Price{}, err
		}
	}
	// A fee is charged whole on an event (usage.Rate: micro-units × 1e6 in
	// 1e-12 units), and one event costs at most an int64 of those: a
	// larger request_fee overflowed every event of the model, each set
	// aside as a dead letter, and a larger web_search every event with one.
	for _, f := range []struct {
		name   string
		micros int64
	}{{"request_fee", p.RequestFeeMicros}, {"web_search", p.WebSearchMicros}} {
		if f.micros > maxFeeMicros {
			return Price{}, errorf(EInvalid, "%s: %s is more than one event can cost (at most %s %s)",
				f.name, FormatMicros(f.micros), FormatMicros(maxFeeMicros), p.Currency)
		}
	}
	if in.Reasoning != "" {
		r, err := ParseMicros("reasoning", in.Reasoning)
		if err != nil {
			return Price{}, err
		}
		p.ReasoningMicros = &r
	}
	return p, nil
}

// maxFeeMicros is the largest request_fee or web_search price, in
// micro-units, that one event can carry: math.MaxInt64 1e-12 units.
const maxFeeMicros = math.MaxInt64 / 1_000_000

func orZero(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// checkCurrency returns EInvalid, naming the field currency, unless c (the
// upper-cased raw) is three letters that golang.org/x/text/currency knows
// as an ISO 4217 code, or that isoMinorUnit lists (UYW, SLE, VES, VED,
// ZWG, MRU and XCG, which x/text does not know).
func checkCurrency(c, raw string) error {
	if len(c) != 3 || strings.Trim(c, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		return errorf(EInvalid, "currency: %q is not a three-letter ISO 4217 code", raw)
	}
	if _, ok := isoMinorUnit[c]; ok {
		return nil
	}
	if _, err := currency.ParseISO(c); err != nil {
		return errorf(EInvalid, "currency: %q is not a known ISO 4217 code", raw)
	}
	return nil
}

// PriceInputOf returns p as an operator would state it.
func PriceInputOf(p Price) PriceInput {
	in := PriceInput{Model: p.Model, Currency: p.Currency, Input: FormatMicros(p.InputMicros),
		CachedInput: FormatMicros(p.CachedInputMicros), CacheWrite: FormatMicros(p.CacheWriteMicros),
		Output: FormatMicros(p.OutputMicros), RequestFee: FormatMicros(p.RequestFeeMicros),
		WebSearch: FormatMicros(p.WebSearchMicros), EffectiveFrom: p.EffectiveFrom.UTC(), EffectiveTo: p.EffectiveTo}
	if p.ReasoningMicros != nil {
		in.Reasoning = FormatMicros(*p.ReasoningMicros)
	}
	return in
}

// windowsOverlap reports whether [af, at) and [bf, bt) overlap, where a nil
// end is open.
func windowsOverlap(af time.Time, at *time.Time, bf time.Time, bt *time.Time) bool {
	return (at == nil || bf.Before(*at)) && (bt == nil || af.Before(*bt))
}

// CreatePrice adds a price version and returns it with its ID. It returns
// EInvalid for bad input, and EConflict when the model has a version
// starting at the same instant, or when both this version and another have
// an explicit window (effective_to) and the windows overlap. An open-ended
// version is superseded by later open-ended versions and, within their
// windows, by bounded ones (promotions); prices are never changed.
func (s *Store) CreatePrice(ctx context.Context, in PriceInput) (Price, error) {
	p, err := in.Price()
	if err != nil {
		return Price{}, err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockPriceBook(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('prices:' || $1))`, p.Model); err != nil {
			return err
		}
		existing, err := queryPrices(ctx, tx, `WHERE model = $1`, p.Model)
		if err != nil {
			return err
		}
		for _, e := range existing {
			bounded := e.EffectiveTo != nil && p.EffectiveTo != nil
			if e.EffectiveFrom.Equal(p.EffectiveFrom) || (bounded && windowsOverlap(e.EffectiveFrom, e.EffectiveTo, p.EffectiveFrom, p.EffectiveTo)) {
				return errorf(EConflict, "price for %s from %s overlaps price version %d (%s to %s)", p.Model,
					p.EffectiveFrom.Format(time.RFC3339), e.ID, e.EffectiveFrom.Format(time.RFC3339), fmtEnd(e.EffectiveTo))
			}
		}
		if err := tx.QueryRow(ctx,
			`INSERT INTO prices (model, currency, input_micros, cached_input_micros, cache_write_micros,
			   output_micros, reasoning_micros, request_fee_micros, web_search_micros, effective_from, effective_to)
			 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id`,
			p.Model, p.Currency, p.InputMicros, p.CachedInputMicros, p.CacheWriteMicros, p.OutputMicros,
			p.ReasoningMicros, p.RequestFeeMicros, p.WebSearchMicros, p.EffectiveFrom, p.EffectiveTo,
		).Scan(&p.ID); err != nil {
			return err
		}
		if err := checkPriceState(ctx, tx, p); err != nil {
			return err
		}
		_, err = outbox(ctx, tx, "price", p.Model) // the gateways show costs at this price
		return err
	})
	if busy := priceBookBusy(err, "price for "+p.Model); busy != nil {
		return Price{}, busy
	}
	if ErrorCode(err) != "" {
		return Price{}, err
	}
	return p, dbError(err, "price for "+p.Model)
}

func fmtEnd(t *time.Time) string {
	if t == nil {
		return "open"
	}
	return t.Format(time.RFC3339)
}

// EnsurePrice adds the price version unless one with the same model and
// effective_from exists already, in which case it leaves the book unchanged
// and returns the existing version; it returns EConflict if that version's
// amounts differ. Seed prices from the config use it, so a restart does not
// fail or duplicate them.
func (s *Store) EnsurePrice(ctx context.Context, in PriceInput) (Price, error) {
	want, err := in.Price()
	if err != nil {
		return Price{}, err
	}
	ps, err := queryPrices(ctx, s.pool, `WHERE model = $1 AND effective_from = $2`, want.Model, want.EffectiveFrom)
	if err != nil {
		return Price{}, dbError(err, "prices")
	}
	if len(ps) == 0 {
		p, err := s.CreatePrice(ctx, in)
		if ErrorCode(err) != EConflict {
			return p, err
		}
		// Another process seeding the same price may have won the race.
		if ps, err = queryPrices(ctx, s.pool, `WHERE model = $1 AND effective_from = $2`, want.Model, want.EffectiveFrom); err != nil || len(ps) == 0 {
			return Price{}, dbError(err, "prices")
		}
	}
	got := ps[0]
	if !sameTerms(got, want) {
		return got, errorf(EConflict, "price for %s from %s differs from price version %d in the ledger; prices are never changed, add a version with a later effective_from",
			want.Model, want.EffectiveFrom.Format(time.RFC3339), got.ID)
	}
	return got, nil
}

// Prices lists price versions, for one model when model is not empty,
// ordered by model and effective_from.
func (s *Store) Prices(ctx context.Context, model string) ([]Price, error) {
	if err := checkFilters(model, ""); err != nil { // Postgres's own error named the bytes it could not read
		return nil, err
	}
	ps, err := queryPrices(ctx, s.pool, `WHERE $1 = '' OR model = $1`, model)
	return ps, dbError(err, "prices")
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func queryPrices(ctx context.Context, q querier, where string, args ...any) ([]Price, error) {
	rows, err := q.Query(ctx,
		`SELECT id, model, currency, input_micros, cached_input_micros, cache_write_micros, output_micros,
		   reasoning_micros, request_fee_micros, web_search_micros, effective_from, effective_to
		 FROM prices `+where+` ORDER BY model, effective_from`, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Price, error) {
		var p Price
		err := row.Scan(&p.ID, &p.Model, &p.Currency, &p.InputMicros, &p.CachedInputMicros, &p.CacheWriteMicros,
			&p.OutputMicros, &p.ReasoningMicros, &p.RequestFeeMicros, &p.WebSearchMicros, &p.EffectiveFrom, &p.EffectiveTo)
		p.EffectiveFrom = p.EffectiveFrom.UTC()
		if p.EffectiveTo != nil {
			t := p.EffectiveTo.UTC()
			p.EffectiveTo = &t
		}
		return p, err
	})
}

// sameTerms reports whether two prices charge the same.
func sameTerms(a, b Price) bool {
	ai, bi := PriceInputOf(a), PriceInputOf(b)
	return ai.Input == bi.Input && ai.CachedInput == bi.CachedInput && ai.CacheWrite == bi.CacheWrite &&
		ai.Output == bi.Output && ai.Reasoning == bi.Reasoning && ai.RequestFee == bi.RequestFee &&
		ai.WebSearch == bi.WebSearch && a.Currency == b.Currency && fmtEnd(a.EffectiveTo) == fmtEnd(b.EffectiveTo)
}
