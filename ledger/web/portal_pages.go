package web

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate-dev/tollgate/ledger"
)

type usageData struct {
	Month   string
	Balance ledger.Balance
	Tokens  ledger.UsageRow
	Spend   amounts
	ByModel []ledger.UsageRow
	// Models is the number of models of the month's usage when ByModel
	// lists only the costliest (modelRows), else 0.
	Models int64
	ByDay  []ledger.UsageRow
	Usage  chart
	// Key is the signed-in key when it has a spend limit (limitedKey).
	Key *ledger.Key
}

// usagePage shows the customer's balance, the signed-in key's spend
// against its daily and monthly limits when it has them, and this month's
// usage by model and by day, with the cost per day stacked by model.
func (p *Portal) usagePage(w http.ResponseWriter, r *http.Request) {
	ss, ctx := sessionOf(r), r.Context()
	ms := monthStart(p.now())
	d := usageData{Month: ms.Format("2006-01"), Spend: amounts{}}
	// The month's bounds, as its statement's: an event stamped past the
	// month's end (a clock ahead) is next month's.
	month := "&from=" + url.QueryEscape(ms.Format(time.RFC3339)) + "&to=" + url.QueryEscape(ms.AddDate(0, 1, 0).Format(time.RFC3339))
	err := parallel(
		func() error { return p.getJSON(ctx, ss.secret, "/v1/balance", &d.Balance) },
		func() (e error) { d.Key, e = p.limitedKey(ctx, ss.secret); return },
		func() (e error) { d.ByModel, e = p.usageAll(ctx, ss.secret, "group_by=model"+month); return },
		func() (e error) { d.ByDay, e = p.usageAll(ctx, ss.secret, "group_by=day"+month); return })
	if err != nil {
		p.refuse(w, r, "usage", "usage", "Usage", err)
		return
	}
	for _, row := range d.ByModel {
		addTokens(&d.Tokens, row)
		d.Spend.add(row.Currency, row.Cost)
	}
	d.Usage, err = stackByModel(d.ByModel, d.ByDay, func(model string) ([]ledger.UsageRow, error) {
		return p.usageAll(ctx, ss.secret, "group_by=day"+month+"&model="+url.QueryEscape(model))
	})
	if err != nil {
		p.refuse(w, r, "usage", "usage", "Usage", err)
		return
	}
	d.ByModel, d.Models = modelRows(d.ByModel)
	p.pages.render(w, p.log, http.StatusOK, "usage", p.view(r, "usage", "Usage", d))
}

// usageAll is every row of GET /v1/usage?query (query: its parameters
// but limit and cursor, joined by '&'), following next_cursor, p.usageLimit
// rows a page: the month's spend was summed over the first page alone,
// undercounted past 1,000 model and currency rows.
func (p *Portal) usageAll(ctx context.Context, secret, query string) ([]ledger.UsageRow, error) {
	rows := []ledger.UsageRow{}
	cursor := ""
	for {
		path := "/v1/usage?" + query + "&limit=" + strconv.Itoa(p.usageLimit)
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		var page ledger.UsagePage
		if err := p.getJSON(ctx, secret, path, &page); err != nil {
			return nil, err
		}
		rows = append(rows, page.Data...)
		if page.NextCursor == "" {
			return rows, nil
		}
		cursor = page.NextCursor
	}
}

type requestsData struct {
	Requests []ledger.RatedEvent
	Next     string
}

// requestsPage lists the customer's requests, newest first, 50 a page.
func (p *Portal) requestsPage(w http.ResponseWriter, r *http.Request) {
	ss := sessionOf(r)
	path := "/v1/requests?limit=50"
	if c := r.URL.Query().Get("cursor"); c != "" {
		path += "&cursor=" + url.QueryEscape(c)
	}
	var page ledger.RequestPage
	if err := p.getJSON(r.Context(), ss.secret, path, &page); err != nil {
		p.refuse(w, r, "requests", "requests", "Requests", err)
		return
	}
	d := requestsData{Requests: page.Data}
	if page.NextCursor != "" {
		d.Next = "/portal/requests?cursor=" + url.QueryEscape(page.NextCursor)
	}
	p.pages.render(w, p.log, http.StatusOK, "requests", p.view(r, "requests", "Requests", d))
}

type statementsData struct {
	Current ledger.Statement
	Periods []string
}

// UnpricedShown is what the page lists of the month's unpriced usage, one
// line a model (mostFirst: those of the most requests).
func (d statementsData) UnpricedShown() listed[ledger.StatementLine] {
	return mostFirst(d.Current.Unpriced, func(l ledger.StatementLine) int64 {
		if l.Usage == nil {
			return 0
		}
		return l.Usage.Requests
	})
}

// statementsPage shows this month's statement so far and the months to
// download.
func (p *Portal) statementsPage(w http.ResponseWriter, r *http.Request) {
	ss := sessionOf(r)
	now := p.now()
	d := statementsData{Periods: periods(now, 12)}
	if err := p.getJSON(r.Context(), ss.secret, "/v1/statements/"+d.Periods[0], &d.Current); err != nil {
		p.refuse(w, r, "statements", "statements", "Statements", err)
		return
	}
	p.pages.render(w, p.log, http.StatusOK, "statements", p.view(r, "statements", "Statements", d))
}

// statementCSV downloads a month's statement as the customer API's CSV.
func (p *Portal) statementCSV(w http.ResponseWriter, r *http.Request) {
	ss, period := sessionOf(r), chi.URLParam(r, "period")
	if !periodPattern.MatchString(period) {
		p.in.refuse(w, r, http.StatusBadRequest, "There is no statement for "+period+": the period is YYYY-MM.")
		return
	}
	b, err := p.get(r.Context(), ss.secret, "/v1/statements/"+period+"?format=csv")
	if err != nil {
		p.refuse(w, r, "statements", "statements", "Statements", err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="statement-`+strings.ReplaceAll(period, `"`, "")+`.csv"`)
	_, _ = w.Write(b)
}
