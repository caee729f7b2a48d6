package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// responsesRequest is what the simulator reads of a Responses API request.
type responsesRequest struct {
	Model           string            `json:"model"`
	Input           json.RawMessage   `json:"input"`
	Instructions    *string           `json:"instructions"`
	Stream          bool              `json:"stream"`
	MaxOutputTokens *int64            `json:"max_output_tokens"`
	Metadata        map[string]string `json:"metadata"`
}

// ResponsesUsage returns the usage the simulator bills for a Responses API
// request body (POST /v1/responses), by the chat rules: 3, plus for the
// input string or each input item 4 and its words (string content, or
// input_text/output_text parts), plus one more message for instructions;
// completion max_output_tokens or DefaultCompletionTokens, with the model's
// profile (cache, reasoning) applied.
func ResponsesUsage(body []byte) (Usage, error) {
	sp, _, err := parseResponses(body)
	if err != nil {
		return Usage{}, err
	}
	return sp.usage, nil
}

func parseResponses(body []byte) (*spec, *responsesRequest, error) {
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, nil, fmt.Errorf("invalid JSON body: %w", err)
	}
	if req.Model == "" {
		return nil, nil, errors.New("you must provide a model parameter")
	}
	prompt := int64(3)
	if req.Instructions != nil {
		prompt += 4 + countWords(*req.Instructions)
	}
	var one string
	if json.Unmarshal(req.Input, &one) == nil {
		prompt += 4 + countWords(one)
	} else {
		var items []struct {
			Content json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(req.Input, &items); err != nil || len(items) == 0 {
			return nil, nil, errors.New("input must be a string or a non-empty array of input items")
		}
		for _, it := range items {
			prompt += 4
			var s string
			if json.Unmarshal(it.Content, &s) == nil {
				prompt += countWords(s)
				continue
			}
			var parts []contentPart
			_ = json.Unmarshal(it.Content, &parts)
			for _, p := range parts {
				if p.Type == "input_text" || p.Type == "output_text" || p.Type == "text" {
					prompt += countWords(p.Text)
				}
			}
		}
	}
	completion := int64(DefaultCompletionTokens)
	sp := &spec{model: req.Model, stream: req.Stream, controls: req.Metadata}
	if req.MaxOutputTokens != nil {
		if *req.MaxOutputTokens < 1 || *req.MaxOutputTokens > MaxCompletionTokens {
			return nil, nil, fmt.Errorf("max_output_tokens must be between 1 and %d", MaxCompletionTokens)
		}
		completion, sp.capped = *req.MaxOutputTokens, true
	}
	sp.usage = newUsage(req.Model, prompt, completion)
	return sp, &req, nil
}

// responsesUsageJSON is u as the Responses API's usage object.
func responsesUsageJSON(u Usage) map[string]any {
	return map[string]any{"input_tokens": u.PromptTokens, "input_tokens_details": map[string]int64{"cached_tokens": u.CachedTokens},
		"output_tokens": u.CompletionTokens, "output_tokens_details": map[string]int64{"reasoning_tokens": u.ReasoningTokens},
		"total_tokens": u.TotalTokens()}
}

// handleResponses serves POST /v1/responses: a message of "tok " per
// content token, streamed as response.created, response.output_text.delta
// per token and response.completed (with the usage), or whole; status
// "incomplete" when max_output_tokens set the length. Deployment knobs
// apply (fail, and die after K deltas).
func (s *Server) handleResponses(w http.ResponseWriter, r *http.Request) {
	t := s.tallies(r, OpenAI)
	t.inFlight(1)
	defer t.inFlight(-1)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var sp *spec
	var req *responsesRequest
	if err == nil {
		sp, req, err = parseResponses(body)
	}
	if err != nil {
		t.record(outcomeBadRequest, Usage{})
		openaiCodec{}.writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	die, after, failed := s.fail(w, r, t, openaiCodec{}, req.Stream)
	if failed {
		return
	}
	u := sp.usage
	content := u.CompletionTokens - u.ReasoningTokens
	id := "resp_" + strings.TrimPrefix(ResponseID(OpenAI, body), "chatcmpl-")
	status := "completed"
	if sp.capped {
		status = "incomplete"
	}
	response := func(status string, u *Usage, text string) map[string]any {
		m := map[string]any{"id": id, "object": "response", "created_at": s.now().Unix(), "status": status, "model": req.Model,
			"output": []any{}, "usage": nil}
		if text != "" {
			m["output"] = []any{map[string]any{"type": "message", "id": "msg_" + id[5:], "status": "completed", "role": "assistant",
				"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}}
		}
		if u != nil {
			m["usage"] = responsesUsageJSON(*u)
		}
		return m
	}
	text := strings.Repeat(TokenText, int(content))
	if !req.Stream {
		t.record(outcomeOK, u)
		writeJSON(w, http.StatusOK, response(status, &u, text))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	seq := 0
	send := func(typ string, fields map[string]any) bool {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		b, _ := json.Marshal(fields)
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// Once response.created is out, the prompt and the reasoning are billed.
	sent := Usage{PromptTokens: u.PromptTokens, CachedTokens: u.CachedTokens, CompletionTokens: u.ReasoningTokens, ReasoningTokens: u.ReasoningTokens}
	if !send("response.created", map[string]any{"response": response("in_progress", nil, "")}) {
		t.record(outcomeCanceled, Usage{})
		return
	}
	for i := int64(0); i < content; i++ {
		if die && i == after {
			t.record(outcomeDisconnected, sent)
			panic(http.ErrAbortHandler)
		}
		if !send("response.output_text.delta", map[string]any{"item_id": "msg_" + id[5:], "output_index": 0, "content_index": 0, "delta": TokenText}) {
			t.record(outcomeCanceled, sent)
			return
		}
		sent.CompletionTokens++
	}
	final := "response.completed"
	if sp.capped {
		final = "response.incomplete"
	}
	send(final, map[string]any{"response": response(status, &u, text)})
	t.record(outcomeOK, u)
}
