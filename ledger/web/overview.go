package web

import (
	"cmp"
	"context"
	"maps"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// overview is the console's first page: this month's and today's figures
// from the usage API (rollups), and the dead-letter count.
type overview struct {
	At                 time.Time
	Month, Today       string // the month ("2026-01") and day
	SpendMonth         amounts
	SpendToday         amounts
	RequestsMonth      int64
	RequestsToday      int64
	Tokens             ledger.UsageRow // this month's totals by class
	Unpriced           int64           // unpriced requests this month
	TopCustomers       []ledger.UsageRow
	TopModels          []ledger.UsageRow
	Spend              []chart // spend per day, one chart per currency (by code)
	DeadLetters        int
	DeadLettersMore    bool   // more than deadLetterCount
	DeadLettersProblem string // why they could not be counted
	Computing          bool   // the figures are not computed yet
}

// deadLetterCount is how many dead letters the overview counts at most.
const deadLetterCount = 1000

// loadOverview asks the admin API for the overview's figures.
func loadOverview(ctx context.Context, cl *api.Client, now time.Time) (*overview, error) {
	ms, ds := monthStart(now), dayStart(now)
	o := &overview{At: now, Month: ms.Format("2006-01"), Today: ds.Format("2006-01-02"), SpendMonth: amounts{}, SpendToday: amounts{}}
	var models, customers, today, days []ledger.UsageRow
	var dl []usage.DeadLetter
	var dlErr error
	err := parallel(
		func() (err error) {
			models, err = cl.UsageAll(ctx, ledger.UsageQuery{GroupBy: "model", From: ms, To: ms.AddDate(0, 1, 0), Limit: 1000})
			return err
		},
		func() (err error) {
			customers, err = cl.UsageAll(ctx, ledger.UsageQuery{GroupBy: "customer", From: ms, To: ms.AddDate(0, 1, 0), Limit: 1000})
			return err
		},
		func() (err error) {
			today, err = cl.UsageAll(ctx, ledger.UsageQuery{GroupBy: "model", From: ds, To: ds.AddDate(0, 0, 1), Limit: 1000})
			return err
		},
		func() (err error) {
			days, err = cl.UsageAll(ctx, ledger.UsageQuery{GroupBy: "day", From: ms.AddDate(0, -1, 0), To: ms.AddDate(0, 1, 0), Limit: 1000})
			return err
		},
		func() error { dl, dlErr = cl.DeadLetters(ctx, deadLetterCount+1); return nil })
	if err != nil {
		return nil, err
	}
	for _, r := range models {
		o.SpendMonth.add(r.Currency, r.Cost)
		o.RequestsMonth += r.Requests
		o.Unpriced += r.UnpricedRequests
		addTokens(&o.Tokens, r)
	}
	o.TopModels = top(models, 10)
	o.TopCustomers = top(customers, 10)
	for _, r := range today {
		o.SpendToday.add(r.Currency, r.Cost)
		o.RequestsToday += r.Requests
	}
	o.Spend = spendCharts("Spend per day, this month and the last", days)
	switch {
	case dlErr != nil:
		o.DeadLettersProblem = errorText(dlErr)
	case len(dl) > deadLetterCount:
		o.DeadLetters, o.DeadLettersMore = deadLetterCount, true
	default:
		o.DeadLetters = len(dl)
	}
	return o, nil
}

// spendCharts charts rows grouped by day: one chart per currency (ordered
// by code), each titled and labelled with it, since amounts in two
// currencies do not add up without an exchange rate (JPY stacked on USD
// made bars of no unit). Every chart has the same days (every day of
// rows); unpriced rows (no currency) cost nothing and are left out.
func spendCharts(title string, days []ledger.UsageRow) []chart {
	var labels []string
	idx := map[string]int{}
	for _, r := range days {
		if _, ok := idx[r.Period]; !ok {
			idx[r.Period] = len(labels)
			labels = append(labels, r.Period)
		}
	}
	byCurrency := map[string][]decimal.Decimal{}
	for _, r := range days {
		if r.Currency == "" {
			continue
		}
		if byCurrency[r.Currency] == nil {
			byCurrency[r.Currency] = make([]decimal.Decimal, len(labels))
		}
		v := &byCurrency[r.Currency][idx[r.Period]]
		*v = v.Add(amount(r.Cost))
	}
	var out []chart
	for _, cur := range slices.Sorted(maps.Keys(byCurrency)) {
		out = append(out, chart{Title: title + ", in " + cur, Labels: labels, Unit: cur,
			Series: []series{{Name: cur, Values: byCurrency[cur]}}})
	}
	return out
}

func addTokens(t *ledger.UsageRow, r ledger.UsageRow) {
	t.Requests += r.Requests
	t.PromptTokens += r.PromptTokens
	t.CachedTokens += r.CachedTokens
	t.CacheWriteTokens += r.CacheWriteTokens
	t.CompletionTokens += r.CompletionTokens
	t.ReasoningTokens += r.ReasoningTokens
	t.WebSearches += r.WebSearches
}

// modelsShown is how many models a by-model usage table lists (the
// console's customer page, the portal's usage page), the costliest. The
// client chooses a request's model name (a provider with prefix_routes:
// all serves any "provider/<name>", and a refused request is one of that
// name too), so a customer's month may hold any number of them: 20,000
// made each page 7.7 MB.
const modelsShown = 100

// modelRows is what a by-model usage table lists of rows (a month's usage
// grouped by model): all of them when they are of at most modelsShown
// models, else the costliest modelsShown rows (top), with the number of
// models of rows (0 when all are listed).
func modelRows(rows []ledger.UsageRow) ([]ledger.UsageRow, int64) {
	models := map[string]bool{}
	for _, r := range rows {
		models[r.Group] = true
	}
	if len(models) <= modelsShown {
		return rows, 0
	}
	return top(rows, modelsShown), int64(len(models))
}

// listed is what a page lists of a list: Rows, and Of, the number in the
// list when Rows is not all of it (else 0).
type listed[T any] struct {
	Rows []T
	Of   int64
}

// mostFirst is what a list of unpriced models shows of rows (one a model):
// all of them when there are at most modelsShown, else the modelsShown of
// the highest count (then in rows' order). rows is not changed.
func mostFirst[T any](rows []T, count func(T) int64) listed[T] {
	if len(rows) <= modelsShown {
		return listed[T]{Rows: rows}
	}
	out := slices.Clone(rows)
	slices.SortStableFunc(out, func(a, b T) int { return cmp.Compare(count(b), count(a)) })
	return listed[T]{Rows: out[:modelsShown], Of: int64(len(rows))}
}

// top returns the n rows of the highest cost (then most requests), ranked
// within their currency: costs in two currencies do not compare without
// an exchange rate (0.0093 JPY ranked above 0.0019 USD), so the rows of
// the currency with the most requests come first, then the next.
func top(rows []ledger.UsageRow, n int) []ledger.UsageRow {
	out := slices.Clone(rows)
	requests := map[string]int64{}
	for _, r := range out {
		requests[r.Currency] += r.Requests
	}
	slices.SortStableFunc(out, func(a, b ledger.UsageRow) int {
		if a.Currency != b.Currency {
			if c := cmp.Compare(requests[b.Currency], requests[a.Currency]); c != 0 {
				return c
			}
			return strings.Compare(a.Currency, b.Currency)
		}
		ra, _ := new(big.Rat).SetString(a.Cost)
		rb, _ := new(big.Rat).SetString(b.Cost)
		if ra == nil || rb == nil {
			return 0
		}
		if c := rb.Cmp(ra); c != 0 {
			return c
		}
		return int(b.Requests - a.Requests)
	})
	return out[:min(n, len(out))]
}

// overviewPage shows the overview. The month's figures read every rollup
// of the month: the first view after a start (or in a new month) answers
// at once with a page that reloads itself every 2 seconds until they are
// computed; later views show them at once and recompute them in the
// background when older than the console's maxAge; ?fresh=1 waits for new
// ones.
func (c *Console) overviewPage(w http.ResponseWriter, r *http.Request) {
	now, cl := c.now(), c.client(r)
	o, err := c.overview.get(r.Context(), monthStart(now).Format("2006-01"), r.URL.Query().Get("fresh") != "", true,
		func(ctx context.Context) (*overview, error) { return loadOverview(ctx, cl, time.Now()) })
	v := c.view(r, "overview", "Overview", o)
	switch {
	case err != nil:
		v.Error, v.Data = errorText(err), &overview{SpendMonth: amounts{}, SpendToday: amounts{}}
	case o == nil:
		v.Refresh, v.Notice = 2, "Computing this month's figures from the ledger's rollups; this page reloads itself until they are ready."
		v.Data = &overview{SpendMonth: amounts{}, SpendToday: amounts{}, Computing: true}
	}
	c.pages.render(w, c.log, http.StatusOK, "overview", v)
}
