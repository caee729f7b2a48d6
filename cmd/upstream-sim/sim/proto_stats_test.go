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

// TestStatsByProtocol runs a concurrent mix of the three protocols and checks
// the per-protocol sums, that they add up to the totals, and GET /stats.
func TestStatsByProtocol(t *testing.T) {
	s, srv := start(t)
	type req struct {
		proto     sim.Protocol
		path      string
		body      string
		fault     string
		expect    func() (sim.Usage, error) // the full usage
		truncated *sim.Usage                // the billed usage when a fault cuts the stream
	}
	anth := func(b string) func() (sim.Usage, error) {
		return func() (sim.Usage, error) { return sim.ExpectedAnthropicUsage([]byte(b)) }
	}
	gem := func(m, b string) func() (sim.Usage, error) {
		return func() (sim.Usage, error) { return sim.ExpectedGeminiUsage(m, []byte(b)) }
	}
	chat := func(b string) func() (sim.Usage, error) {
		return func() (sim.Usage, error) { return sim.ExpectedUsage([]byte(b)) }
	}
	ab1, ab2 := anthBody("sim-pro", true, 100, ""), anthBody("sim-cache", false, 6, "")
	gb1, gb2 := gemBody(0, true, ""), gemBody(5, false, "")
	cb := chatBody("sim-reasoning", true, true, `,"max_tokens":6`)
	reqs := []req{
		{sim.Anthropic, "/v1/messages", ab1, "", anth(ab1), nil},
		{sim.Anthropic, "/anthropic/v1/messages", ab2, "", anth(ab2), nil},
		{sim.Anthropic, "/v1/messages", ab1, "error_after:3", nil, &sim.Usage{PromptTokens: 9, CachedTokens: 4, CompletionTokens: 8 + 3, ReasoningTokens: 8}},
		{sim.Gemini, gemPath("sim-pro"), gb1, "", gem("sim-pro", gb1), nil},
		{sim.Gemini, "/gemini/v1beta/models/sim-small:generateContent", gb2, "", gem("sim-small", gb2), nil},
		{sim.Gemini, gemPath("sim-reasoning"), gb2, "disconnect_after:1", nil, &sim.Usage{PromptTokens: 9, CompletionTokens: 2 + 1, ReasoningTokens: 2}},
		{sim.OpenAI, "/v1/chat/completions", cb, "", chat(cb), nil},
	}
	const rounds = 10
	var wg sync.WaitGroup
	for range rounds {
		for _, r := range reqs {
			wg.Go(func() {
				hreq, _ := http.NewRequest(http.MethodPost, srv.URL+r.path, strings.NewReader(r.body))
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
	want := map[sim.Protocol]sim.Usage{}
	for _, r := range reqs {
		u := r.truncated
		if u == nil {
			full, err := r.expect()
			if err != nil {
				t.Fatal(err)
			}
			u = &full
		}
		w := want[r.proto]
		w.PromptTokens += rounds * u.PromptTokens
		w.CachedTokens += rounds * u.CachedTokens
		w.CompletionTokens += rounds * u.CompletionTokens
		w.ReasoningTokens += rounds * u.ReasoningTokens
		want[r.proto] = w
	}
	var sum sim.Usage
	for _, p := range []sim.Protocol{sim.OpenAI, sim.Anthropic, sim.Gemini} {
		got := st.ByProtocol.Get(p)
		if got.Usage() != want[p] {
			t.Errorf("%s: billed %+v, want %+v", p, got.Usage(), want[p])
		}
		sum.PromptTokens += got.PromptTokens
		sum.CachedTokens += got.CachedTokens
		sum.CompletionTokens += got.CompletionTokens
		sum.ReasoningTokens += got.ReasoningTokens
	}
	a, g, o := st.ByProtocol.Anthropic.Requests, st.ByProtocol.Gemini.Requests, st.ByProtocol.OpenAI.Requests
	if sum != st.Usage() || a.OK != 2*rounds || a.StreamError != rounds || g.OK != 2*rounds || g.Disconnected != rounds ||
		o.OK != rounds || st.Requests.Total != rounds*int64(len(reqs)) || st.Requests.OK != 5*rounds {
		t.Errorf("stats %+v", st)
	}

	resp, err := srv.Client().Get(srv.URL + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw struct {
		Requests   sim.RequestStats `json:"requests"`
		ByProtocol map[string]struct {
			Requests     sim.RequestStats `json:"requests"`
			PromptTokens int64            `json:"prompt_tokens"`
		} `json:"by_protocol"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil || raw.Requests != st.Requests ||
		raw.ByProtocol["gemini"].Requests != g || raw.ByProtocol["anthropic"].PromptTokens != st.ByProtocol.Anthropic.PromptTokens {
		t.Errorf("GET /stats %+v, %v", raw, err)
	}
	s.ResetStats()
	if st := s.Stats(); !reflect.DeepEqual(st, sim.Stats{}) {
		t.Errorf("after reset %+v", st)
	}
}
