package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/meter"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestTimeBoundsAgreeAcrossReports (a finance review of time
// boundaries): two requests, one begun in the last microsecond of a month
// and one at the first instant of the next, delivered as a gateway
// publishes them, fall on the same side of the boundary in every report:
// the statements, the export, usage by hour, day and month through the
// CLI, the customer API's usage and requests, and reconciliation. Every
// range is [from, to): from inclusive, to exclusive; a range that crosses
// the month splits at it; a to before (or at) from is refused everywhere
// (400, and the CLI's exit 5), never read as an empty range.
func TestTimeBoundsAgreeAcrossReports(t *testing.T) {
	s := newStack(t, nil)
	custID, keyID, secret := s.customer(`{"name":"bounds","currency":"USD"}`, `{"name":"k"}`)
	s.tg("prices", "create", "--model", "tb-model", "--currency", "USD", "--input", "1", "--output", "2",
		"--effective-from", "2020-01-01")

	now := time.Now().UTC()
	boundary := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, -1, 0) // last month's first instant
	before, after := boundary.AddDate(0, -1, 0), boundary.AddDate(0, 1, 0)
	periodA, periodB := before.Format("2006-01"), boundary.Format("2006-01")
	js, err := jetstream.New(s.app.nc)
	if err != nil {
		t.Fatal(err)
	}
	pub := meter.NewPublisher(js, meter.StreamConfig{}, 0)
	last, first := boundary.Add(-time.Microsecond), boundary
	ids := map[time.Time]string{}
	for _, at := range []time.Time{last, first} {
		e := usage.Event{Version: 1, ID: uuid.NewString(), Time: at, CustomerID: custID, KeyID: keyID, Provider: "sim",
			Model: "tb-model", Endpoint: "/v1/chat/completions", Stream: true, Status: usage.StatusOK, UsageSource: usage.SourceUpstream,
			DurationMillis: 2000, Usage: usage.Tokens{PromptTokens: 1000000, CompletionTokens: 1000000}}
		if err := pub.Publish(context.Background(), &e); err != nil {
			t.Fatal(err)
		}
		ids[at] = e.ID
		s.event(e.ID)
	}
	rfc := func(t time.Time) string { return t.Format(time.RFC3339Nano) }

	for _, p := range []string{periodA, periodB} {
		var st ledger.Statement
		s.tgJSON(&st, "statements", "get", "--customer", custID, "--period", p)
		if len(st.Sections) != 1 || st.Sections[0].ExactTotal != "3" {
			t.Errorf("statement of %s: %+v; want one request, 3 USD", p, st.Sections)
		}
	}

	// The export: to excludes the request at the boundary, from includes it.
	dir := t.TempDir()
	for _, c := range []struct {
		from, to time.Time
		want     string
	}{{before, boundary, ids[last]}, {boundary, after, ids[first]}, {last, boundary.Add(time.Microsecond), ""}} {
		file := filepath.Join(dir, "x.csv")
		s.tgOK("export", "--from", rfc(c.from), "--to", rfc(c.to), "--output", file)
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rows[1:] {
			got = append(got, r[2])
		}
		if want := []string{c.want}; c.want == "" && len(got) != 2 || c.want != "" && (len(got) != 1 || got[0] != c.want) {
			t.Errorf("export [%s, %s): event ids %v; want %v (both when empty)", rfc(c.from), rfc(c.to), got, want)
		}
	}

	// Usage through the CLI, by hour, day and month, a range across the month.
	for _, c := range []struct {
		groupBy    string
		from, to   time.Time
		wantGroups []string
	}{
		{"hour", boundary.Add(-time.Hour), boundary.Add(time.Hour), []string{boundary.Add(-time.Hour).Format("2006-01-02T15:00:00Z"), boundary.Format("2006-01-02T15:00:00Z")}},
		{"day", boundary.AddDate(0, 0, -1), boundary.AddDate(0, 0, 1), []string{boundary.AddDate(0, 0, -1).Format(time.DateOnly), boundary.Format(time.DateOnly)}},
		{"month", before.AddDate(0, 0, 15), boundary.AddDate(0, 0, 15), []string{periodA, periodB}},
		{"month", before, boundary, []string{periodA}},
		{"month", boundary, after, []string{periodB}},
	} {
		var page ledger.UsagePage
		s.tgJSON(&page, "usage", "--customer", custID, "--group-by", c.groupBy, "--from", rfc(c.from), "--to", rfc(c.to))
		var got []string
		for _, r := range page.Data {
			if r.Cost != "3" {
				t.Errorf("usage by %s: group %s costs %s; want 3", c.groupBy, r.Period, r.Cost)
			}
			got = append(got, r.Period)
		}
		if strings.Join(got, ",") != strings.Join(c.wantGroups, ",") {
			t.Errorf("usage by %s over [%s, %s): groups %v; want %v", c.groupBy, rfc(c.from), rfc(c.to), got, c.wantGroups)
		}
	}

	// The customer API, with the customer's own key.
	get := func(path string, q url.Values, out any) (int, string) {
		req, _ := http.NewRequest("GET", s.gateway+path+"?"+q.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if out != nil && resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(b, out); err != nil {
				t.Fatalf("%s: %v: %s", path, err, b)
			}
		}
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		from, to time.Time
		want     string
	}{{before, boundary, ids[last]}, {boundary, after, ids[first]}} {
		var page ledger.RequestPage
		if code, body := get("/v1/requests", url.Values{"from": {rfc(c.from)}, "to": {rfc(c.to)}}, &page); code != http.StatusOK ||
			len(page.Data) != 1 || page.Data[0].ID != c.want {
			t.Errorf("customer requests [%s, %s): %d %s; want %s alone", rfc(c.from), rfc(c.to), code, body, c.want)
		}
		var usage ledger.UsagePage
		if code, body := get("/v1/usage", url.Values{"from": {rfc(c.from)}, "to": {rfc(c.to)}, "group_by": {"month"}}, &usage); code != http.StatusOK ||
			len(usage.Data) != 1 || usage.Data[0].Requests != 1 || usage.Data[0].Cost != "3" {
			t.Errorf("customer usage [%s, %s): %d %s; want one request of 3", rfc(c.from), rfc(c.to), code, body)
		}
	}

	// A to before or at from: refused by every report, never an empty answer.
	for _, r := range [][2]time.Time{{boundary, before}, {boundary, boundary}} {
		from, to := rfc(r[0]), rfc(r[1])
		q := url.Values{"from": {from}, "to": {to}}
		for _, path := range []string{"/v1/usage", "/v1/requests"} {
			if code, body := get(path, q, nil); code != http.StatusBadRequest || !strings.Contains(body, "must be before") {
				t.Errorf("customer %s from %s to %s: %d %s; want 400", path, from, to, code, body)
			}
		}
		for _, path := range []string{"/admin/v1/usage", "/admin/v1/export", "/admin/v1/reconciliation", "/admin/v1/customers/" + custID + "/entries"} {
			s.adminDo("GET", path+"?"+q.Encode(), "", http.StatusBadRequest, nil)
		}
		s.adminDo("POST", "/admin/v1/rerate", `{"from":"`+from+`","to":"`+to+`"}`, http.StatusBadRequest, nil)
		for _, args := range [][]string{
			{"usage", "--customer", custID}, {"export", "--output", filepath.Join(dir, "y.csv")},
			{"reconcile"}, {"rerate"}, {"credits", "list", "--customer", custID},
		} {
			s.tgFail(exitInvalid, "must be before", append(args, "--from", from, "--to", to)...)
		}
	}

	var rec ledger.Reconciliation
	s.tgJSON(&rec, "reconcile", "--from", rfc(before), "--to", rfc(after))
	if !rec.Clean || rec.Events != 2 {
		t.Errorf("reconciliation across the boundary: clean %v, %d events; want clean, 2", rec.Clean, rec.Events)
	}
}
