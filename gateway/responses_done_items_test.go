package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestResponsesItemsSentOnlyWholeAreCountedWhenCut: a Responses API
// server may send an output item only whole, in response.output_item.done,
// with no .delta events (a compatible server; OpenAI's function calls
// with short arguments). Counted only at response.completed, such a stream
// cut off before its end billed 0 output tokens though the client had the
// whole function call (a review). Each item sent whole is counted as it
// comes, once: with the final response's output too, or after deltas, no
// more.
func TestResponsesItemsSentOnlyWholeAreCountedWhenCut(t *testing.T) {
	args := strings.Repeat("ledger ", 300) // about 300 tokens
	ev := func(typ, rest string) string {
		return "event: " + typ + "\ndata: {\"type\":\"" + typ + "\"" + rest + "}\n\n"
	}
	item := `{"type":"function_call","id":"fc_1","call_id":"call_1","name":"record","arguments":"` + args + `","status":"completed"}`
	whole := ev("response.created", `,"response":{"id":"resp_1","status":"in_progress","model":"m"}`) +
		ev("response.output_item.done", `,"output_index":0,"item":`+item)
	completed := ev("response.completed", `,"response":{"id":"resp_1","status":"completed","model":"m","output":[`+item+`]}`)
	deltas := ev("response.created", `,"response":{"id":"resp_1","status":"in_progress","model":"m"}`) +
		ev("response.function_call_arguments.delta", `,"output_index":0,"delta":"`+args+`"`) +
		ev("response.output_item.done", `,"output_index":0,"item":`+item)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		switch in := string(body); {
		case strings.Contains(in, "cut"):
			_, _ = io.WriteString(w, whole)
		case strings.Contains(in, "completed"):
			_, _ = io.WriteString(w, whole+completed)
		case strings.Contains(in, "deltas"):
			_, _ = io.WriteString(w, deltas+completed)
		}
	}))
	t.Cleanup(up.Close)
	st := oneProviderStack(t, "openai", up.URL)
	var alone int64
	for _, input := range []string{"cut", "completed", "deltas"} {
		e, _ := doRequest(t, st, "/v1/responses", `{"model":"m","stream":true,"input":"`+input+`"}`)
		if input == "cut" {
			alone = e.Usage.CompletionTokens
			if alone < 300 {
				t.Fatalf("cut after the function call was sent whole: %s %s %+v; want its ~300 tokens billed", e.Status, e.UsageSource, e.Usage)
			}
			continue
		}
		// With deltas the call's name is not counted (it came in
		// response.output_item.added, which no count reads): a token less.
		if got := e.Usage.CompletionTokens; got > alone || got < alone-2 {
			t.Errorf("%s: %d completion tokens; want about %d, the call counted once", input, got, alone)
		}
	}
}
