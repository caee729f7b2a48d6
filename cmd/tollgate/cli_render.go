package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/ledger"
)

// showStatement renders a statement: per currency, its charge lines, the
// rounded total, the payments and the account; then unpriced usage.
func (c *cli) showStatement(st ledger.Statement) {
	c.fields("Customer", st.CustomerName+" ("+st.CustomerID+")", "Period",
		fmt.Sprintf("%s (%s to %s)", st.Period, ts(&st.From), ts(&st.To)))
	if len(st.Sections) == 0 {
		fmt.Fprintln(c.stdout, "\nNothing charged, credited or owed in this period.")
	}
	for _, sec := range st.Sections {
		fmt.Fprintf(c.stdout, "\n%s charges (total rounded half to even to %d decimals):\n", sec.Currency, sec.MinorUnit)
		c.table([]string{"KIND", "DETAIL", "REQUESTS", "PROMPT", "COMPLETION", "AMOUNT"}, statementRows(sec.Lines))
		c.fields("Total", sec.Total+" "+sec.Currency, "Exact total", sec.ExactTotal)
		if len(sec.Payments) > 0 {
			fmt.Fprintf(c.stdout, "\n%s payments:\n", sec.Currency)
			c.table([]string{"KIND", "DETAIL", "REQUESTS", "PROMPT", "COMPLETION", "AMOUNT"}, statementRows(sec.Payments))
		}
		fmt.Fprintln(c.stdout)
		c.fields("Opening balance", sec.OpeningBalance, "Credits", sec.Credits, "Charges", sec.Charges,
			"Closing balance", sec.ClosingBalance+" "+sec.Currency)
	}
	if len(st.Unpriced) > 0 {
		fmt.Fprintln(c.stdout, "\nUnpriced usage (not billed: add a price, then tollgate rerate):")
		c.table([]string{"KIND", "DETAIL", "REQUESTS", "PROMPT", "COMPLETION", "AMOUNT"}, statementRows(st.Unpriced))
	}
}

// statementRows renders statement lines: a usage line's model and counts,
// an entry's id, time and memo.
func statementRows(lines []ledger.StatementLine) [][]string {
	rows := make([][]string, len(lines))
	for i, l := range lines {
		detail := l.Model
		if l.EntryID != 0 {
			detail = strings.TrimSpace(fmt.Sprintf("entry %d %s %s", l.EntryID, ts(l.EffectiveAt), l.Memo))
		}
		requests, prompt, completion := "-", "-", "-"
		if u := l.Usage; u != nil {
			requests, prompt, completion = strconv.FormatInt(u.Requests, 10),
				strconv.FormatInt(u.PromptTokens, 10), strconv.FormatInt(u.CompletionTokens, 10)
		}
		rows[i] = []string{l.Kind, dash(detail), requests, prompt, completion, l.Amount}
	}
	return rows
}

