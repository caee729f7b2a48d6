package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// eventCommands are usage, events get, rerate and reconcile: reading and
// correcting what was metered.
func eventCommands() []*command {
	return []*command{{
		name: "usage", args: "[--customer ID] [--key ID] [--model M] [--end-user U] [--from T] [--to T] [--group-by G] [--limit N] [--all | --cursor C]",
		summary: "usage and cost per group, from the hourly rollups, or the events by end user (GET /admin/v1/usage)",
		example: "tollgate usage --customer 0197a3c2-… --group-by day --from 2026-01-01 --to 2026-02-01\n  tollgate usage --group-by customer --all --json\n  tollgate usage --customer 0197a3c2-… --group-by end_user --from 2026-01-01",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			customer := idFlag(fs, "customer", "only this customer")
			key := idFlag(fs, "key", "only this API key")
			model := fs.String("model", "", "only this model")
			endUser := fs.String("end-user", "", "only this end user (the request's user, safety_identifier or X-Tollgate-End-User)")
			from := fs.String("from", "", "from this time, RFC 3339 or YYYY-MM-DD (inclusive): a whole UTC hour, unless --customer or --end-user is given or the grouping is end_user, deployment or provider")
			to := fs.String("to", "", "until this time (exclusive): a whole UTC hour, with the same exceptions as --from")
			groupBy := fs.String("group-by", "model", "model, key, customer, hour, day, month, end_user, deployment or provider")
			limit := fs.Int("limit", 0, "groups per page (server default 100, at most 1000)")
			all := fs.Bool("all", false, "follow next_cursor and show every page")
			cursor := fs.String("cursor", "", "continue from a previous page's next_cursor")
			return func(c *cli, _ []string) error {
				if *limit != 0 || flagGiven(fs, "limit") {
					if *limit < 1 || *limit > 1000 {
						return usagef("--limit: %d is not from 1 to 1000 (groups per page; leave it out for the server's 100)", *limit)
					}
				}
				start, end, err := parseRange(*from, *to)
				if err != nil {
					return err
				}
				return c.usage(ledger.UsageQuery{CustomerID: *customer, KeyID: *key, Model: *model, EndUser: *endUser,
					From: start, To: end, GroupBy: *groupBy, Limit: *limit, Cursor: *cursor}, *all)
			}
		},
	}, {
		name: "events get", args: "EVENT_ID", nargs: 1, idArgs: true,
		summary: "show a usage event (id: the X-Request-Id) as rated (GET /admin/v1/events/{id})",
		example: "tollgate events get 0197a3d0-…",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			return func(c *cli, args []string) error {
				e, err := c.api.Event(c.ctx, args[0])
				return c.show(e, err, func() { c.showEvent(e) })
			}
		},
	}, {
		name: "rerate", args: "--from TIME --to TIME [--progress]",
		summary:     "re-rate a period with the current price book, as entries (POST /admin/v1/rerate)",
		interrupted: "the batches re-rated before it are kept; run it again to finish the range",
		example:     "tollgate rerate --from 2026-01-01 --to 2026-02-01",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			from := fs.String("from", "", "events at or after, RFC 3339 or YYYY-MM-DD (required)")
			to := fs.String("to", "", "events before (required)")
			progress := fs.Bool("progress", false, "report how far it is, once a second, on stderr even when it is not a terminal")
			return func(c *cli, _ []string) error {
				if err := requireFlags("from", *from, "to", *to); err != nil {
					return err
				}
				start, end, err := parseRange(*from, *to)
				if err != nil {
					return err
				}
				var report func(ledger.RerateProgress)
				drawn := false // a line redrawn in place, to end
				if *progress || isTerminal(c.stderr) {
					draw := rerateReporter(c.stderr, isTerminal(c.stderr), start, end, time.Now)
					report = func(p ledger.RerateProgress) { draw(p); drawn = isTerminal(c.stderr) }
				}
				r, err := c.api.Rerate(c.ctx, start, end, report)
				if drawn {
					fmt.Fprintln(c.stderr)
				}
				return c.show(r, err, func() {
					c.fields("Examined", strconv.Itoa(r.Examined), "Adjusted", strconv.Itoa(r.Adjusted),
						"Newly priced", strconv.Itoa(r.Priced), "Still unpriced", strconv.Itoa(r.StillUnpriced),
						"Currency conflicts", strconv.Itoa(r.CurrencyConflicts), "Refunded (left alone)", strconv.Itoa(r.Refunded))
				})
			}
		},
	}, {
		name: "reconcile", args: "[--from TIME] [--to TIME]",
		summary: "check the ledger adds up; exit 8 when not (GET /admin/v1/reconciliation)",
		example: "tollgate reconcile --from 2026-01-01 --to 2026-02-01 || echo 'the ledger needs attention'",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			from := fs.String("from", "", "range start, RFC 3339 or YYYY-MM-DD (default: 24 hours before --to)")
			to := fs.String("to", "", "range end, exclusive (default: the next whole hour)")
			return func(c *cli, _ []string) error {
				end, err := parseWhen("to", *to)
				if err != nil {
					return err
				}
				if end.IsZero() {
					end = time.Now().UTC().Truncate(time.Hour).Add(time.Hour)
				}
				start, err := parseWhen("from", *from)
				if err != nil {
					return err
				}
				if start.IsZero() {
					start = end.Add(-24 * time.Hour)
				}
				r, err := c.api.Reconcile(c.ctx, start, end)
				if err := c.show(r, err, func() { c.showReconciliation(r) }); err != nil {
					return err
				}
				if !r.Clean {
					return uncleanError{json: c.json}
				}
				return nil
			}
		},
	}}
}

