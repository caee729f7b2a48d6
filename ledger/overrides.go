package ledger

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Override is a customer's own terms: a custom Price for a model, or a
// DiscountBP (basis points, 1000 = 10%) off the price book. Model "" means
// every model; a model-specific override wins over it.
type Override struct {
	ID         int64  `json:"id"`
	CustomerID string `json:"customer_id"`
	Model      string `json:"model"`
	// Custom is the custom price, nil for a discount.
	Custom *Price `json:"-"`
	// DiscountBP is the discount in basis points (0 to 10000), for a discount.
	DiscountBP    int        `json:"discount_bp,omitempty"`
	EffectiveFrom time.Time  `json:"effective_from"`
	EffectiveTo   *time.Time `json:"effective_to,omitempty"`
}

// OverrideInput is a new override as an operator states it: either
// DiscountPercent (a decimal string with at most two decimal places, "12.5")
// or the price fields of Price (Model is the override's model; "" for all
// models, allowed only with a discount).
type OverrideInput struct {
	Model           string      `json:"model"`
	DiscountPercent string      `json:"discount_percent,omitempty"`
	Price           *PriceInput `json:"price,omitempty"`
	EffectiveFrom   time.Time   `json:"effective_from,omitzero"`
	EffectiveTo     *time.Time  `json:"effective_to,omitempty"`
}

func (in OverrideInput) override(customerID string) (Override, error) {
	o := Override{CustomerID: customerID, Model: strings.TrimSpace(in.Model), EffectiveFrom: in.EffectiveFrom.UTC()}
	if err := usage.CheckString(o.Model, usage.MaxModelLen); err != nil { // no event's model is longer
		return o, errorf(EInvalid, "model: %v", err)
	}
	if in.EffectiveFrom.IsZero() {
		return o, errorf(EInvalid, "effective_from is required")
	}
	if err := checkTime("effective_from", &in.EffectiveFrom); err != nil {
		return o, err
	}
	o.EffectiveFrom = in.EffectiveFrom.UTC()
	if err := checkTime("effective_to", in.EffectiveTo); err != nil {
		return o, err
	}
	if in.EffectiveTo != nil {
		if !in.EffectiveTo.After(in.EffectiveFrom) {
			return o, errorf(EInvalid, "effective_to must be after effective_from")
		}
		t := in.EffectiveTo.UTC()
		o.EffectiveTo = &t
	}
	switch {
	case (in.DiscountPercent == "") == (in.Price == nil):
		return o, errorf(EInvalid, "give either discount_percent or price")
	case in.Price != nil:
		if o.Model == "" {
			return o, errorf(EInvalid, "model is required for a custom price")
		}
		pin := *in.Price
		// The override's times are kept to the microsecond (checkTime):
		// the same times given again in its price compare as such.
		if err := checkTime("price.effective_from", &pin.EffectiveFrom); err != nil {
			return o, err
		}
		if err := checkTime("price.effective_to", pin.EffectiveTo); err != nil {
			return o, err
		}
		// The price is the override's: for its model and its period. A
		// price.model or period of its own was taken and ignored, so an
		// operator who meant another model got this one priced.
		switch {
		case pin.Model != "" && strings.TrimSpace(pin.Model) != o.Model:
			return o, errorf(EInvalid, "price.model: %q is not the override's model %q: an override's price is for its own model; leave price.model out", pin.Model, o.Model)
		case !pin.EffectiveFrom.IsZero() && !pin.EffectiveFrom.Equal(in.EffectiveFrom):
			return o, errorf(EInvalid, "price.effective_from: an override's price holds over the override's own effective_from and effective_to; leave it out")
		case pin.EffectiveTo != nil && (in.EffectiveTo == nil || !pin.EffectiveTo.Equal(*in.EffectiveTo)):
			return o, errorf(EInvalid, "price.effective_to: an override's price holds over the override's own effective_from and effective_to; leave it out")
		}
		pin.Model, pin.EffectiveFrom, pin.EffectiveTo = o.Model, in.EffectiveFrom, in.EffectiveTo
		p, err := pin.Price()
		if err != nil {
			if ErrorCode(err) == EInvalid { // name the field as the request has it
				err = errorf(EInvalid, "price.%s", err.Error())
			}
			return o, err
		}
		o.Custom = &p
	default:
		bp, err := ParseSignedMicros("discount_percent", in.DiscountPercent)
		if err != nil || bp < 0 || bp > 100_000_000 || bp%10_000 != 0 {
			return o, errorf(EInvalid, "discount_percent: %q is not a percentage from 0 to 100 with at most two decimal places", in.DiscountPercent)
		}
		o.DiscountBP = int(bp / 10_000)
	}
	return o, nil
}

