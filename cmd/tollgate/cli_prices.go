package main

import (
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
)

// priceFlags registers the per-class price flags (decimal currency units per
// million tokens, or per request for the fees) and returns a function that
// reads them into a PriceInput.
func priceFlags(fs *flag.FlagSet) func() ledger.PriceInput {
	var in ledger.PriceInput
	fs.StringVar(&in.Currency, "currency", "", "ISO 4217 currency of the prices")
	amountVar(fs, &in.Input, "input", "per million uncached prompt tokens", false)
	amountVar(fs, &in.Output, "output", "per million completion tokens", false)
	amountVar(fs, &in.CachedInput, "cached-input", "per million cached prompt tokens (default: --input)", false)
	amountVar(fs, &in.CacheWrite, "cache-write", "per million cache-write prompt tokens (default: --input)", false)
	amountVar(fs, &in.Reasoning, "reasoning", "per million reasoning tokens (default: --output)", false)
	amountVar(fs, &in.RequestFee, "request-fee", "per request (default 0)", false)
	amountVar(fs, &in.WebSearch, "web-search", "per web search (default 0)", false)
	return func() ledger.PriceInput { return in }
}

// priceTerms is a one-line rendering of a price's classes.
func priceTerms(p ledger.PriceInput) string {
	s := fmt.Sprintf("input %s, cached %s, cache write %s, output %s", p.Input, dash(p.CachedInput), dash(p.CacheWrite), p.Output)
	for _, f := range []struct{ name, v string }{{"reasoning", p.Reasoning}, {"request fee", p.RequestFee}, {"web search", p.WebSearch}} {
		if f.v != "" && f.v != "0" {
			s += ", " + f.name + " " + f.v
		}
	}
	return s + " " + p.Currency
}

// notePast notes on stderr a price version or override that starts in the
// past (from and to, as given on the command line; end, the version's
// end, nil when open): the events already stored since then keep the
// price they were rated at until re-rated, while those of the period
// delivered from now on (late) are rated by it, so that the period's
// statement mixes the two until `tollgate rerate` is run over it: up to
// now, or to its end when that is past too.
func (c *cli) notePast(from, to string, start time.Time, end *time.Time) {
	if !start.Before(time.Now()) {
		return
	}
	until := "<now>"
	if end != nil && end.Before(time.Now()) {
		until = to
	}
	c.warn("note: --effective-from is in the past: the events already stored since then keep their price; " +
		"to charge them this one, run tollgate rerate --from " + from + " --to " + until + " (events of that time delivered late are rated by it)")
}

