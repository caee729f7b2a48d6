package sim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
)

type envelope struct {
	Error *struct {
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
	} `json:"error"`
}

func TestBadInput(t *testing.T) {
	s, srv := start(t)
	for _, tc := range []struct{ body, header string }{
		{`{"model":`, ""},
		{`not json`, ""},
		{`{"messages":[{"role":"user","content":"x"}]}`, ""},
		{`{"model":"","messages":[{"role":"user","content":"x"}]}`, ""},
		{`{"model":"m"}`, ""},
		{`{"model":"m","messages":[{"role":"user","content":5}]}`, ""},
		{`{"model":"m","stream":"yes","messages":[{"role":"user","content":"x"}]}`, ""},
		{chatBody("m", true, false, `,"max_tokens":0`), ""},
		{chatBody("m", true, false, `,"metadata":{"sim_chunks":"0"}`), ""},
		{chatBody("m", true, false, `,"metadata":{"sim_chunks":5}`), ""},
		{chatBody("m", true, false, ""), "disconnect_after"},
		{chatBody("m", true, false, ""), "stall,error_after:1"},
		{chatBody("m", true, false, ""), "no_usage:3"},
		{chatBody("m", true, false, ""), "explode"},
		{chatBody("m", true, false, `,"metadata":{"sim_status":"200"}`), ""},
		{chatBody("m", true, false, `,"metadata":{"sim_delay_ms":"-1"}`), ""},
	} {
		var hdr []string
		if tc.header != "" {
			hdr = []string{"X-Sim-Fault", tc.header}
		}
		resp, data, _ := post(t, srv, tc.body, hdr...)
		var e envelope
		if err := json.Unmarshal([]byte(data), &e); err != nil || resp.StatusCode != http.StatusBadRequest ||
			e.Error == nil || e.Error.Type != "invalid_request_error" || e.Error.Message == "" || string(e.Error.Code) != "null" {
			t.Errorf("%s %s: status %d body %s", tc.body, tc.header, resp.StatusCode, data)
		}
	}
	st := s.Stats()
	if st.Requests.BadRequest != 16 || st.Requests.Total != 16 || st.Usage() != (sim.Usage{}) {
		t.Errorf("stats %+v", st)
	}
}

func TestStatusControl(t *testing.T) {
	s, srv := start(t)
	for _, tc := range []struct {
		status    int
		typ, code string
		stream    bool
	}{
		{503, "server_error", "null", true},
		{500, "server_error", "null", false},
		{429, "requests", `"rate_limit_exceeded"`, true},
		{401, "invalid_request_error", `"invalid_api_key"`, false},
	} {
		resp, data, _ := post(t, srv, chatBody("sim-small", tc.stream, false, ""), "X-Sim-Status", itoa(tc.status))
		var e envelope
		if err := json.Unmarshal([]byte(data), &e); err != nil || resp.StatusCode != tc.status || e.Error == nil ||
			e.Error.Type != tc.typ || string(e.Error.Code) != tc.code || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%d: status %d body %s", tc.status, resp.StatusCode, data)
		}
	}
	if st := s.Stats(); st.Requests.Status != 4 || st.Usage() != (sim.Usage{}) {
		t.Errorf("stats %+v", st)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestStatsAccounting runs a concurrent mix of requests and checks the sums,
// then the reset endpoint.
func TestStatsAccounting(t *testing.T) {
	s, srv := start(t)
	type req struct {
		body, fault string
		outcome     func(sim.RequestStats) int64
		usage       sim.Usage
	}
	reqs := []req{
		{chatBody("sim-pro", true, true, ""), "", func(r sim.RequestStats) int64 { return r.OK },
			sim.Usage{PromptTokens: 9, CachedTokens: 4, CompletionTokens: 16, ReasoningTokens: 8}},
		{chatBody("sim-cache", false, false, `,"max_tokens":4`), "", func(r sim.RequestStats) int64 { return r.OK },
			sim.Usage{PromptTokens: 9, CachedTokens: 4, CompletionTokens: 4}},
		{chatBody("sim-small", true, false, ""), "no_usage", func(r sim.RequestStats) int64 { return r.OK },
			sim.Usage{PromptTokens: 9, CompletionTokens: 16}},
		{chatBody("sim-reasoning", true, false, `,"max_tokens":10`), "error_after:2", func(r sim.RequestStats) int64 { return r.StreamError },
			sim.Usage{PromptTokens: 9, CompletionTokens: 5 + 2, ReasoningTokens: 5}},
		{chatBody("sim-small", true, false, ""), "disconnect_after:0", func(r sim.RequestStats) int64 { return r.Disconnected },
			sim.Usage{PromptTokens: 9}},
		{`{"model":1}`, "", func(r sim.RequestStats) int64 { return r.BadRequest }, sim.Usage{}},
	}
	const rounds = 20
	var wg sync.WaitGroup
	for range rounds {
		for _, r := range reqs {
			wg.Go(func() {
				hreq, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(r.body))
				if r.fault != "" {
					hreq.Header.Set("X-Sim-Fault", r.fault)
				}
				if resp, err := srv.Client().Do(hreq); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		}
	}
	wg.Wait()
	st := waitStats(t, s, rounds*int64(len(reqs)))
	var want sim.Usage
	for _, r := range reqs {
		want.PromptTokens += rounds * r.usage.PromptTokens
		want.CachedTokens += rounds * r.usage.CachedTokens
		want.CompletionTokens += rounds * r.usage.CompletionTokens
		want.ReasoningTokens += rounds * r.usage.ReasoningTokens
	}
	r := st.Requests
	if st.Usage() != want || r.Total != rounds*6 || r.OK != rounds*3 || r.StreamError != rounds || r.Disconnected != rounds || r.BadRequest != rounds {
		t.Errorf("stats %+v, want usage %+v", st, want)
	}

	resp, err := srv.Client().Post(srv.URL+"/stats/reset", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = srv.Client().Get(srv.URL + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got sim.Stats
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil || !reflect.DeepEqual(got, sim.Stats{}) {
		t.Errorf("after reset: %+v, %v", got, err)
	}
}