// CreateOverride adds an override for a customer. Overrides are dated as
// price versions are (usage.OverrideAt): an open-ended one applies until a
// later open-ended one of the same customer and model (or of all models)
// starts, so new terms replace the old from their start; a bounded one
// applies inside its window over the open-ended ones. It returns
// ENotFound for an unknown customer, EInvalid for bad input, and EConflict
// when another override of the same customer and model starts at the same
// instant, or both are bounded and their windows overlap.
func (s *Store) CreateOverride(ctx context.Context, customerID string, in OverrideInput) (Override, error) {
	o, err := in.override(customerID)
	if err != nil {
		return Override{}, err
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := lockPriceBook(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('overrides:' || $1::text || $2))`, customerID, o.Model); err != nil {
			return dbError(err, "customer "+customerID)
		}
		existing, err := queryOverrides(ctx, tx, `WHERE customer_id = $1 AND model = $2`, customerID, o.Model)
		if err != nil {
			return dbError(err, "customer "+customerID)
		}
		for _, e := range existing {
			// Dated as price versions are (usage.OverrideAt): a later one
			// takes over from its start; the same start, or two windows
			// that overlap, would leave which applies to chance.
			bounded := e.EffectiveTo != nil && o.EffectiveTo != nil
			if e.EffectiveFrom.Equal(o.EffectiveFrom) || (bounded && windowsOverlap(e.EffectiveFrom, e.EffectiveTo, o.EffectiveFrom, o.EffectiveTo)) {
				scope := fmt.Sprintf("model %q", o.Model)
				if o.Model == "" {
					scope = "every model"
				}
				return errorf(EConflict, "override overlaps override %d of customer %s for %s (%s to %s): start it at another time, "+
					"or, for two bounded windows, make them not overlap", e.ID, customerID, scope,
					e.EffectiveFrom.Format(time.RFC3339), fmtEnd(e.EffectiveTo))
			}
		}
		if err := discountHasAPrice(ctx, tx, o, existing); err != nil {
			return err
		}
		c := o.Custom
		if c == nil {
			c = &Price{}
		}
		var currency *string
		if o.Custom != nil {
			currency = &c.Currency
		}
		if err := tx.QueryRow(ctx, `
			INSERT INTO price_overrides (customer_id, model, currency, input_micros, cached_input_micros,
			  cache_write_micros, output_micros, reasoning_micros, request_fee_micros, web_search_micros,
			  discount_bp, effective_from, effective_to)
			SELECT id, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13 FROM customers WHERE id = $1
			RETURNING id`,
			customerID, o.Model, currency, nilIf(o.Custom == nil, c.InputMicros), nilIf(o.Custom == nil, c.CachedInputMicros),
			nilIf(o.Custom == nil, c.CacheWriteMicros), nilIf(o.Custom == nil, c.OutputMicros), c.ReasoningMicros,
			nilIf(o.Custom == nil, c.RequestFeeMicros), nilIf(o.Custom == nil, c.WebSearchMicros),
			nilIf(o.Custom != nil, int64(o.DiscountBP)), o.EffectiveFrom, o.EffectiveTo,
		).Scan(&o.ID); err != nil {
			return err
		}
		if err := checkOverrideState(ctx, tx, o); err != nil {
			return err
		}
		_, err = outbox(ctx, tx, "customer", customerID) // the gateways show costs on these terms
		return err
	})
	if busy := priceBookBusy(err, "override of customer "+customerID); busy != nil {
		return Override{}, busy
	}
	if ErrorCode(err) != "" {
		return Override{}, err
	}
	return o, dbError(err, "customer "+customerID)
}

func nilIf(cond bool, v int64) *int64 {
	if cond {
		return nil
	}
	return &v
}

// Overrides lists a customer's overrides. It returns ENotFound for an
// unknown customer.
func (s *Store) Overrides(ctx context.Context, customerID string) ([]Override, error) {
	if _, err := s.Customer(ctx, customerID); err != nil {
		return nil, err
	}
	os, err := queryOverrides(ctx, s.pool, `WHERE customer_id = $1`, customerID)
	return os, dbError(err, "overrides")
}

func queryOverrides(ctx context.Context, q querier, where string, args ...any) ([]Override, error) {
	rows, err := q.Query(ctx, `
		SELECT id, customer_id, model, currency, input_micros, cached_input_micros, cache_write_micros,
		  output_micros, reasoning_micros, request_fee_micros, web_search_micros, discount_bp,
		  effective_from, effective_to
		FROM price_overrides `+where+` ORDER BY customer_id, model, effective_from`, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Override, error) {
		var o Override
		var currency *string
		var in, cin, cw, out, fee, ws, bp *int64
		var reasoning *int64
		err := row.Scan(&o.ID, &o.CustomerID, &o.Model, &currency, &in, &cin, &cw, &out, &reasoning, &fee, &ws, &bp,
			&o.EffectiveFrom, &o.EffectiveTo)
		if err != nil {
			return o, err
		}
		if bp != nil {
			o.DiscountBP = int(*bp)
		} else {
			o.Custom = &Price{Model: o.Model, Currency: *currency, InputMicros: *in, CachedInputMicros: *cin,
				CacheWriteMicros: *cw, OutputMicros: *out, ReasoningMicros: reasoning, RequestFeeMicros: *fee,
				WebSearchMicros: *ws, EffectiveFrom: o.EffectiveFrom, EffectiveTo: o.EffectiveTo}
		}
		return o, nil
	})
}

// terms is the override as the rating rules take it.
func (o Override) terms() usage.Override {
	return usage.Override{ID: o.ID, Model: o.Model, Custom: o.Custom, DiscountBP: o.DiscountBP,
		EffectiveFrom: o.EffectiveFrom, EffectiveTo: o.EffectiveTo}
}

// discountHasAPrice refuses (EInvalid) discount o for one model when it
// would take over, at its start, from a custom price of the customer's
// (existing: the customer's overrides of that model) for a model the
// price book does not price then: the discount has nothing to take off,
// so the customer's requests went unpriced, billed nothing, from its
// start.
func discountHasAPrice(ctx context.Context, tx pgx.Tx, o Override, existing []Override) error {
	if o.Custom != nil || o.Model == "" {
		return nil
	}
	at := o.EffectiveFrom
	var custom *Override
	for i, e := range existing {
		if e.Custom != nil && !e.EffectiveFrom.After(at) && (e.EffectiveTo == nil || at.Before(*e.EffectiveTo)) {
			custom = &existing[i]
		}
	}
	if custom == nil {
		return nil
	}
	var priced bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM prices WHERE model = $1 AND effective_from <= $2
		AND (effective_to IS NULL OR effective_to > $2))`, o.Model, at).Scan(&priced); err != nil || priced {
		return err
	}
	return errorf(EInvalid, "discount_percent: the price book has no price for model %q at %s, and the customer's custom price "+
		"(override %d) is in force then: the discount would take over from it with nothing to discount, leaving the "+
		"customer's requests unpriced; give a custom price instead, or price the model in the price book first",
		o.Model, at.Format(time.RFC3339), custom.ID)
}
