package gateway

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/tollgate/gateway/anthropic"
	"github.com/tollgate-dev/tollgate/gateway/gemini"
)

// anthropicError answers in the Anthropic Messages API's error envelope:
// {"type":"error","error":{"type","message"}}.
func anthropicError(w http.ResponseWriter, status int, typ, _, msg string) {
	if typ == "invalid_request_error" && status == http.StatusUnauthorized {
		typ = "authentication_error"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}})
}

// geminiError answers in the Gemini API's error envelope:
// {"error":{"code","message","status"}}.
func geminiError(w http.ResponseWriter, status int, _, _, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": status, "message": msg, "status": strings.ToUpper(strings.ReplaceAll(http.StatusText(status), " ", "_"))}})
}

// anthropicMessages serves POST /anthropic/v1/messages: Anthropic's own
// Messages API, passed through to an Anthropic provider and metered.
func (s *Server) anthropicMessages(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readRequest(w, r, anthropicError)
	if !ok {
		return
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil || req.Model == "" {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "", "the request body must be a JSON object with a string model")
		return
	}
	rt, err := s.routes.resolve(req.Model)
	if err != nil || rt.provider.Type != "anthropic" {
		anthropicError(w, http.StatusNotFound, "not_found_error", "", "model: "+req.Model+" is not served by an Anthropic provider here")
		return
	}
	upBody, err := sjson.SetBytes(body, "model", rt.upstream)
	if err != nil {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "", err.Error())
		return
	}
	x := s.newExchange(w, r, rt, "/anthropic/v1/messages", req.Stream)
	defer x.finish()
	x.promptText = func() string { return anthropic.PromptText(body) }
	p := rt.provider
	version, beta := r.Header.Get("anthropic-version"), r.Header.Get("anthropic-beta")
	s.passThrough(w, x, rt, nativeCall{
		url: p.BaseURL + "/messages", body: upBody, stream: req.Stream,
		header: func(h http.Header) {
			anthropic.Chat{}.Header(h, p.APIKey)
			if version != "" {
				h.Set("anthropic-version", version)
			}
			if beta != "" {
				h.Set("anthropic-beta", beta)
			}
		},
		tap: &anthropic.Tap{}, bodyUsage: anthropic.BodyUsage, fail: anthropicError,
	})
}

// geminiGenerate serves POST /gemini/v1beta/models/{model}:streamGenerateContent
// and :generateContent: the Gemini API, passed through to a Gemini provider
// and metered.
func (s *Server) geminiGenerate(w http.ResponseWriter, r *http.Request) {
	model, method, ok := gemini.ModelFromPath(chi.URLParam(r, "*"))
	if !ok {
		geminiError(w, http.StatusNotFound, "", "", "expected /gemini/v1beta/models/{model}:streamGenerateContent or :generateContent")
		return
	}
	body, ok := s.readRequest(w, r, geminiError)
	if !ok {
		return
	}
	if !json.Valid(body) {
		geminiError(w, http.StatusBadRequest, "", "", "the request body is not valid JSON")
		return
	}
	rt, err := s.routes.resolve(model)
	if err != nil || rt.provider.Type != "gemini" {
		geminiError(w, http.StatusNotFound, "", "", "models/"+model+" is not served by a Gemini provider here")
		return
	}
	// streamGenerateContent without alt=sse answers one JSON array: it is
	// relayed and metered as a whole body.
	sseStream := method == "streamGenerateContent" && r.URL.Query().Get("alt") == "sse"
	q := url.Values{}
	if alt := r.URL.Query().Get("alt"); alt != "" {
		q.Set("alt", alt)
	}
	target := rt.provider.BaseURL + "/models/" + url.PathEscape(rt.upstream) + ":" + method
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	x := s.newExchange(w, r, rt, "/gemini/v1beta/models/{model}:"+method, method == "streamGenerateContent")
	defer x.finish()
	x.promptText = func() string { return gemini.PromptText(body) }
	p := rt.provider
	s.passThrough(w, x, rt, nativeCall{
		url: target, body: body, stream: sseStream,
		header: func(h http.Header) { gemini.Chat{}.Header(h, p.APIKey) },
		tap:    &gemini.Tap{}, bodyUsage: gemini.BodyUsage, fail: geminiError,
	})
}
