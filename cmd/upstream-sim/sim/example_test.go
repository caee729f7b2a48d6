package sim_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/tollgate-dev/tollgate/cmd/upstream-sim/sim"
)

// Run the simulator in-process and compare its billed usage with the rule.
func Example() {
	s := sim.New()
	srv := httptest.NewServer(s)
	defer srv.Close()

	body := `{"model":"sim-pro","max_tokens":8,"messages":[{"role":"user","content":"say hi"}]}`
	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	want, _ := sim.ExpectedUsage([]byte(body))
	fmt.Printf("expected %+v\n", want)
	fmt.Printf("billed   %+v\n", s.Stats().Usage())
	// Output:
	// expected {PromptTokens:9 CachedTokens:4 CompletionTokens:8 ReasoningTokens:4}
	// billed   {PromptTokens:9 CachedTokens:4 CompletionTokens:8 ReasoningTokens:4}
}

// The usage of the same request in Anthropic's and Gemini's terms.
func ExampleExpectedAnthropicUsage() {
	u, _ := sim.ExpectedAnthropicUsage([]byte(`{"model":"sim-pro","max_tokens":8,"stream":true,
		"messages":[{"role":"user","content":"say hi"}]}`))
	fmt.Printf("input_tokens=%d cache_read_input_tokens=%d output_tokens=%d (thinking %d)\n",
		u.PromptTokens-u.CachedTokens, u.CachedTokens, u.CompletionTokens, u.ReasoningTokens)
	// Output: input_tokens=5 cache_read_input_tokens=4 output_tokens=8 (thinking 4)
}

func ExampleExpectedGeminiUsage() {
	u, _ := sim.ExpectedGeminiUsage("sim-pro", []byte(`{"contents":[{"parts":[{"text":"say hi"}]}],
		"generationConfig":{"maxOutputTokens":8}}`))
	fmt.Printf("promptTokenCount=%d cachedContentTokenCount=%d candidatesTokenCount=%d thoughtsTokenCount=%d totalTokenCount=%d\n",
		u.PromptTokens, u.CachedTokens, u.CompletionTokens-u.ReasoningTokens, u.ReasoningTokens, u.TotalTokens())
	// Output: promptTokenCount=9 cachedContentTokenCount=4 candidatesTokenCount=4 thoughtsTokenCount=4 totalTokenCount=17
}