// priceCommands are `tollgate prices ...` and `tollgate overrides ...`.
func priceCommands() []*command {
	return []*command{{
		name:    "prices create",
		args:    "--model MODEL --currency USD --input X --output X [--cached-input X] [--cache-write X] [--reasoning X] [--request-fee X] [--web-search X] --effective-from TIME [--effective-to TIME]",
		summary: "add a price version to the price book (POST /admin/v1/prices)",
		example: "tollgate prices create --model gpt-4o-mini --currency USD --input 0.15 --cached-input 0.075 \\\n      --output 0.60 --effective-from 2026-01-01T00:00:00Z",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			model := fs.String("model", "", "model name, as clients send it (required)")
			price := priceFlags(fs)
			from := fs.String("effective-from", "", "start, RFC 3339 or YYYY-MM-DD (required)")
			to := fs.String("effective-to", "", "end, exclusive (default: open-ended)")
			return func(c *cli, _ []string) error {
				in := price()
				in.Model = *model
				if err := requireFlags("model", *model, "currency", in.Currency, "input", in.Input,
					"output", in.Output, "effective-from", *from); err != nil {
					return err
				}
				var err error
				if in.EffectiveFrom, err = parseWhen("effective-from", *from); err != nil {
					return err
				}
				if in.EffectiveTo, err = optionalWhen("effective-to", *to); err != nil {
					return err
				}
				out, err := c.api.CreatePrice(c.ctx, in)
				if err == nil {
					c.notePast(*from, *to, out.EffectiveFrom, out.EffectiveTo)
					if in.CachedInput == "" {
						// Providers bill cache reads at a tenth to a half
						// of their input rate: a version without the flag
						// charged them in full (a finance review).
						c.warn("note: no --cached-input: this price charges cached prompt tokens (cached_tokens) at --input (" + in.Input +
							" per million); if the model's provider bills cache reads for less, create the version with --cached-input")
					}
				}
				return c.show(out, err, func() {
					c.fields("ID", fmt.Sprint(out.ID), "Model", out.Model, "Prices (per 1M tokens)", priceTerms(out.PriceInput),
						"Effective from", ts(&out.EffectiveFrom), "Effective to", ts(out.EffectiveTo))
				})
			}
		},
	}, {
		name: "prices list", args: "[--model MODEL]",
		summary: "list price versions (GET /admin/v1/prices)",
		example: "tollgate prices list --model gpt-4o-mini",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			model := fs.String("model", "", "only this model")
			return func(c *cli, _ []string) error {
				ps, err := c.api.Prices(c.ctx, *model)
				return c.show(data(ps), err, func() {
					rows := make([][]string, len(ps))
					for i, p := range ps {
						rows[i] = []string{fmt.Sprint(p.ID), p.Model, p.Currency, p.Input, dash(p.CachedInput), dash(p.CacheWrite),
							p.Output, dash(p.Reasoning), dash(p.RequestFee), dash(p.WebSearch), ts(&p.EffectiveFrom), ts(p.EffectiveTo)}
					}
					c.table([]string{"ID", "MODEL", "CURRENCY", "INPUT", "CACHED", "CACHE WRITE", "OUTPUT", "REASONING",
						"REQUEST FEE", "WEB SEARCH", "FROM", "TO"}, rows)
				})
			}
		},
	}, {
		name:    "overrides create",
		args:    "--customer ID [--model MODEL] (--discount-percent P | --currency USD --input X --output X [...]) --effective-from TIME [--effective-to TIME]",
		summary: "give a customer a discount or a custom price (POST /admin/v1/customers/{id}/overrides)",
		example: "tollgate overrides create --customer 0197a3c2-… --discount-percent 12.5 --effective-from 2026-01-01\n" +
			"  tollgate overrides create --customer 0197a3c2-… --model sim-pro --currency USD --input 2 --cached-input 1 \\\n      --cache-write 2.5 --output 8 --effective-from 2026-01-01",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			customer := idFlag(fs, "customer", "customer id (required)")
			model := fs.String("model", "", "model (default: every model; required for a custom price)")
			discount := fs.String("discount-percent", "", "discount off the price book, 0 to 100, two decimals at most")
			price := priceFlags(fs)
			from := fs.String("effective-from", "", "start, RFC 3339 or YYYY-MM-DD (required)")
			to := fs.String("effective-to", "", "end, exclusive (default: open-ended)")
			return func(c *cli, _ []string) error {
				if err := requireFlags("customer", *customer, "effective-from", *from); err != nil {
					return err
				}
				in := ledger.OverrideInput{Model: *model, DiscountPercent: *discount}
				p := price()
				custom := p != (ledger.PriceInput{})
				switch {
				case custom && *discount != "":
					return usagef("give --discount-percent or a custom price (--input, --output, ...), not both")
				case !custom && *discount == "":
					return usagef("give --discount-percent or a custom price (--currency, --input, --output)")
				case custom:
					if err := requireFlags("currency", p.Currency, "input", p.Input, "output", p.Output); err != nil {
						return err
					}
					in.Price = &p
					// A class left out is charged at --input (or --output),
					// not at the price book's rate for it: a "cheaper"
					// custom price without --cached-input charged cache
					// reads 60% above the list (a review).
					for _, f := range []struct{ flag, v string }{{"cached-input", p.CachedInput}, {"cache-write", p.CacheWrite}} {
						if f.v == "" {
							c.warn("note: no --" + f.flag + ": this custom price charges those prompt tokens at --input (" + p.Input +
								" per million), not at the price book's rate for them")
						}
					}
				}
				var err error
				if in.EffectiveFrom, err = parseWhen("effective-from", *from); err != nil {
					return err
				}
				if in.EffectiveTo, err = optionalWhen("effective-to", *to); err != nil {
					return err
				}
				out, err := c.api.CreateOverride(c.ctx, *customer, in)
				if err == nil {
					c.notePast(*from, *to, out.EffectiveFrom, out.EffectiveTo)
				}
				return c.show(out, err, func() {
					c.fields("ID", fmt.Sprint(out.ID), "Customer", out.CustomerID, "Model", modelOrAll(out.Model),
						"Terms", overrideTerms(out), "Effective from", ts(&out.EffectiveFrom), "Effective to", ts(out.EffectiveTo))
				})
			}
		},
	}, {
		name: "overrides list", args: "--customer CUSTOMER_ID",
		summary: "list a customer's overrides (GET /admin/v1/customers/{id}/overrides)",
		example: "tollgate overrides list --customer 0197a3c2-…",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			customer := idFlag(fs, "customer", "customer id (required)")
			return func(c *cli, _ []string) error {
				if err := requireFlags("customer", *customer); err != nil {
					return err
				}
				ovs, err := c.api.Overrides(c.ctx, *customer)
				return c.show(data(ovs), err, func() {
					rows := make([][]string, len(ovs))
					for i, o := range ovs {
						rows[i] = []string{fmt.Sprint(o.ID), modelOrAll(o.Model), overrideTerms(o), ts(&o.EffectiveFrom), ts(o.EffectiveTo)}
					}
					c.table([]string{"ID", "MODEL", "TERMS", "FROM", "TO"}, rows)
				})
			}
		},
	}}
}

func modelOrAll(m string) string {
	if m == "" {
		return "(all models)"
	}
	return m
}

// overrideTerms renders a discount ("12.5% off") or a custom price.
func overrideTerms(o api.Override) string {
	if o.Price != nil {
		return priceTerms(*o.Price)
	}
	return fmt.Sprintf("%s%% off the price book", percent(o.DiscountBP))
}

// percent renders basis points as a percentage: 1250 → "12.5".
func percent(bp int) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%d.%02d", bp/100, bp%100), "0"), ".")
}
