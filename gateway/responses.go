package gateway

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/tollgate/gateway/openai"
)

// responses serves POST /v1/responses, OpenAI's Responses API, passed
// through to OpenAI providers and metered from response.completed.
func (s *Server) responses(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readRequest(w, r, writeError)
	if !ok {
		return
	}
	var req struct {
		Model  string          `json:"model"`
		Stream bool            `json:"stream"`
		Input  json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Model == "" {
		errInvalidRequest(w, "the request body must be a JSON object with a string model and a boolean stream")
		return
	}
	rt, err := s.routes.resolve(req.Model)
	if err != nil || rt.provider.Type != "openai" {
		modelNotFound(w, writeError, req.Model)
		return
	}
	upBody, err := sjson.SetBytes(body, "model", rt.upstream)
	if err != nil {
		errInvalidRequest(w, err.Error())
		return
	}
	x := s.newExchange(w, r, rt, "/v1/responses", req.Stream)
	defer x.finish()
	x.promptText = func() string { return responsesPromptText(req.Input) }
	p := rt.provider
	s.passThrough(w, x, rt, nativeCall{
		url: p.BaseURL + "/responses", body: upBody, stream: req.Stream,
		header: func(h http.Header) {
			if p.APIKey != "" {
				h.Set("Authorization", "Bearer "+p.APIKey)
			}
		},
		tap: openai.ResponsesTap{}, bodyUsage: openai.ResponsesBody, fail: writeError,
	})
}

// responsesPromptText is the text of a Responses API input: a string, or
// items whose content is a string or has text parts.
func responsesPromptText(input json.RawMessage) string {
	var text string
	if json.Unmarshal(input, &text) == nil {
		return text
	}
	var items []struct {
		Content json.RawMessage `json:"content"`
	}
	_ = json.Unmarshal(input, &items)
	var b strings.Builder
	for _, it := range items {
		if json.Unmarshal(it.Content, &text) == nil {
			b.WriteString(text + "\n")
			continue
		}
		var parts []struct {
			Text string `json:"text"`
		}
		_ = json.Unmarshal(it.Content, &parts)
		for _, p := range parts {
			b.WriteString(p.Text + "\n")
		}
	}
	return b.String()
}