// showReconciliation renders what reconcile found, the differences last:
// the counts of events and ids that do not add up, then each rollup row's
// figures that differ from its events (requests, tokens, charge: both
// values, one line per figure), the balances and the unpriced models.
func (c *cli) showReconciliation(r ledger.Reconciliation) {
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	clean := "yes"
	if !r.Clean {
		clean = "NO"
	}
	c.fields("Range", ts(&r.From)+" to "+ts(&r.To), "Clean", clean,
		"Events", n(r.Events), "Attempts (not charged)", n(r.Attempts), "Event ids", n(r.EventIDs),
		"Events without id", n(r.EventsWithoutID), "Ids without event", n(r.IDsWithoutEvent), "Duplicate ids", n(r.DuplicateIDs),
		"Rerate entries without event", n(r.RerateEntriesWithoutEvent), "Rollup mismatches", n(r.RollupMismatchCount), "Balance mismatches", strconv.Itoa(len(r.BalanceMismatches)),
		"Unpriced events", n(r.UnpricedEvents), "Duplicates rejected", n(r.DuplicatesRejected),
		"Events of unknown customers", n(r.UnknownCustomerEvents), "Events of another customer's key", n(r.ForeignKeyEvents),
		"Recorded after their month", n(r.LateEvents)+" "+plural(int(r.LateEvents), "event", "events")+", "+
			n(r.LateEntries)+" "+plural(int(r.LateEntries), "entry", "entries"), "Last recorded", ts(r.LastRecordedAt))
	if r.UnknownCustomerEvents+r.ForeignKeyEvents > 0 {
		c.warn("Events whose customer the ledger does not hold, or whose key is not their customer's: no gateway " +
			"publishes them; another publisher is on the usage subject (see docs/billing.md, Reconciliation).")
	}
	var counts []string
	if r.Events+r.Attempts != r.EventIDs {
		counts = append(counts, fmt.Sprintf("events (%d) + attempts (%d) = %d, but there are %d event ids",
			r.Events, r.Attempts, r.Events+r.Attempts, r.EventIDs))
	}
	for _, d := range []struct {
		v    int64
		what string
	}{{r.EventsWithoutID, "events without an event id"}, {r.IDsWithoutEvent, "event ids without an event"},
		{r.DuplicateIDs, "ids stored as more than one event"},
		{r.RerateEntriesWithoutEvent, "rerate entries without their event (none stored with that id, customer and time)"}} {
		if d.v != 0 {
			counts = append(counts, fmt.Sprintf("%s: %d", d.what, d.v))
		}
	}
	if len(counts) > 0 {
		fmt.Fprintln(c.stdout, "\nEvent counts that do not add up:")
		for _, l := range counts {
			fmt.Fprintf(c.stdout, "  %s\n", l)
		}
	}
	if len(r.RollupMismatches) > 0 {
		listed := ""
		if int64(len(r.RollupMismatches)) < r.RollupMismatchCount {
			listed = fmt.Sprintf(" (the first %d of %d)", len(r.RollupMismatches), r.RollupMismatchCount)
		}
		fmt.Fprintf(c.stdout, "\nRollup rows that differ from their events%s, a line per figure that differs:\n", listed)
		var rows [][]string
		for _, m := range r.RollupMismatches {
			for _, f := range m.Fields {
				rows = append(rows, []string{ts(&m.Hour), m.CustomerID, m.KeyID, m.Model, m.Currency, f,
					rollupFigure(m.Events, f), rollupFigure(m.Rollup, f)})
			}
		}
		c.table([]string{"HOUR", "CUSTOMER", "KEY", "MODEL", "CURRENCY", "FIGURE", "EVENTS", "ROLLUP"}, rows)
	}
	if len(r.BalanceMismatches) > 0 {
		fmt.Fprintln(c.stdout, "\nBalances that differ from the ledger:")
		rows := make([][]string, len(r.BalanceMismatches))
		for i, m := range r.BalanceMismatches {
			rows[i] = []string{m.CustomerID, m.Currency, m.Expected.Credits, m.Stored.Credits, m.Expected.Charges, m.Stored.Charges}
		}
		c.table([]string{"CUSTOMER", "CURRENCY", "CREDITS (LEDGER)", "CREDITS (STORED)", "CHARGES (LEDGER)", "CHARGES (STORED)"}, rows)
	}
	if len(r.Unpriced) > 0 {
		fmt.Fprintln(c.stdout, "\nUnpriced events by model (add a price, then tollgate rerate):")
		if r.UnpricedModels > int64(len(r.Unpriced)) {
			fmt.Fprintf(c.stdout, "(the %d models of the most events, of %d models; %d events in all)\n",
				len(r.Unpriced), r.UnpricedModels, r.UnpricedEvents)
		}
		rows := make([][]string, len(r.Unpriced))
		for i, u := range r.Unpriced {
			rows[i] = []string{u.Model, n(u.Events)}
		}
		c.table([]string{"MODEL", "EVENTS"}, rows)
	}
}

// rollupFigure is the figure of f that a RollupMismatch's Fields names
// ("requests", "prompt_tokens", ..., "list_cost", "charge"), "?" for a name it does not know.
func rollupFigure(f ledger.RollupFigures, name string) string {
	var v int64
	switch name {
	case "charge":
		return dash(f.Charge)
	case "list_cost":
		return dash(f.ListCost)
	case "requests":
		v = f.Requests
	case "unpriced_requests":
		v = f.UnpricedRequests
	case "prompt_tokens":
		v = f.PromptTokens
	case "cached_tokens":
		v = f.CachedTokens
	case "cache_write_tokens":
		v = f.CacheWriteTokens
	case "completion_tokens":
		v = f.CompletionTokens
	case "reasoning_tokens":
		v = f.ReasoningTokens
	case "web_search_requests":
		v = f.WebSearchRequests
	default:
		return "?"
	}
	return strconv.FormatInt(v, 10)
}
