package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// geminiRequest holds the fields of a generateContent request the simulator
// reads. The model is in the URL path.
type geminiRequest struct {
	Contents          []geminiContent `json:"contents"`
	SystemInstruction *geminiContent  `json:"systemInstruction"`
	GenerationConfig  *struct {
		MaxOutputTokens *int64 `json:"maxOutputTokens"`
		ThinkingConfig  *struct {
			IncludeThoughts bool `json:"includeThoughts"`
		} `json:"thinkingConfig"`
	} `json:"generationConfig"`
	Labels map[string]string `json:"labels"`
}

type geminiContent struct {
	Parts []struct {
		Text    string `json:"text"`
		Thought bool   `json:"thought"`
	} `json:"parts"`
}

// words counts the words of the text parts of c (thought parts count 0).
func (c *geminiContent) words() int64 {
	var n int64
	for _, p := range c.Parts {
		if !p.Thought {
			n += countWords(p.Text)
		}
	}
	return n
}

// parseGemini decodes, validates and applies the rules to a generateContent
// body for model. Its errors are client errors.
func parseGemini(model string, stream bool, body []byte) (*spec, error) {
	if model == "" {
		return nil, errors.New("model is not specified")
	}
	var req geminiRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("invalid JSON payload: %w", err)
	}
	if len(req.Contents) == 0 {
		return nil, errors.New("contents is not specified")
	}
	prompt := int64(3)
	if req.SystemInstruction != nil {
		prompt += 4 + req.SystemInstruction.words()
	}
	for i := range req.Contents {
		prompt += 4 + req.Contents[i].words()
	}
	sp := &spec{model: model, stream: stream, controls: req.Labels}
	completion := int64(DefaultCompletionTokens)
	if g := req.GenerationConfig; g != nil {
		if v := g.MaxOutputTokens; v != nil {
			if *v < 1 || *v > MaxCompletionTokens {
				return nil, fmt.Errorf("generationConfig.maxOutputTokens must be between 1 and %d", MaxCompletionTokens)
			}
			completion, sp.capped = *v, true
		}
		sp.thoughts = g.ThinkingConfig != nil && g.ThinkingConfig.IncludeThoughts
	}
	sp.usage = newUsage(model, prompt, completion)
	return sp, nil
}

// ExpectedGeminiUsage returns the full usage, in tokens, the simulator bills
// for a successful generateContent or streamGenerateContent request with
// this body to model (controls do not change usage). On the wire,
// promptTokenCount is PromptTokens, cachedContentTokenCount CachedTokens,
// thoughtsTokenCount ReasoningTokens, candidatesTokenCount CompletionTokens
// - ReasoningTokens and totalTokenCount TotalTokens. It returns an error when
// the request is one the simulator rejects with 400.
func ExpectedGeminiUsage(model string, body []byte) (Usage, error) {
	sp, err := parseGemini(strings.TrimPrefix(model, "models/"), false, body)
	if err != nil {
		return Usage{}, err
	}
	return sp.usage, nil
}

// geminiAction splits the {action} path segment "model:method".
func geminiAction(r *http.Request) (model, method string) {
	model, method, _ = strings.Cut(r.PathValue("action"), ":")
	return model, method
}

// handleGemini serves POST .../v1beta/models/{model}:{method}.
func (s *Server) handleGemini(w http.ResponseWriter, r *http.Request) {
	switch _, method := geminiAction(r); method {
	case "generateContent", "streamGenerateContent":
		s.serve(w, r, geminiCodec{})
	case "embedContent", "batchEmbedContents":
		s.geminiEmbed(w, r, method == "batchEmbedContents")
	case "countTokens":
		s.geminiCount(w, r)
	default:
		geminiCodec{}.writeError(w, http.StatusNotFound, "Method not found: "+method)
	}
}

// geminiCodec is the generateContent protocol.
type geminiCodec struct{}

func (geminiCodec) protocol() Protocol { return Gemini }

func (geminiCodec) parse(r *http.Request, body []byte) (*spec, error) {
	model, method := geminiAction(r)
	stream := method == "streamGenerateContent"
	if stream && r.URL.Query().Get("alt") != "sse" {
		return nil, errors.New("the simulator streams only with alt=sse")
	}
	return parseGemini(model, stream, body)
}

// check accepts every mode: cumulative_usage and no_done are what Gemini does
// anyway (usage on every chunk, no end marker).
func (geminiCodec) check(fault) error { return nil }

func (geminiCodec) encoder(p *plan) encoder { return &geminiEncoder{p: p} }

func (geminiCodec) writeResponse(w http.ResponseWriter, p *plan) {
	var b bytes.Buffer
	_ = json.Indent(&b, appendGeminiResponse(nil, p), "", "  ")
	b.WriteByte('\n')
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.Header().Set("X-Request-Id", p.id)
	_, _ = w.Write(b.Bytes())
}

func (geminiCodec) writeError(w http.ResponseWriter, status int, msg string) {
	writeGeminiError(w, status, msg)
}

func (geminiCodec) writeStatus(w http.ResponseWriter, status int) {
	setRetryAfter(w, status)
	writeGeminiError(w, status, simulatedMessage(status))
}

// geminiStatus is the google.rpc status name Gemini sends with an HTTP status.
func geminiStatus(status int) string {
	switch status {
	case 400, 413:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 409:
		return "ABORTED"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 501:
		return "NOT_IMPLEMENTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	if status >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// appendGeminiError appends Gemini's error envelope, pretty-printed as
// Google sends it.
func appendGeminiError(b []byte, status int, msg string) []byte {
	m, _ := json.Marshal(msg)
	b = fmt.Appendf(b, "{\n  \"error\": {\n    \"code\": %d,\n    \"message\": %s,\n    \"status\": %q\n  }\n}\n",
		status, m, geminiStatus(status))
	return b
}

func writeGeminiError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(appendGeminiError(nil, status, msg))
}
