package web

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
)

// customersPerPage is how many customers (each with its balance) a page lists.
const customersPerPage = 25

type customerListItem struct {
	ledger.Customer
	Balance ledger.Balance
	// Unread is whether the balance could not be read: its zero figures
	// are not shown (no credit limit would read "unlimited").
	Unread bool
}

type customersData struct {
	Query string
	Items []customerListItem
	// First and Next are links to the first page (on a later page) and to
	// the next page of the same search, "" when there is none.
	First, Next string
}

// customersPage lists one page of customers, oldest first, with their
// balances: those whose name contains ?q= (in any case) or whose id it is,
// after ?cursor= (the API's next_cursor). Only that page is read from the
// API: it read every customer for each page, and with 100,000 of them a
// page took seconds.
func (c *Console) customersPage(w http.ResponseWriter, r *http.Request) {
	cl := c.client(r)
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	d := customersData{Query: q, First: firstPage(r, "/console/customers", q)}
	shown, next, err := c.customerChoice(r, "/console/customers", q)
	if err == nil {
		d.Next = next
		d.Items = make([]customerListItem, len(shown))
		calls := make([]func() error, len(shown))
		for i, cu := range shown {
			calls[i] = func() (err error) {
				d.Items[i].Customer = cu
				d.Items[i].Balance, err = cl.Balance(r.Context(), cu.ID)
				d.Items[i].Unread = err != nil
				return err
			}
		}
		err = parallel(calls...)
	}
	v := c.view(r, "customers", "Customers", d)
	if err != nil {
		v.Error = errorText(err)
	}
	c.pages.render(w, c.log, queryStatus(err, http.StatusOK), "customers", v)
}

// customerChoice reads one page of customersPerPage customers, oldest
// first, whose name contains q (in any case) or whose id it is, after r's
// ?cursor= (the API's next_cursor), and returns them with the link (on
// path) to the next page, "" on the last.
func (c *Console) customerChoice(r *http.Request, path, q string) ([]ledger.Customer, string, error) {
	page, err := c.client(r).CustomersPage(r.Context(),
		ledger.CustomerQuery{Search: q, Limit: customersPerPage, Cursor: r.URL.Query().Get("cursor")})
	if err != nil || page.NextCursor == "" {
		return page.Data, "", err
	}
	return page.Data, path + pageQuery(q, page.NextCursor), nil
}

// firstPage is the link (on path) to the first page of a customer list's
// search q, when r asks for a later page, or "".
func firstPage(r *http.Request, path, q string) string {
	if r.URL.Query().Get("cursor") == "" {
		return ""
	}
	return path + pageQuery(q, "")
}

