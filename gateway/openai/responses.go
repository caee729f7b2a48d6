package openai

import (
	"encoding/json"
	"strings"

	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// Responses API (POST /v1/responses). Source: OpenAI API reference,
// "Responses" and "Streaming events": usage arrives once, on the response
// object of response.completed (or response.incomplete / response.failed),
// as input_tokens (cache reads included, input_tokens_details.cached_tokens
// a subset) and output_tokens (reasoning included,
// output_tokens_details.reasoning_tokens a subset).

// responsesUsage is the Responses API's usage object. Its counts are read
// as tap.Count (an integral number however written, or a string holding
// one), and its details objects are read when they are objects: a field of
// another type is not the whole event lost (see responsesEvent).
type responsesUsage struct {
	InputTokens         tap.Count       `json:"input_tokens"`
	InputTokensDetails  json.RawMessage `json:"input_tokens_details"`
	OutputTokens        tap.Count       `json:"output_tokens"`
	OutputTokensDetails json.RawMessage `json:"output_tokens_details"`
}

type usageDetails struct {
	CachedTokens    tap.Count `json:"cached_tokens"`
	ReasoningTokens tap.Count `json:"reasoning_tokens"`
}

// meter converts u into normalized usage; ok is false when a count it
// bills could not be read: such a usage object is no report at all (the
// usage is then estimated), as Gemini's and Anthropic's are. A details
// member that is not an object counts none of its subset (all input at the
// input price; no reasoning broken out).
func (u *responsesUsage) meter() (t usage.Tokens, ok bool) {
	var in, out usageDetails
	_ = json.Unmarshal(u.InputTokensDetails, &in) // not an object: no subset
	_ = json.Unmarshal(u.OutputTokensDetails, &out)
	if u.InputTokens < 0 || u.OutputTokens < 0 || in.CachedTokens < 0 || out.ReasoningTokens < 0 {
		return t, false
	}
	return usage.Tokens{PromptTokens: int64(u.InputTokens), CachedTokens: int64(in.CachedTokens),
		CompletionTokens: int64(u.OutputTokens), ReasoningTokens: int64(out.ReasoningTokens)}, true
}

// responseObject is the response object of a Responses API event, or a
// whole non-streamed response. Its members are held raw and read one by
// one, so that one of another type than the API's (a number where a string
// is) loses only itself.
type responseObject struct {
	Model             json.RawMessage `json:"model"`
	Status            json.RawMessage `json:"status"`
	Usage             json.RawMessage `json:"usage"`
	Error             json.RawMessage `json:"error"`
	IncompleteDetails json.RawMessage `json:"incomplete_details"`
}

// responsesEvent is one stream event's data, held raw as responseObject
// is: an event with a field of another type (a number where the API sends
// a string) still has its delta counted, which its client reads.
type responsesEvent struct {
	Type     json.RawMessage `json:"type"`
	Delta    json.RawMessage `json:"delta"`
	Response json.RawMessage `json:"response"`
	Item     json.RawMessage `json:"item"` // response.output_item.done's
}

// text reads a JSON string; false for anything else.
func text(raw json.RawMessage) (string, bool) {
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// addText adds raw to r's output: the string it holds, or, for a value of
// another kind (not null), its bytes, which reach the client all the same.
func addText(raw json.RawMessage, r *tap.Report, reasoning bool) {
	s, ok := text(raw)
	switch {
	case !ok && len(raw) > 0 && string(raw) != "null":
		r.AddOutputBytes(raw)
	case reasoning:
		r.AddReasoning(s)
	default:
		r.AddOutput(s)
	}
}

// responsesUsageKeys are the members of a Responses API usage object
// (see tap.AmbiguousUsage).
var responsesUsageKeys = tap.UsageKeys{
	"input_tokens": nil, "input_tokens_details": {"cached_tokens": nil},
	"output_tokens": nil, "output_tokens_details": {"reasoning_tokens": nil}, "total_tokens": nil,
}

// ResponsesTap reads usage from a Responses API stream. It satisfies the
// gateway's stream tap; one serves one stream.
type ResponsesTap struct {
	// deltas says a .delta event carried output; whole that an output
	// item sent whole (response.output_item.done) was counted before
	// any: a stream's output is counted from one or the other, once.
	deltas, whole bool
}

// Event observes one stream event.
func (t *ResponsesTap) Event(sev *sse.Event, r *tap.Report) {
	data := sev.Data
	var ev responsesEvent
	// An error frame may be named by its event alone (DESIGN: "a named
	// event: error frame"), whatever its data says; text in its data is
	// still counted below, as a client that reads the data may show it.
	named := string(sev.Type) == "error"
	if !sev.HasData || json.Unmarshal(data, &ev) != nil {
		if sev.HasData && t.shallowEvent(sev, r) {
			return
		}
		if named {
			r.Error, r.FinishReason = "upstream error event: "+string(data), "error"
		}
		return
	}
	typ, _ := text(ev.Type)
	if named && typ != "error" {
		r.Error, r.FinishReason = "upstream error event: "+string(data), "error"
	}
	switch {
	case typ == "error":
		r.Error, r.FinishReason = "upstream error event: "+string(data), "error"
	case strings.HasSuffix(typ, ".delta") && strings.Contains(typ, "reasoning"):
		// A summary is a few tokens standing for the reasoning, not the
		// reasoning: counted as output, it leaves the reasoning hidden
		// (tap.Report.ReasoningShown), as it is. response.reasoning_text.delta
		// is the reasoning itself.
		addText(ev.Delta, r, !strings.Contains(typ, "reasoning_summary"))
		t.deltas = true
	case strings.HasSuffix(typ, ".delta") && !strings.Contains(typ, "audio"):
		addText(ev.Delta, r, false)
		t.deltas = true
	case typ == "response.output_item.done" && !t.deltas:
		// An item sent whole, no .delta before it (a compatible server,
		// or a function call's short arguments): what the client has of
		// it, counted now, so that a stream cut off before its end bills
		// it (it billed 0 output tokens).
		addOutputItem(ev.Item, r)
		t.whole = true
	}
	if _, folded, _ := jsonscan.FoldedKey(data); folded && typ != "error" && !named {
		// Two keys one in case: encoding/json read the last, a client's
		// SDK may read the other ({"delta":"…","Delta":""}). The event
		// whole is counted as output: never free, whatever a client reads.
		r.AddOutputBytes(data)
	}
	var resp *responseObject
	if len(ev.Response) > 0 && string(ev.Response) != "null" {
		resp = new(responseObject)
		if json.Unmarshal(ev.Response, resp) == nil {
			if observeResponse(resp, r) {
				// This response's usage is the report now, which the
				// client reads as its SDK does (see tap.AmbiguousUsage).
				_, bad, _ := jsonscan.AmbiguousKey(data, "response")
				r.AmbiguousUsage = bad || tap.AmbiguousUsage(ev.Response, "usage", responsesUsageKeys)
			}
		}
	}
	switch typ {
	case "response.failed":
		if r.Error == "" { // a failure, whatever its response object says (or lacks)
			r.Error, r.FinishReason = "response failed: "+failure(resp), "error"
		}
		r.Ended = true
	case "response.completed", "response.incomplete":
		r.Ended = true // the stream's last event: nothing follows it
	}
	if r.Ended && !t.deltas && !t.whole && r.Output.Len() == 0 && resp != nil {
		// No .delta event carried the answer (a compatible server that
		// sends only the .done events and the final response): its output
		// items are what the client read. Estimated from nothing, a review
		// saw such an answer billed 0 completion tokens, where the same
		// answer not streamed is counted.
		var o struct {
			Output json.RawMessage `json:"output"`
		}
		if json.Unmarshal(ev.Response, &o) == nil {
			addOutputItems(o.Output, r)
		}
	}
}

// failure is what a failed response says of its error, or that it gave none.
func failure(resp *responseObject) string {
	if resp == nil || len(resp.Error) == 0 || string(resp.Error) == "null" {
		return "the upstream gave no error"
	}
	return string(resp.Error)
}

// shallowEvent taps sev when its data is valid JSON nested past
// encoding/json's 10,000 levels (a hostile upstream's member beside the
// event's own), read as its members within jsonscan.MaxDepth levels
// (jsonscan.Shallow), and reports whether it did. Not inlined: Event's
// frame, which the relay's stack holds, stays as small.
//
//go:noinline
func (t *ResponsesTap) shallowEvent(sev *sse.Event, r *tap.Report) bool {
	data, ok := jsonscan.Shallow(sev.Data)
	if ok {
		shallow := *sev
		shallow.Data = data
		t.Event(&shallow, r)
	}
	return ok
}

// ResponsesBody reads the usage of a non-streamed Responses API response,
// and its output (message text, reasoning summaries, a reasoning item's own
// text, function calls' names and arguments) for an estimate when it
// carries no usage. Members are read one by one, as a stream's events are:
// one of another type than the API's loses only itself (a text that is no
// string is counted by its bytes). A body with a non-null "error" and
// neither a status nor output (an error under a 200) records the error in
// r. It returns an error only for a body that is not a JSON object.
func ResponsesBody(body []byte, r *tap.Report) error {
	var resp struct {
		responseObject
		Output json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		if shallow, ok := jsonscan.Shallow(body); ok {
			// Valid JSON nested past encoding/json's 10,000 levels (a
			// hostile upstream's member beside the response's own): read
			// as its members within jsonscan.MaxDepth levels.
			return ResponsesBody(shallow, r)
		}
		return err
	}
	if _, folded, _ := jsonscan.FoldedKey(body); folded {
		r.AddOutputBytes(body) // as a stream's event (see ResponsesTap.Event)
	}
	items := addOutputItems(resp.Output, r)
	observeResponse(&resp.responseObject, r)
	r.AmbiguousUsage = tap.AmbiguousUsage(body, "usage", responsesUsageKeys)
	r.Final = r.Reported
	if status, _ := text(resp.Status); status == "" && len(items) == 0 && r.Error == "" &&
		len(resp.Error) > 0 && string(resp.Error) != "null" {
		// No response at all, an error object under a 200: failed, as on
		// the chat route, and billed nothing if it reported nothing.
		r.Error, r.FinishReason = "upstream error body: "+string(resp.Error), "error"
	}
	return nil
}

// texts returns the "text" members of the objects in raw, a JSON array
// (content parts, summary parts); none for anything else.
func texts(raw json.RawMessage) []json.RawMessage {
	var parts []json.RawMessage
	if json.Unmarshal(raw, &parts) != nil {
		return nil
	}
	out := make([]json.RawMessage, 0, len(parts))
	for _, p := range parts {
		var part struct{ Text json.RawMessage }
		if json.Unmarshal(p, &part) == nil {
			out = append(out, part.Text)
		}
	}
	return out
}

// addOutputItems counts the text of a response's output items (output, a
// JSON array) as produced output: messages' content, reasoning items'
// content (the reasoning's own text) and summaries, function calls' names
// and arguments. It returns the items.
func addOutputItems(output json.RawMessage, r *tap.Report) []json.RawMessage {
	var items []json.RawMessage
	_ = json.Unmarshal(output, &items) // not an array: no output items
	for _, raw := range items {
		addOutputItem(raw, r)
	}
	return items
}

// addOutputItem adds one output item's output to r: its text, a reasoning
// item's own text as reasoning, a summary, a function call's name and
// arguments. An item that is not an object adds nothing.
func addOutputItem(raw json.RawMessage, r *tap.Report) {
	var o struct {
		Type, Name, Arguments json.RawMessage
		Content, Summary      json.RawMessage
	}
	if json.Unmarshal(raw, &o) != nil {
		return
	}
	typ, _ := text(o.Type)
	for _, c := range texts(o.Content) {
		addText(c, r, typ == "reasoning") // a reasoning item's content: the reasoning's own text (open models)
	}
	for _, c := range texts(o.Summary) {
		addText(c, r, false) // a summary: the reasoning stays hidden (see Event)
	}
	addText(o.Name, r, false)
	addText(o.Arguments, r, false)
}

// observeResponse records what a response object says: the model served,
// the finish reason its status means (an incomplete one's by its
// incomplete_details.reason: "length" for max_output_tokens,
// "content_filter" for a content filter's), and its usage, final once the status
// is a terminal one. It reports whether it took a usage report.
func observeResponse(resp *responseObject, r *tap.Report) bool {
	if model, _ := text(resp.Model); model != "" {
		r.ServedModel = model
	}
	status, _ := text(resp.Status)
	switch status {
	case "completed":
		r.FinishReason = "stop"
	case "incomplete":
		r.FinishReason = "length" // max_output_tokens, the reason but one
		var d struct{ Reason json.RawMessage }
		if json.Unmarshal(resp.IncompleteDetails, &d) == nil {
			if reason, _ := text(d.Reason); reason == "content_filter" {
				r.FinishReason = "content_filter"
			}
		}
	case "failed":
		r.FinishReason = "error"
		if r.Error == "" {
			r.Error = "response failed: " + failure(resp)
		}
	}
	if len(resp.Usage) == 0 || string(resp.Usage) == "null" {
		return false
	}
	var u responsesUsage
	if json.Unmarshal(resp.Usage, &u) != nil {
		return false // no report: the usage is estimated
	}
	t, ok := u.meter()
	if !ok {
		return false // no report: the usage is estimated
	}
	r.SetUsage(t)
	if status == "completed" || status == "incomplete" || status == "failed" {
		r.MarkFinal()
	} else {
		r.Final = false
	}
	return true
}

// ResponsesBilledUsage sets a non-streamed response's "usage" to t, in the
// Responses API's shape (input_tokens with input_tokens_details.cached_tokens,
// output_tokens with output_tokens_details.reasoning_tokens, total_tokens).
// It returns body unchanged when it is not a JSON object.
func ResponsesBilledUsage(body []byte, t usage.Tokens) []byte {
	u, err := json.Marshal(map[string]any{
		"input_tokens":          t.PromptTokens,
		"input_tokens_details":  map[string]int64{"cached_tokens": t.CachedTokens},
		"output_tokens":         t.CompletionTokens,
		"output_tokens_details": map[string]int64{"reasoning_tokens": t.ReasoningTokens},
		"total_tokens":          t.Total(),
	})
	if err != nil {
		return body
	}
	return jsonscan.ReplaceMember(body, "usage", u)
}

// ResponsesBilledEnd sets, in the data of a stream's last event
// (response.completed, response.incomplete or response.failed), the
// response's "usage" to t (ResponsesBilledUsage). It returns data
// unchanged when it holds no response object.
func ResponsesBilledEnd(data []byte, t usage.Tokens) []byte {
	resp, ok, err := jsonscan.Member(data, "response")
	if err != nil || !ok || len(resp) == 0 || resp[0] != '{' {
		return data
	}
	return jsonscan.ReplaceMember(data, "response", ResponsesBilledUsage(resp, t))
}
