package main

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/tollgate-dev/tollgate/ledger"
)

// creditCommands are `tollgate credits ...`: ledger entries that move a
// customer's balance.
func creditCommands() []*command {
	return []*command{{
		name: "credits grant", args: "--customer ID --amount AMOUNT [--memo TEXT] [--idempotency-key KEY] [--effective-at TIME] [--allow-sub-minor]",
		summary: "credit a customer's balance (POST /admin/v1/customers/{id}/credits)",
		example: "tollgate credits grant --customer 0197a3c2-… --amount 100 --memo 'January top-up' --idempotency-key topup-0197a3c2-2026-01",
		flags:   entryFlags(ledger.KindCredit, "amount to credit, a positive decimal in the customer's currency (required)"),
	}, {
		name: "credits adjust", args: "--customer ID --amount AMOUNT [--memo TEXT] [--idempotency-key KEY] [--effective-at TIME] [--allow-sub-minor]",
		summary: "correct a customer's balance either way (POST /admin/v1/customers/{id}/adjustments)",
		example: "tollgate credits adjust --customer 0197a3c2-… --amount -5 --memo 'duplicate credit'",
		flags:   entryFlags(ledger.KindAdjustment, "amount, a non-zero decimal: positive in the customer's favour (required)"),
	}, {
		name: "credits list", args: "--customer ID [--from TIME] [--to TIME] [--limit N | --cursor C]",
		summary: "list a customer's ledger entries (GET /admin/v1/customers/{id}/entries)",
		example: "tollgate credits list --customer 0197a3c2-… --from 2026-01-01 --to 2026-02-01\n  tollgate credits list --customer 0197a3c2-… --limit 20",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			customer := idFlag(fs, "customer", "customer id (required)")
			from := fs.String("from", "", "entries effective at or after, RFC 3339 or YYYY-MM-DD")
			to := fs.String("to", "", "entries effective before, RFC 3339 or YYYY-MM-DD")
			limit := fs.Int("limit", 0, "only the latest N entries (1 to 10000), one page; without it or --cursor, every entry, read a page at a time")
			cursor := fs.String("cursor", "", "the page of entries before a previous page: its next_cursor")
			return func(c *cli, _ []string) error {
				if err := requireFlags("customer", *customer); err != nil {
					return err
				}
				paged := flagGiven(fs, "limit") || *cursor != ""
				if flagGiven(fs, "limit") && (*limit < 1 || *limit > ledger.MaxEntryLimit) {
					return usagef("--limit: %d is not from 1 to %d (the latest entries; leave it out for every entry)", *limit, ledger.MaxEntryLimit)
				}
				start, end, err := parseRange(*from, *to)
				if err != nil {
					return err
				}
				var page ledger.EntryPage
				if paged {
					page, err = c.api.EntriesPage(c.ctx, *customer, start, end, *limit, *cursor)
				} else {
					page.Data, err = c.api.Entries(c.ctx, *customer, start, end)
				}
				return c.show(page, err, func() {
					rows := make([][]string, len(page.Data))
					for i, e := range page.Data {
						rows[i] = []string{strconv.FormatInt(e.ID, 10), e.Kind, e.Amount, e.Currency, ts(&e.EffectiveAt),
							entryRef(e), dash(e.Memo)}
					}
					c.table([]string{"ID", "KIND", "AMOUNT", "CURRENCY", "EFFECTIVE", "REFERS TO", "MEMO"}, rows)
					if page.NextCursor != "" {
						c.warn("Older entries precede these: add --cursor " + page.NextCursor + ", or leave out --limit and --cursor for every entry.")
					}
				})
			}
		},
	}, {
		name: "credits reverse", args: "ENTRY_ID [--memo TEXT]", nargs: 1,
		summary: "reverse a credit or adjustment with a refund entry (POST /admin/v1/entries/{id}/reverse)",
		example: "tollgate credits reverse 42 --memo 'granted twice'",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			memo := fs.String("memo", "", "why, for the ledger")
			return func(c *cli, args []string) error {
				id, err := strconv.ParseInt(args[0], 10, 64)
				if err != nil || id < 1 {
					return usagef("ENTRY_ID: %q is not an entry id (a positive integer, as credits list shows it)", args[0])
				}
				return c.showEntry(c.api.Reverse(c.ctx, id, *memo))
			}
		},
	}, {
		name: "credits refund-event", args: "EVENT_ID [--memo TEXT]", nargs: 1, idArgs: true,
		summary: "refund what a usage event was charged (POST /admin/v1/events/{id}/refund)",
		example: "tollgate credits refund-event 0197a3d0-… --memo 'upstream outage'",
		flags: func(fs *flag.FlagSet) func(*cli, []string) error {
			memo := fs.String("memo", "", "why, for the ledger")
			return func(c *cli, args []string) error {
				return c.showEntry(c.api.RefundEvent(c.ctx, args[0], *memo))
			}
		},
	}}
}

// entryFlags is credits grant and adjust: an entry of kind.
func entryFlags(kind, amountHelp string) func(fs *flag.FlagSet) func(*cli, []string) error {
	return func(fs *flag.FlagSet) func(*cli, []string) error {
		customer := idFlag(fs, "customer", "customer id (required)")
		amount := amountFlag(fs, "amount", amountHelp, kind == ledger.KindAdjustment)
		memo := fs.String("memo", "", "why, for the ledger and the statement")
		key := idempotencyKeyFlag(fs, "a retry with the same key returns the first entry instead of adding another")
		at := fs.String("effective-at", "", "when it takes effect, RFC 3339 or a date (UTC midnight): a payment received last week (default: now)")
		subMinor := fs.Bool("allow-sub-minor", false, "record an amount finer than the currency's minor unit (0.001 USD, 10.5 JPY) as typed; refused without it")
		return func(c *cli, _ []string) error {
			if err := requireFlags("customer", *customer, "amount", *amount); err != nil {
				return err
			}
			when, err := parseWhen("effective-at", *at)
			if err != nil {
				return err
			}
			in := ledger.EntryInput{Amount: *amount, Memo: *memo, IdempotencyKey: *key, EffectiveAt: when, AllowSubMinor: *subMinor}
			return c.showEntry(c.api.AddEntry(c.ctx, *customer, kind, in))
		}
	}
}

// showEntry shows the entry the API answered with.
func (c *cli) showEntry(e ledger.Entry, err error) error {
	return c.show(e, err, func() {
		c.fields("Entry", strconv.FormatInt(e.ID, 10), "Customer", e.CustomerID, "Kind", e.Kind,
			"Amount", e.Amount+" "+e.Currency, "Effective", ts(&e.EffectiveAt), "Refers to", entryRef(e),
			"Idempotency key", dash(e.IdempotencyKey), "Memo", dash(e.Memo))
	})
}

// entryRef is what an entry refers to: the event it rates or refunds, or
// the entry it reverses.
func entryRef(e ledger.Entry) string {
	switch {
	case e.EventID != "":
		return "event " + e.EventID
	case e.Reverses != 0:
		return fmt.Sprintf("entry %d", e.Reverses)
	}
	return "-"
}
