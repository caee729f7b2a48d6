package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/ledger"
	"github.com/tollgate-dev/tollgate/ledger/api"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// TestRerateAnswersAsItGoes: a re-rating takes minutes on a busy month,
// and was one request answered only at its end, with nothing to show how
// far it was. A client accepting application/x-ndjson now gets progress
// lines as batches commit, then the result; and a re-rating that stops at
// an event it cannot rate says so with what its committed batches did,
// which the JSON answer (409 alone) cannot.
func TestRerateAnswersAsItGoes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	a, aKey, _ := s.customer(`{"name":"a","currency":"IDR"}`)
	jan, feb := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
	var events []usage.Event
	for i := range 50 {
		events = append(events, event(a, aKey, "m", jan.Add(time.Duration(i)*time.Hour), usage.Tokens{PromptTokens: 1000}))
	}
	// Stored unpriced at cost 0; at 10,000 IDR per million tokens its
	// billion tokens cost beyond int64 e12 units, in a batch of its own.
	huge := event(a, aKey, "m", jan.Add(20*24*time.Hour), usage.Tokens{PromptTokens: 1_000_000_000})
	s.write(append(events, huge)...)
	s.adm("POST", "/admin/v1/prices", `{"model":"m","currency":"IDR","input":"10000","output":"0","effective_from":"2025-01-01T00:00:00Z"}`, http.StatusCreated, nil)

	// The client's progress, then the result and the error together.
	var seen []ledger.RerateProgress
	res, err := s.client().Rerate(context.Background(), jan, feb, func(p ledger.RerateProgress) { seen = append(seen, p) })
	wantCode(t, "Rerate over the unrateable event", err, ledger.EConflict, huge.ID)
	if res.Examined != 50 || res.Adjusted != 50 || res.Priced != 50 {
		t.Errorf("Rerate = %+v; want the 50 events before the unrateable one examined, adjusted and priced", res)
	}
	if len(seen) == 0 || !seen[0].Through.Equal(jan) || seen[0].Examined != 0 {
		t.Errorf("progress = %+v; want a first line at once, through the range's start", seen)
	}
	bal, err := s.client().Balance(context.Background(), a)
	noErr(t, "Balance", err)
	if bal.Charges != "500" { // 50 × 1,000 tokens × 10,000 IDR per million
		t.Errorf("charges after the stopped re-rating = %s, want 500: the committed batches", bal.Charges)
	}

	// The stream as it is on the wire, once the range is re-rateable.
	stream := func(accept string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest("POST", s.admin+"/admin/v1/rerate", strings.NewReader(`{"from":"2026-01-01","to":"2026-01-10"}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		return resp, body.Bytes()
	}
	resp, body := stream("application/json, application/x-ndjson")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("ndjson answer: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var lines []api.RerateLine
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		var l api.RerateLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	last := lines[len(lines)-1]
	if len(lines) < 2 || lines[0].Progress == nil || last.Result == nil || last.Error != nil ||
		last.Result.Examined != 50 || last.Result.Adjusted != 0 {
		t.Errorf("ndjson answer:\n%s\nwant progress lines, then the result: 50 examined, none adjusted (done before)", body)
	}

	// Without asking for it (or refusing it, q=0), one JSON object.
	for _, accept := range []string{"", "application/json", "application/x-ndjson;q=0, application/json"} {
		resp, body := stream(accept)
		var r ledger.RerateResult
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") ||
			json.Unmarshal(body, &r) != nil || r.Examined != 50 {
			t.Errorf("Accept %q: %d %s %s; want one JSON result", accept, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
}
