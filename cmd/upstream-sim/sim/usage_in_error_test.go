package sim_test

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
)

// TestFaultUsageInError: with usage_in_error, error_after's frame carries
// the usage /stats bills for the request, whether or not the client asked
// for usage; no_usage wins; without it the frame has no usage.
func TestFaultUsageInError(t *testing.T) {
	// sim-pro, 10 tokens: 5 reasoning, 5 content in 5 chunks.
	billed := func(content int64) *sim.Usage {
		return &sim.Usage{PromptTokens: prompt, CachedTokens: prompt / 2, CompletionTokens: 5 + content, ReasoningTokens: 5}
	}
	for _, tc := range []struct {
		fault        string
		includeUsage bool
		want         *sim.Usage // the error frame's usage; nil: no usage key
	}{
		{"error_after:2,usage_in_error", true, billed(2)},
		{"error_after:2,usage_in_error", false, billed(2)},
		{"error_after:0,usage_in_error,no_done", true, billed(0)},
		{"error_after:99,usage_in_error", true, billed(5)},
		{"error_after:2,usage_in_error,no_usage", true, nil},
		{"error_after:2", true, nil},
		{"usage_in_error", true, nil}, // no error: an ordinary stream
	} {
		s, srv := start(t)
		_, data, err := post(t, srv, chatBody("sim-pro", true, tc.includeUsage, `,"max_tokens":10`), "X-Sim-Fault", tc.fault)
		if err != nil {
			t.Fatal(tc.fault, err)
		}
		fr := frames(t, data)
		if fr[len(fr)-1] == "[DONE]" {
			fr = fr[:len(fr)-1]
		}
		last := decode(t, fr[len(fr)-1])
		st := waitStats(t, s, 1)
		if !strings.Contains(tc.fault, "error_after") {
			if _, isErr := last.Raw["error"]; isErr || st.Requests.OK != 1 {
				t.Errorf("%s: last frame %s, stats %+v", tc.fault, fr[len(fr)-1], st.Requests)
			}
			continue
		}
		if _, isErr := last.Raw["error"]; !isErr || st.Requests.StreamError != 1 {
			t.Fatalf("%s: last frame %s, stats %+v", tc.fault, fr[len(fr)-1], st.Requests)
		}
		_, hasUsage := last.Raw["usage"]
		switch {
		case tc.want == nil && hasUsage:
			t.Errorf("%s: error frame %s has usage", tc.fault, fr[len(fr)-1])
		case tc.want != nil && (last.Usage == nil || last.Usage.usage(t) != *tc.want):
			t.Errorf("%s: error frame %s, want usage %+v", tc.fault, fr[len(fr)-1], *tc.want)
		case tc.want != nil && st.Usage() != *tc.want:
			t.Errorf("%s: /stats billed %+v, the frame says %+v", tc.fault, st.Usage(), *tc.want)
		}
	}
}
