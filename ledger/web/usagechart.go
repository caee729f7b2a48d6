package web

import (
	"net/http"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
)

// modelDayChart charts a customer's cost per day since from, stacked by
// model: the chartModels costliest models (byModel) each from its own
// usage query grouped by day, and the rest as "other" (the day's total,
// byDay, less theirs).
func modelDayChart(r *http.Request, cl *api.Client, customerID string, from time.Time, byModel, byDay []ledger.UsageRow) (chart, error) {
	c := chart{Title: "Cost per day by model"}
	idx := map[string]int{}
	for _, d := range byDay {
		if _, ok := idx[d.Period]; !ok {
			idx[d.Period] = len(c.Labels)
			c.Labels = append(c.Labels, d.Period)
		}
		if c.Unit == "" {
			c.Unit = d.Currency
		}
	}
	other := make([]float64, len(c.Labels))
	for _, d := range byDay {
		other[idx[d.Period]] += decimal(d.Cost)
	}
	models := top(byModel, chartModels)
	perModel := make([][]ledger.UsageRow, len(models))
	calls := make([]func() error, len(models))
	for i, m := range models {
		calls[i] = func() (err error) {
			perModel[i], err = cl.UsageAll(r.Context(), ledger.UsageQuery{CustomerID: customerID, Model: m.Model, GroupBy: "day", From: from, Limit: 1000})
			return err
		}
	}
	if err := parallel(calls...); err != nil {
		return chart{}, err
	}
	for i, m := range models {
		s := series{Name: m.Model, Values: make([]float64, len(c.Labels))}
		for _, d := range perModel[i] {
			if j, ok := idx[d.Period]; ok {
				v := decimal(d.Cost)
				s.Values[j] += v
				other[j] -= v
			}
		}
		c.Series = append(c.Series, s)
	}
	if len(byModel) > len(models) {
		for i := range other {
			other[i] = max(other[i], 0)
		}
		c.Series = append(c.Series, series{Name: "other", Values: other})
	}
	return c, nil
}
