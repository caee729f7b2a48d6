package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
)

// eventCommands are usage, events get, rerate and reconcile: reading and
// correcting what was metered.
func eventCommands() []*command {
	return []*command{{
		name: "usage", args: "[--customer ID] [--key ID] [--model M] [--from T] [--to T] [--group-by G] [--limit N] [--all | --cursor C]",
		summary: "usage and cost per group, from the hourly rollups (GET /admin/v1/usage)",
		example: "tollgate usage --customer 0197a3c2-… --group-by day --from 2026-01-01 --to 2026-02-01\n  tollgate usage --group-by customer --all --json",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			customer := fs.String("customer", "", "only this customer")
			key := fs.String("key", "", "only this API key")
			model := fs.String("model", "", "only this model")
			from := fs.String("from", "", "from this hour, RFC 3339 or YYYY-MM-DD (inclusive)")
			to := fs.String("to", "", "until this hour (exclusive)")
			groupBy := fs.String("group-by", "model", "model, key, customer, hour, day or month")
			limit := fs.Int("limit", 0, "groups per page (server default 100, at most 1000)")
			all := fs.Bool("all", false, "follow next_cursor and show every page")
			cursor := fs.String("cursor", "", "continue from a previous page's next_cursor")
			return func(c *cli, _ []string) error {
				q := []string{"customer_id", *customer, "key_id", *key, "model", *model, "from", *from, "to", *to, "group_by", *groupBy}
				if *limit != 0 {
					q = append(q, "limit", strconv.Itoa(*limit))
				}
				return c.usage(q, *cursor, *all, *groupBy)
			}
		},
	}, {
		name: "events get", args: "EVENT_ID", nargs: 1,
		summary: "show a usage event (id: the X-Request-Id) as rated (GET /admin/v1/events/{id})",
		example: "tollgate events get 0197a3d0-…",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			return func(c *cli, args []string) error {
				var e ledger.RatedEvent
				return c.call("GET", "/admin/v1/events/"+seg(args[0]), nil, &e, func() { c.showEvent(e) })
			}
		},
	}, {
		name: "rerate", args: "--from TIME --to TIME",
		summary: "re-rate a period with the current price book, as entries (POST /admin/v1/rerate)",
		example: "tollgate rerate --from 2026-01-01 --to 2026-02-01",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			from := fs.String("from", "", "events at or after, RFC 3339 or YYYY-MM-DD (required)")
			to := fs.String("to", "", "events before (required)")
			return func(c *cli, _ []string) error {
				if err := requireFlags("from", *from, "to", *to); err != nil {
					return err
				}
				for name, v := range map[string]string{"from": *from, "to": *to} {
					if _, err := parseWhen(name, v); err != nil {
						return err
					}
				}
				var r ledger.RerateResult
				return c.call("POST", "/admin/v1/rerate", map[string]string{"from": *from, "to": *to}, &r, func() {
					c.fields("Examined", strconv.Itoa(r.Examined), "Adjusted", strconv.Itoa(r.Adjusted),
						"Newly priced", strconv.Itoa(r.Priced), "Still unpriced", strconv.Itoa(r.StillUnpriced),
						"Currency conflicts", strconv.Itoa(r.CurrencyConflicts))
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
				var r ledger.Reconciliation
				path := "/admin/v1/reconciliation" + query("from", start.Format(time.RFC3339), "to", end.Format(time.RFC3339))
				if err := c.call("GET", path, nil, &r, func() { c.showReconciliation(r) }); err != nil {
					return err
				}
				if !r.Clean {
					return uncleanError{}
				}
				return nil
			}
		},
	}}
}

// usage fetches one page of usage, or every page with all, and shows it.
func (c *cli) usage(q []string, cursor string, all bool, groupBy string) error {
	var rows []json.RawMessage
	for {
		b, err := c.api.raw(c.ctx, "GET", "/admin/v1/usage"+query(append(q, "cursor", cursor)...), nil)
		if err != nil {
			return err
		}
		if c.json && !all {
			return c.printJSON(b)
		}
		var page struct {
			Data       []json.RawMessage `json:"data"`
			NextCursor string            `json:"next_cursor"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return fmt.Errorf("GET /admin/v1/usage: decode the answer: %w", err)
		}
		rows, cursor = append(rows, page.Data...), page.NextCursor
		if !all || cursor == "" {
			break
		}
	}
	if c.json {
		b, err := json.Marshal(map[string]any{"data": append([]json.RawMessage{}, rows...)})
		if err != nil {
			return err
		}
		return c.printJSON(b)
	}
	table := make([][]string, len(rows))
	for i, raw := range rows {
		var r ledger.UsageRow
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("GET /admin/v1/usage: decode a row: %w", err)
		}
		n := func(v int64) string { return strconv.FormatInt(v, 10) }
		table[i] = []string{dash(r.Group), n(r.Requests), n(r.UnpricedRequests), n(r.PromptTokens), n(r.CachedTokens),
			n(r.CacheWriteTokens), n(r.CompletionTokens), n(r.ReasoningTokens), n(r.WebSearches), r.Cost, dash(r.Currency)}
	}
	c.table([]string{strings.ToUpper(orDefault(groupBy, "model")), "REQUESTS", "UNPRICED", "PROMPT", "CACHED", "CACHE WRITE",
		"COMPLETION", "REASONING", "WEB SEARCHES", "COST", "CURRENCY"}, table)
	if cursor != "" {
		c.warn("More groups follow: add --all, or --cursor " + cursor + ".")
	}
	return nil
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
	u := e.Usage
	c.fields("ID", e.ID, "Time", ts(&e.Time), "Customer", e.CustomerID, "Key", e.KeyID,
		"Provider", e.Provider, "Model", model, "Endpoint", e.Endpoint, "Stream", strconv.FormatBool(e.Stream),
		"Status", fmt.Sprintf("%s (HTTP %d)", e.Status, e.HTTPStatus), "Finish reason", dash(e.FinishReason),
		"Prompt tokens", n(u.PromptTokens), "Cached tokens", n(u.CachedTokens), "Cache write tokens", n(u.CacheWriteTokens),
		"Completion tokens", n(u.CompletionTokens), "Reasoning tokens", n(u.ReasoningTokens),
		"Web searches", n(u.WebSearchRequests), "Usage source", e.UsageSource,
		"Time to first token", n(e.TTFTMillis)+" ms", "Duration", n(e.DurationMillis)+" ms",
		"Price version", price, "Override", override, "Cost", e.Cost+" "+e.Currency,
		"Discount", percent(e.DiscountBP)+"%", "Charge", e.Charge+" "+e.Currency, "Error", dash(e.Error))
}
