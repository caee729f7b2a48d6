package web

import (
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/shopspring/decimal"
	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
)

// modelDayChart charts a customer's cost per day in [from, to), stacked by
// model, from the admin API (the console): see stackByModel.
func modelDayChart(r *http.Request, cl *api.Client, customerID string, from, to time.Time, byModel, byDay []ledger.UsageRow) (chart, error) {
	return stackByModel(byModel, byDay, func(model string) ([]ledger.UsageRow, error) {
		return cl.UsageAll(r.Context(), ledger.UsageQuery{CustomerID: customerID, Model: model, GroupBy: "day", From: from, To: to, Limit: 1000})
	})
}

// stackByModel charts a customer's cost per day, stacked by model, in one
// currency (oneCurrency): the chartModels costliest models of byModel
// (its usage grouped by model) each from perDay (that model's usage
// grouped by day, over the period of byDay), and the rest as "other": the
// day's total in byDay (its usage grouped by day) less theirs, so that
// each bar is the day's total that the by-day table shows.
func stackByModel(byModel, byDay []ledger.UsageRow, perDay func(model string) ([]ledger.UsageRow, error)) (chart, error) {
	c, byModel, byDay := oneCurrency(byModel, byDay)
	idx := map[string]int{}
	for _, d := range byDay {
		if _, ok := idx[d.Period]; !ok {
			idx[d.Period] = len(c.Labels)
			c.Labels = append(c.Labels, d.Period)
		}
	}
	other := make([]decimal.Decimal, len(c.Labels))
	for _, d := range byDay {
		other[idx[d.Period]] = other[idx[d.Period]].Add(amount(d.Cost))
	}
	models := top(byModel, chartModels)
	perModel := make([][]ledger.UsageRow, len(models))
	calls := make([]func() error, len(models))
	for i, m := range models {
		calls[i] = func() (err error) {
			perModel[i], err = perDay(m.Model)
			return err
		}
	}
	if err := parallel(calls...); err != nil {
		return chart{}, err
	}
	for i, m := range models {
		s := series{Name: m.Model, Values: make([]decimal.Decimal, len(c.Labels))}
		for _, d := range perModel[i] {
			if j, ok := idx[d.Period]; ok && d.Currency == c.Unit {
				v := amount(d.Cost)
				s.Values[j] = s.Values[j].Add(v)
				other[j] = other[j].Sub(v)
			}
		}
		c.Series = append(c.Series, s)
	}
	if len(byModel) > len(models) {
		for i := range other {
			other[i] = decimal.Max(other[i], decimal.Zero)
		}
		c.Series = append(c.Series, series{Name: "other", Values: other})
	}
	return c, nil
}

// oneCurrency is the start of a cost-per-day-by-model chart and the rows
// it charts: a customer charged in more than one currency (a custom price
// in another) has its costs charted in the one it was charged most in (by
// number of models, then requests), never summed across currencies into
// one bar; the title names the currencies left out, which the tables
// show. Unpriced rows (no currency) cost nothing and are left out too.
func oneCurrency(byModel, byDay []ledger.UsageRow) (chart, []ledger.UsageRow, []ledger.UsageRow) {
	weight := map[string][2]int64{}
	var order []string
	for _, m := range byModel {
		if m.Currency == "" {
			continue
		}
		w, seen := weight[m.Currency]
		if !seen {
			order = append(order, m.Currency)
		}
		weight[m.Currency] = [2]int64{w[0] + 1, w[1] + m.Requests}
	}
	c := chart{Title: "Cost per day by model"}
	for _, cur := range order {
		if w, best := weight[cur], weight[c.Unit]; c.Unit == "" || w[0] > best[0] || w[0] == best[0] && w[1] > best[1] {
			c.Unit = cur
		}
	}
	if len(order) > 1 {
		var left []string
		for _, cur := range order {
			if cur != c.Unit {
				left = append(left, cur)
			}
		}
		slices.Sort(left)
		c.Title += ", in " + c.Unit + " (charges in " + strings.Join(left, ", ") + " are in the tables)"
	}
	keep := func(rows []ledger.UsageRow) []ledger.UsageRow {
		return slices.DeleteFunc(slices.Clone(rows), func(r ledger.UsageRow) bool { return r.Currency != c.Unit })
	}
	return c, keep(byModel), keep(byDay)
}