// usage fetches one page of usage, or every page with all, and shows it:
// a row per group, with the customer's name when grouped by customer.
func (c *cli) usage(q ledger.UsageQuery, all bool) error {
	var page ledger.UsagePage
	var err error
	if all {
		page.Data, err = c.api.UsageAll(c.ctx, q)
	} else {
		page, err = c.api.Usage(c.ctx, q)
	}
	byCustomer := q.GroupBy == "customer"
	// Grouped by deployment or provider, the API counts the failed attempts
	// retried elsewhere (not charged) among the requests: the column an
	// operator reconciling a provider's invoice needs (docs/billing.md).
	attempts := q.GroupBy == "deployment" || q.GroupBy == "provider"
	return c.show(page, err, func() {
		n := func(v int64) string { return strconv.FormatInt(v, 10) }
		header := []string{strings.ToUpper(orDefault(q.GroupBy, "model"))}
		if byCustomer {
			header = append(header, "NAME")
		}
		header = append(header, "REQUESTS")
		if attempts {
			header = append(header, "NOT CHARGED")
		}
		table := make([][]string, len(page.Data))
		for i, r := range page.Data {
			table[i] = []string{dash(r.Group)}
			if byCustomer {
				table[i] = append(table[i], dash(r.CustomerName))
			}
			table[i] = append(table[i], n(r.Requests))
			if attempts {
				var notCharged int64 // left out by a server before 0 was given
				if r.NotChargedRequests != nil {
					notCharged = *r.NotChargedRequests
				}
				table[i] = append(table[i], n(notCharged))
			}
			table[i] = append(table[i], n(r.UnpricedRequests), n(r.PromptTokens), n(r.CachedTokens),
				n(r.CacheWriteTokens), n(r.CompletionTokens), n(r.ReasoningTokens), n(r.WebSearches), r.Cost, dash(r.Currency))
		}
		c.table(append(header, "UNPRICED", "PROMPT", "CACHED", "CACHE WRITE",
			"COMPLETION", "REASONING", "WEB SEARCHES", "COST", "CURRENCY"), table)
		if page.NextCursor != "" {
			c.warn("More groups follow: add --all, or --cursor " + page.NextCursor + ".")
		}
	})
}

func (c *cli) showEvent(e ledger.RatedEvent) {
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	price := "none (unpriced)"
	if !e.Unpriced {
		price = n(e.PriceID)
	}
	override := "-"
	if e.OverrideID != 0 {
		override = n(e.OverrideID)
	}
	model := e.Model
	if e.ServedModel != "" && e.ServedModel != e.Model {
		model += " (served as " + e.ServedModel + ")"
	}
	// Cost is what the customer is charged (after discounts and any
	// re-rating), as in usage; the charge as first rated is shown beside
	// it, marked when a re-rating changed it. ("-" there read as nothing
	// charged, next to a discount.)
	rated := e.Charge + " " + e.Currency
	if e.Charge != e.Cost {
		rated += " (re-rated since)"
	}
	u := e.Usage
	c.fields("ID", e.ID, "Time", ts(&e.Time), "Customer", e.CustomerID, "Key", e.KeyID,
		"Provider", e.Provider, "Model", model, "Endpoint", e.Endpoint, "Stream", strconv.FormatBool(e.Stream),
		"Status", fmt.Sprintf("%s (HTTP %d)", e.Status, e.HTTPStatus), "Finish reason", dash(e.FinishReason),
		"Prompt tokens", n(u.PromptTokens), "Cached tokens", n(u.CachedTokens), "Cache write tokens", n(u.CacheWriteTokens),
		"Completion tokens", n(u.CompletionTokens), "Reasoning tokens", n(u.ReasoningTokens),
		"Web searches", n(u.WebSearchRequests), "Usage source", string(e.UsageSource),
		"Time to first token", n(e.TTFTMillis)+" ms", "Duration", n(e.DurationMillis)+" ms",
		"Price version", price, "Override", override, "List cost", e.ListCost+" "+e.Currency,
		"Discount", percent(e.DiscountBP)+"%", "Charged when rated", rated, "Cost", e.Cost+" "+e.Currency,
		"Error", dash(e.Error))
}

// rerateReporter returns a progress func that writes a re-rating's
// progress to out, redrawn in place when tty: how far through [from, to)
// it is by time, what it counted, and the rate of examined events.
func rerateReporter(out io.Writer, tty bool, from, to time.Time, now func() time.Time) func(ledger.RerateProgress) {
	start := now()
	return func(p ledger.RerateProgress) {
		pct := 0.0
		if span := to.Sub(from); span > 0 {
			pct = 100 * float64(p.Through.Sub(from)) / float64(span)
		}
		rate := 0.0
		if s := now().Sub(start).Seconds(); s > 0 {
			rate = float64(p.Examined) / s
		}
		line := fmt.Sprintf("through %s (%.0f%%): %d examined, %d adjusted, %.0f events/s",
			p.Through.UTC().Format(time.RFC3339), pct, p.Examined, p.Adjusted, rate)
		if tty {
			fmt.Fprintf(out, "\r\033[K%s", line)
		} else {
			fmt.Fprintln(out, line)
		}
	}
}
