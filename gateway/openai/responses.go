package openai

import (
	"encoding/json"
	"strings"

	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
)

// Responses API (POST /v1/responses). Source: OpenAI API reference,
// "Responses" and "Streaming events": usage arrives once, on the response
// object of response.completed (or response.incomplete / response.failed),
// as input_tokens (cache reads included, input_tokens_details.cached_tokens
// a subset) and output_tokens (reasoning included,
// output_tokens_details.reasoning_tokens a subset).

// ResponsesUsage is the Responses API's usage object.
type ResponsesUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

// Meter converts u into normalized usage.
func (u *ResponsesUsage) Meter() usage.Tokens {
	return usage.Tokens{PromptTokens: u.InputTokens, CachedTokens: u.InputTokensDetails.CachedTokens,
		CompletionTokens: u.OutputTokens, ReasoningTokens: u.OutputTokensDetails.ReasoningTokens}
}

type responseObject struct {
	Model  string          `json:"model"`
	Status string          `json:"status"`
	Usage  *ResponsesUsage `json:"usage"`
	Error  json.RawMessage `json:"error"`
}

type responsesEvent struct {
	Type     string          `json:"type"`
	Delta    string          `json:"delta"`
	Response *responseObject `json:"response"`
	Error    json.RawMessage `json:"error"`
	Message  string          `json:"message"`
}

// ResponsesTap reads usage from a Responses API stream. It satisfies the
// gateway's stream tap.
type ResponsesTap struct{}

// Event observes one stream event.
func (ResponsesTap) Event(sev *sse.Event, r *tap.Report) {
	data := sev.Data
	var ev responsesEvent
	if !sev.HasData || json.Unmarshal(data, &ev) != nil {
		return
	}
	switch {
	case ev.Type == "error":
		r.Error, r.FinishReason = "upstream error event: "+string(data), "error"
	case strings.HasSuffix(ev.Type, ".delta") && strings.Contains(ev.Type, "reasoning"):
		if strings.Contains(ev.Type, "reasoning_summary") {
			// A summary is a few tokens standing for the reasoning, not the
			// reasoning: counted as output, it leaves the reasoning hidden
			// (tap.Report.ReasoningShown), as it is.
			r.AddOutput(ev.Delta)
		} else {
			r.AddReasoning(ev.Delta) // response.reasoning_text.delta: the reasoning itself
		}
	case strings.HasSuffix(ev.Type, ".delta") && !strings.Contains(ev.Type, "audio"):
		r.AddOutput(ev.Delta)
	}
	if ev.Response != nil {
		observeResponse(ev.Response, r)
	}
	switch ev.Type {
	case "response.failed":
		if r.Error == "" { // a failure, whatever its response object says (or lacks)
			r.Error, r.FinishReason = "response failed: "+failure(ev.Response), "error"
		}
		r.Ended = true
	case "response.completed", "response.incomplete":
		r.Ended = true // the stream's last event: nothing follows it
	}
}

// failure is what a failed response says of its error, or that it gave none.
func failure(resp *responseObject) string {
	if resp == nil || len(resp.Error) == 0 || string(resp.Error) == "null" {
		return "the upstream gave no error"
	}
	return string(resp.Error)
}

// ResponsesBody reads the usage of a non-streamed Responses API response,
// and its output (message text, reasoning summaries, a reasoning item's own
// text, function calls' names and arguments) for an estimate when it
// carries no usage.
func ResponsesBody(body []byte, r *tap.Report) error {
	var resp struct {
		responseObject
		Output []struct {
			Type      string `json:"type"`
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
			Content   []struct {
				Text string `json:"text"`
			} `json:"content"`
			Summary []struct {
				Text string `json:"text"`
			} `json:"summary"`
		} `json:"output"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return err
	}
	for _, o := range resp.Output {
		for _, c := range o.Content {
			if o.Type == "reasoning" {
				r.AddReasoning(c.Text) // the reasoning's own text (open models)
			} else {
				r.AddOutput(c.Text)
			}
		}
		for _, c := range o.Summary {
			r.AddOutput(c.Text) // a summary: the reasoning stays hidden (see Event)
		}
		r.AddOutput(o.Name)
		r.AddOutput(o.Arguments)
	}
	observeResponse(&resp.responseObject, r)
	r.Final = r.Reported
	return nil
}

func observeResponse(resp *responseObject, r *tap.Report) {
	if resp.Model != "" {
		r.ServedModel = resp.Model
	}
	switch resp.Status {
	case "completed":
		r.FinishReason = "stop"
	case "incomplete":
		r.FinishReason = "length"
	case "failed":
		r.FinishReason = "error"
		if r.Error == "" {
			r.Error = "response failed: " + failure(resp)
		}
	}
	if resp.Usage != nil {
		r.SetUsage(resp.Usage.Meter())
		if resp.Status == "completed" || resp.Status == "incomplete" || resp.Status == "failed" {
			r.MarkFinal()
		} else {
			r.Final = false
		}
	}
}
