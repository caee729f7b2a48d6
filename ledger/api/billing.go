package api

import (
	"bytes"
	"fmt"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate-dev/tollgate/ledger"
)

// statement serves GET /admin/v1/customers/{id}/statements/{period}
// ?format=json|csv: a customer's statement for a UTC month ("2026-01"), as
// JSON (the default) or as a CSV attachment.
func (a *Admin) statement(w http.ResponseWriter, r *http.Request) {
	a.writeStatement(w, r, chi.URLParam(r, "id"), chi.URLParam(r, "period"))
}

// writeStatement answers a customer's statement for a UTC month as the
// request's format query parameter asks (json, the default, or csv).
func (a *Admin) writeStatement(w http.ResponseWriter, r *http.Request, customerID, period string) {
	format := r.URL.Query().Get("format")
	if format != "" && format != "json" && format != "csv" {
		a.fail(w, r, &ledger.Error{Code: ledger.EInvalid, Message: "format: " + format + " is not json or csv"})
		return
	}
	st, err := a.store.Statement(r.Context(), customerID, period)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if format != "csv" {
		writeJSON(w, http.StatusOK, st)
		return
	}
	var buf bytes.Buffer // a statement is small; buffered, a failure can still answer JSON
	if err := st.WriteCSV(&buf); err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="statement-%s-%s.csv"`, st.CustomerID, st.Period))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf.Bytes())
}

// export serves GET /admin/v1/export?from=&to=: every ledger line in
// [from, to) as streamed CSV (ledger.ExportColumns). An error before the
// first byte answers JSON; after it, the response is aborted (the client
// sees a truncated chunked body, never a complete-looking file).
func (a *Admin) export(w http.ResponseWriter, r *http.Request) {
	from, to, err := timeRange(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	sw := &startWriter{w: w, timeout: a.exportWait, start: func(h http.Header) {
		h.Set("Content-Type", "text/csv; charset=utf-8")
		h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="ledger-%s-%s.csv"`,
			from.UTC().Format("20060102T150405Z"), to.UTC().Format("20060102T150405Z")))
	}}
	rows, err := a.store.ExportLines(r.Context(), from, to, sw)
	switch {
	case err != nil && !sw.started:
		a.fail(w, r, err)
	case err != nil:
		a.log.Error("export aborted mid-stream", "from", from, "to", to, "rows", rows, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// reconciliation serves GET /admin/v1/reconciliation?from=&to=.
func (a *Admin) reconciliation(w http.ResponseWriter, r *http.Request) {
	from, to, err := timeRange(r)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	rec, err := a.store.Reconcile(r.Context(), from, to)
	a.respond(w, r, http.StatusOK, rec, err)
}

// timeRange reads the required from and to query parameters.
func timeRange(r *http.Request) (from, to time.Time, err error) {
	q := r.URL.Query()
	return requiredRange(q.Get("from"), q.Get("to"))
}

// ExportWriteTimeout is how long an export's write may wait for its
// client to read: a client that takes nothing for this long is taken as
// gone, and its export ends, with its database connection.
const ExportWriteTimeout = 60 * time.Second

// startWriter sets the headers and the 200 status on the first write, so
// that a failure before any byte can still be answered with an error. Each
// write must go out within timeout, when set (the deadline moved at most
// once a second, or each quarter of timeout when that is shorter, its cost
// kept off each row).
type startWriter struct {
	w        http.ResponseWriter
	start    func(http.Header)
	started  bool
	timeout  time.Duration
	deadline time.Time // when the connection's write deadline was last moved
}

func (s *startWriter) Write(p []byte) (int, error) {
	if !s.started {
		s.started = true
		s.start(s.w.Header())
		s.w.WriteHeader(http.StatusOK)
	}
	if now := time.Now(); s.timeout > 0 && now.Sub(s.deadline) >= min(time.Second, s.timeout/4) {
		s.deadline = now
		_ = http.NewResponseController(s.w).SetWriteDeadline(now.Add(s.timeout))
	}
	return s.w.Write(p)
}