// pageQuery is the query string of a customer list's page: the search
// and the cursor, each when not empty.
func pageQuery(q, cursor string) string {
	v := url.Values{}
	if q != "" {
		v.Set("q", q)
	}
	if cursor != "" {
		v.Set("cursor", cursor)
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

type customerData struct {
	Customer ledger.Customer
	Balance  ledger.Balance
	// Keys are the customer's first keysPerPage keys, oldest first;
	// MoreKeys is the link to the keys page's next page when it has more
	// ("": none).
	Keys      []ledger.Key
	MoreKeys  string
	Overrides []api.Override
	Entries   []ledger.Entry // the latest entriesShown of the range, newest first
	// EntriesFrom is the first day (UTC) of the entries' range: this
	// month's and the two before; MoreEntries is whether it has entries
	// older than those shown.
	EntriesFrom time.Time
	MoreEntries bool
	ByModel     []ledger.UsageRow
	// Models is the number of models of the month's usage when ByModel
	// lists only the costliest (modelRows), else 0.
	Models  int64
	ByDay   []ledger.UsageRow
	Usage   chart
	Periods []string
	Month   string
	Now     time.Time // what a key's expiry is compared with (expired or active)
}

// entriesShown is how many entries the customer page lists, the latest:
// after a re-rate (an entry per event) a customer has thousands.
const entriesShown = 50

// chartModels is how many models the usage chart stacks (the rest are "other").
const chartModels = 6

func (c *Console) customerPage(w http.ResponseWriter, r *http.Request) {
	cl, ctx, id := c.client(r), r.Context(), chi.URLParam(r, "id")
	now := c.now()
	ms := monthStart(now)
	d := customerData{Periods: periods(now, 6), Month: ms.Format("2006-01"), Now: now, EntriesFrom: ms.AddDate(0, -2, 0)}
	err := parallel(
		func() (e error) { d.Customer, e = cl.Customer(ctx, id); return },
		func() (e error) { d.Balance, e = cl.Balance(ctx, id); return },
		func() error { // a page: a customer may have 100,000 keys
			page, err := cl.KeysPage(ctx, id, ledger.KeyQuery{Limit: keysPerPage})
			if d.Keys = page.Data; page.NextCursor != "" {
				d.MoreKeys = keysLink(id, page.NextCursor)
			}
			return err
		},
		func() (e error) { d.Overrides, e = cl.Overrides(ctx, id); return },
		func() (e error) {
			d.Entries, e = cl.LatestEntries(ctx, id, d.EntriesFrom, time.Time{}, entriesShown+1)
			return
		},
		func() (e error) {
			d.ByModel, e = cl.UsageAll(ctx, ledger.UsageQuery{CustomerID: id, GroupBy: "model", From: ms, To: ms.AddDate(0, 1, 0), Limit: 1000})
			return
		},
		func() (e error) {
			d.ByDay, e = cl.UsageAll(ctx, ledger.UsageQuery{CustomerID: id, GroupBy: "day", From: ms, To: ms.AddDate(0, 1, 0), Limit: 1000})
			return
		})
	if err == nil {
		d.Usage, err = modelDayChart(r, cl, id, ms, ms.AddDate(0, 1, 0), d.ByModel, d.ByDay)
	}
	if err != nil {
		// Nothing of a customer partly read is shown: its empty figures
		// read as real ones (no credit limit: "unlimited"), and its credit
		// form would credit an id that is no customer.
		v := c.view(r, "customers", "Customer", nil)
		v.Error = errorText(err)
		status := http.StatusBadGateway
		if ledger.ErrorCode(err) == ledger.ENotFound || ledger.ErrorCode(err) == ledger.EInvalid {
			status = http.StatusNotFound
		}
		c.pages.render(w, c.log, status, "error", v)
		return
	}
	if len(d.Entries) > entriesShown { // oldest first: the first is one too many
		d.Entries, d.MoreEntries = d.Entries[len(d.Entries)-entriesShown:], true
	}
	slices.Reverse(d.Entries) // newest first
	d.ByModel, d.Models = modelRows(d.ByModel)
	c.pages.render(w, c.log, http.StatusOK, "customer", c.view(r, "customers", "Customer "+d.Customer.Name, d))
}

var periodPattern = regexp.MustCompile(`^[0-9]{4}-(0[1-9]|1[0-2])$`)

// statementCSV downloads a customer's statement as the API's CSV.
func (c *Console) statementCSV(w http.ResponseWriter, r *http.Request) {
	id, period := chi.URLParam(r, "id"), chi.URLParam(r, "period")
	if !periodPattern.MatchString(period) {
		c.in.refuse(w, r, http.StatusBadRequest, "There is no statement for "+period+": the period is YYYY-MM.")
		return
	}
	var buf strings.Builder
	if _, err := c.client(r).WriteStatement(r.Context(), id, period, "csv", &buf); err != nil {
		c.in.refuse(w, r, queryStatus(err, http.StatusBadGateway), errorText(err))
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="statement-`+id+`-`+period+`.csv"`)
	_, _ = w.Write([]byte(buf.String()))
}

// addCredit records a credit through the API, with the form's
// idempotency key so that a resubmitted form credits once. An amount
// with more decimals than the customer's currency's minor unit ("10.005"
// yen: likely 10,005 written with a thousands separator, or a typo in the
// cents) is refused once, the form kept with that amount as checked
// (amount_checked); sent again unchanged it is recorded as typed (the
// ledger keeps micro-units).
func (c *Console) addCredit(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	cl := c.client(r)
	amount := strings.TrimSpace(r.PostFormValue("amount"))
	if places := decimalPlaces(amount); places > 0 && amount != r.PostFormValue("amount_checked") {
		cu, err := cl.Customer(r.Context(), id)
		if err != nil {
			c.refuse(w, r, "/console/customers/"+id, "credit-"+id, creditForm, err)
			return
		}
		if scale, _ := ledger.MinorUnit(cu.Currency); places > scale {
			r.PostForm.Set("amount_checked", amount)
			c.refuse(w, r, "/console/customers/"+id, "credit-"+id, creditForm, &ledger.Error{Code: ledger.EInvalid,
				Message: fmt.Sprintf("amount: %q has %d decimal places, and a %s has %d: check it (write no thousands separator); "+
					"to credit %s %s as it is, send the form again", amount, places, cu.Currency, scale, amount, cu.Currency)})
			return
		}
	}
	e, err := cl.AddEntry(r.Context(), id, ledger.KindCredit, ledger.EntryInput{
		Amount: amount, Memo: r.PostFormValue("memo"),
		IdempotencyKey: r.PostFormValue("idempotency_key"),
		AllowSubMinor:  amount == r.PostFormValue("amount_checked")})
	if err != nil {
		c.refuse(w, r, "/console/customers/"+id, "credit-"+id, creditForm, err)
		return
	}
	c.done(w, r, "/console/customers/"+id, "Credit of "+e.Amount+" "+e.Currency+" recorded (entry "+strconv.FormatInt(e.ID, 10)+").", nil)
}

// plainAmount is an amount written out: digits, and a fraction.
var plainAmount = regexp.MustCompile(`^[0-9]*(\.[0-9]*)?$`)

// decimalPlaces is how many decimals amount, written out, has that are
// not trailing zeros ("10.50": 1); 0 for one that is not written out (the
// API says what is wrong with it).
func decimalPlaces(amount string) int {
	if !plainAmount.MatchString(amount) {
		return 0
	}
	_, frac, _ := strings.Cut(amount, ".")
	return len(strings.TrimRight(frac, "0"))
}
