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
