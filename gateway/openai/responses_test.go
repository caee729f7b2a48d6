package openai

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/fixture"
	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// TestResponsesCountsWebSearchCalls: the web_search tool is billed per
// call beside the tokens, and a response lists each call as a
// web_search_call output item. They were not counted: a client could run
// up searches the ledger never billed (the price book's web_search fee
// applied to Anthropic's server tool alone). (Found by an attacker's
// review.) The recorded gpt-5 stream's completed response lists one.
func TestResponsesCountsWebSearchCalls(t *testing.T) {
	dir, err := fixture.Dir()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, "openai-responses", "web-search-cached-reasoning-usage.sse"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r tap.Report
	rd := sse.NewReader(f)
	for {
		ev, err := rd.Next()
		if err != nil {
			break
		}
		ResponsesTap{}.Event(&ev, &r)
	}
	if !r.Reported || r.Usage.WebSearchRequests != 1 || r.Usage.PromptTokens != 9463 {
		t.Errorf("stream: reported %v, usage %+v; want the upstream's, with 1 web search", r.Reported, r.Usage)
	}

	body := []byte(`{"id":"resp_1","object":"response","status":"completed","model":"gpt-5",
		"output":[{"type":"web_search_call","id":"ws_1","status":"completed"},{"type":"reasoning","summary":[]},
		  {"type":"web_search_call","id":"ws_2","status":"completed"},
		  {"type":"message","content":[{"type":"output_text","text":"Sunny."}]}],
		"usage":{"input_tokens":900,"output_tokens":40,"output_tokens_details":{"reasoning_tokens":20}}}`)
	var b tap.Report
	if err := ResponsesBody(body, &b); err != nil {
		t.Fatal(err)
	}
	if b.Usage.WebSearchRequests != 2 || b.Usage.PromptTokens != 900 || b.Usage.CompletionTokens != 40 {
		t.Errorf("body: usage %+v; want 900 prompt, 40 completion, 2 web searches", b.Usage)
	}
}
