package ledger

import (
	"context"
	"strings"
	"time"
)

// PriceInput is a new price version as an operator states it: decimal
// strings in currency units per million tokens, such as "2.50".
type PriceInput struct {
	Model         string    `json:"model" yaml:"model"`
	Currency      string    `json:"currency" yaml:"currency"`
	Input         string    `json:"input" yaml:"input"`
	CachedInput   string    `json:"cached_input" yaml:"cached_input"`
	CacheWrite    string    `json:"cache_write" yaml:"cache_write"`
	Output        string    `json:"output" yaml:"output"`
	EffectiveFrom time.Time `json:"effective_from" yaml:"effective_from"`
}

// Price parses in into a Price. Empty cached_input and cache_write default
// to the input price. It returns EInvalid naming the field at fault.
func (in PriceInput) Price() (Price, error) {
	p := Price{Model: strings.TrimSpace(in.Model), Currency: strings.ToUpper(strings.TrimSpace(in.Currency)),
		EffectiveFrom: in.EffectiveFrom.UTC()}
	if p.Model == "" {
		return Price{}, errorf(EInvalid, "model is required")
	}
	if len(p.Currency) != 3 || strings.Trim(p.Currency, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		return Price{}, errorf(EInvalid, "currency: %q is not a three-letter ISO 4217 code", in.Currency)
	}
	if in.EffectiveFrom.IsZero() {
		return Price{}, errorf(EInvalid, "effective_from is required (RFC 3339, e.g. 2026-01-01T00:00:00Z)")
	}
	if in.CachedInput == "" {
		in.CachedInput = in.Input
	}
	if in.CacheWrite == "" {
		in.CacheWrite = in.Input
	}
	var err error
	for _, f := range []struct {
		name, val string
		dst       *int64
	}{
		{"input", in.Input, &p.InputMicros},
		{"cached_input", in.CachedInput, &p.CachedInputMicros},
		{"cache_write", in.CacheWrite, &p.CacheWriteMicros},
		{"output", in.Output, &p.OutputMicros},
	} {
		if *f.dst, err = ParseMicros(f.name, f.val); err != nil {
			return Price{}, err
		}
	}
	return p, nil
}

// CreatePrice adds a price version and returns it with its ID. It returns
// EInvalid for bad input and EConflict when the model already has a version
// starting at the same instant.
func (s *Store) CreatePrice(ctx context.Context, in PriceInput) (Price, error) {
	p, err := in.Price()
	if err != nil {
		return Price{}, err
	}
	err = s.pool.QueryRow(ctx,
		`INSERT INTO prices (model, currency, input_micros, cached_input_micros,
		   cache_write_micros, output_micros, effective_from)
		 VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id`,
		p.Model, p.Currency, p.InputMicros, p.CachedInputMicros, p.CacheWriteMicros,
		p.OutputMicros, p.EffectiveFrom,
	).Scan(&p.ID)
	return p, dbError(err, "price for "+p.Model+" from "+p.EffectiveFrom.Format(time.RFC3339))
}

// EnsurePrice adds the price version unless one with the same model and
// effective_from exists already, in which case it leaves the book unchanged
// and returns the existing version; it returns EConflict if that version's
// amounts differ. Seed prices from the config use it, so a
// restart does not fail or duplicate them.
func (s *Store) EnsurePrice(ctx context.Context, in PriceInput) (Price, error) {
	p, err := s.CreatePrice(ctx, in)
	if ErrorCode(err) != EConflict {
		return p, err
	}
	want, _ := in.Price()
	ps, err := s.prices(ctx, `WHERE model = $1 AND effective_from = $2`, want.Model, want.EffectiveFrom)
	if err != nil || len(ps) == 0 {
		return Price{}, err
	}
	got := ps[0]
	got.EffectiveFrom = got.EffectiveFrom.UTC()
	if want.ID = got.ID; want != got {
		return got, errorf(EConflict, "price for %s from %s differs from price version %d in the ledger; prices are never changed, add a version with a later effective_from",
			want.Model, want.EffectiveFrom.Format(time.RFC3339), got.ID)
	}
	return got, nil
}

// Prices lists price versions, for one model when model is not empty,
// ordered by model and effective_from.
func (s *Store) Prices(ctx context.Context, model string) ([]Price, error) {
	return s.prices(ctx, `WHERE $1 = '' OR model = $1`, model)
}

func (s *Store) prices(ctx context.Context, where string, args ...any) ([]Price, error) {
	rows, err := s.pool.Query(ctx,
		`SELECT id, model, currency, input_micros, cached_input_micros, cache_write_micros,
		   output_micros, effective_from FROM prices `+where+` ORDER BY model, effective_from`, args...)
	if err != nil {
		return nil, dbError(err, "prices")
	}
	defer rows.Close()
	out := []Price{}
	for rows.Next() {
		var p Price
		if err := rows.Scan(&p.ID, &p.Model, &p.Currency, &p.InputMicros, &p.CachedInputMicros,
			&p.CacheWriteMicros, &p.OutputMicros, &p.EffectiveFrom); err != nil {
			return nil, dbError(err, "prices")
		}
		out = append(out, p)
	}
	return out, dbError(rows.Err(), "prices")
}

// priceAt returns the version in ps (sorted by effective_from, one model)
// in force at t, or false when t precedes them all.
func priceAt(ps []Price, t time.Time) (Price, bool) {
	for i := len(ps) - 1; i >= 0; i-- {
		if !ps[i].EffectiveFrom.After(t) {
			return ps[i], true
		}
	}
	return Price{}, false
}
