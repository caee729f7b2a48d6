package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// The endpoints beside the three model protocols' generation routes:
// OpenAI's embeddings and legacy completions, Gemini's embedContent and
// batchEmbedContents, and the token counters (Anthropic's count_tokens,
// Gemini's countTokens). Embeddings and completions are counted in the
// protocol's Stats (and a deployment's) like any model request, and obey a
// deployment's fail knobs (completions its die knobs too); the counters
// are not counted: providers do not bill them.

// DefaultEmbeddingDims is the length of an embedding when the request sets
// no dimensions.
const DefaultEmbeddingDims = 8

// EmbeddingTokens returns the input tokens the simulator bills for an
// embeddings input (OpenAI's input, or the texts of Gemini's contents):
// for each string, its whitespace-separated words, at least 1; for each
// token array, its length. It returns an error for any other shape.
func EmbeddingTokens(input json.RawMessage) (int64, error) {
	var one string
	if json.Unmarshal(input, &one) == nil {
		return max(countWords(one), 1), nil
	}
	var many []json.RawMessage
	if err := json.Unmarshal(input, &many); err != nil || len(many) == 0 {
		return 0, errors.New("input must be a string, an array of strings or an array of token arrays")
	}
	var n int64
	for _, m := range many {
		var s string
		var toks []int64
		switch {
		case json.Unmarshal(m, &s) == nil:
			n += max(countWords(s), 1)
		case json.Unmarshal(m, &toks) == nil && len(toks) > 0:
			n += int64(len(toks))
		default:
			var tok int64
			if json.Unmarshal(m, &tok) != nil {
				return 0, errors.New("input must be a string, an array of strings or an array of token arrays")
			}
			n++ // one token array, given flat
		}
	}
	return n, nil
}

// embedding is a deterministic vector of dims values.
func embedding(i, dims int) []float64 {
	v := make([]float64, dims)
	for j := range v {
		v[j] = float64((i+1)*(j+1)%97) / 97
	}
	return v
}

// fail applies deployment faults to a request that is not streamed: it
// reports true when it answered with the knob's status.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, t *tallies, c codec, stream bool) (die bool, after int64, failed bool) {
	name := deploymentOf(r)
	if name == "" {
		return false, 0, false
	}
	status, ra, die, after := s.deps.take(name, stream)
	if status == 0 {
		return die, after, false
	}
	if ra != "" {
		w.Header().Set("Retry-After", ra)
	}
	t.record(outcomeStatus, Usage{})
	c.writeStatus(w, status)
	return false, 0, true
}

func (s *Server) tallies(r *http.Request, p Protocol) *tallies {
	t := &tallies{s.stats.of(p), nil}
	if name := deploymentOf(r); name != "" {
		t.dep = s.deps.of(name)
	}
	return t
}

// handleEmbeddings serves POST /v1/embeddings: one embedding per input,
// usage {prompt_tokens, total_tokens} by EmbeddingTokens.
func (s *Server) handleEmbeddings(w http.ResponseWriter, r *http.Request) {
	t := s.tallies(r, OpenAI)
	var req struct {
		Model      string          `json:"model"`
		Input      json.RawMessage `json:"input"`
		Dimensions *int            `json:"dimensions"`
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	var n int64
	if err == nil && req.Model == "" {
		err = errors.New("you must provide a model parameter")
	}
	if err == nil {
		n, err = EmbeddingTokens(req.Input)
	}
	dims := DefaultEmbeddingDims
	if err == nil && req.Dimensions != nil {
		if dims = *req.Dimensions; dims < 1 || dims > 4096 {
			err = errors.New("dimensions must be between 1 and 4096")
		}
	}
	if err != nil {
		t.record(outcomeBadRequest, Usage{})
		openaiCodec{}.writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if _, _, failed := s.fail(w, r, t, openaiCodec{}, false); failed {
		return
	}
	count := 1
	var many []json.RawMessage
	if json.Unmarshal(req.Input, &many) == nil {
		count = len(many)
		var flat int64
		if json.Unmarshal(many[0], &flat) == nil {
			count = 1 // one token array, given flat
		}
	}
	type item struct {
		Object    string    `json:"object"`
		Index     int       `json:"index"`
		Embedding []float64 `json:"embedding"`
	}
	out := struct {
		Object string           `json:"object"`
		Data   []item           `json:"data"`
		Model  string           `json:"model"`
		Usage  map[string]int64 `json:"usage"`
	}{Object: "list", Model: req.Model, Usage: map[string]int64{"prompt_tokens": n, "total_tokens": n}}
	for i := range count {
		out.Data = append(out.Data, item{"embedding", i, embedding(i, dims)})
	}
	t.record(outcomeOK, Usage{PromptTokens: n})
	writeJSON(w, http.StatusOK, out)
}

// completionRequest is what the simulator reads of a legacy completions request.
type completionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	Stream        bool            `json:"stream"`
	StreamOptions *streamOptions  `json:"stream_options"`
	MaxTokens     *int64          `json:"max_tokens"`
}

// CompletionUsage returns the usage the simulator bills for a legacy
// completions request body: prompt tokens 3 plus EmbeddingTokens of the
// prompt, completion tokens max_tokens or DefaultCompletionTokens.
func CompletionUsage(body []byte) (Usage, error) {
	var req completionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return Usage{}, fmt.Errorf("invalid JSON body: %w", err)
	}
	if req.Model == "" {
		return Usage{}, errors.New("you must provide a model parameter")
	}
	n, err := EmbeddingTokens(req.Prompt)
	if err != nil {
		return Usage{}, errors.New("prompt must be a string or an array of strings")
	}
	completion := int64(DefaultCompletionTokens)
	if req.MaxTokens != nil {
		if *req.MaxTokens < 1 || *req.MaxTokens > MaxCompletionTokens {
			return Usage{}, fmt.Errorf("max_tokens must be between 1 and %d", MaxCompletionTokens)
		}
		completion = *req.MaxTokens
	}
	return Usage{PromptTokens: 3 + n, CompletionTokens: completion}, nil
}

// handleCompletions serves POST /v1/completions, the legacy endpoint:
// text "tok " per completion token, one token per chunk when streamed,
// usage on the body, or in a last chunk ("choices":[]) when asked for.
func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	t := s.tallies(r, OpenAI)
	t.inFlight(1)
	defer t.inFlight(-1)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var req completionRequest
	var u Usage
	if err == nil {
		_ = json.Unmarshal(body, &req)
		u, err = CompletionUsage(body)
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
	id := "cmpl-" + strings.TrimPrefix(ResponseID(OpenAI, body), "chatcmpl-")
	created := s.now().Unix()
	finish := "stop"
	if req.MaxTokens != nil {
		finish = "length"
	}
	usageJSON := func(u Usage) string {
		return fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, u.PromptTokens, u.CompletionTokens, u.TotalTokens())
	}
	head := fmt.Sprintf(`{"id":%q,"object":"text_completion","created":%d,"model":%q,`, id, created, req.Model)
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `%s"choices":[{"text":%q,"index":0,"logprobs":null,"finish_reason":%q}],"usage":%s}`+"\n",
			head, strings.Repeat(TokenText, int(u.CompletionTokens)), finish, usageJSON(u))
		t.record(outcomeOK, u)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	sent := Usage{PromptTokens: u.PromptTokens}
	write := func(s string) bool {
		if _, err := io.WriteString(w, "data: "+s+"\n\n"); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	for i := int64(0); i < u.CompletionTokens; i++ {
		if die && i == after {
			t.record(outcomeDisconnected, sent)
			panic(http.ErrAbortHandler)
		}
		fr := "null"
		if i+1 == u.CompletionTokens {
			fr = strconv.Quote(finish)
		}
		if !write(fmt.Sprintf(`%s"choices":[{"text":%q,"index":0,"logprobs":null,"finish_reason":%s}]}`, head, TokenText, fr)) {
			t.record(outcomeCanceled, sent)
			return
		}
		sent.CompletionTokens++
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		write(fmt.Sprintf(`%s"choices":[],"usage":%s}`, head, usageJSON(u)))
	}
	write("[DONE]")
	t.record(outcomeOK, u)
}

// handleAnthropicCount serves POST /v1/messages/count_tokens: the
// request's input_tokens as a Messages request would bill them (max_tokens
// may be absent), not counted in Stats.
func (s *Server) handleAnthropicCount(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var fields map[string]json.RawMessage
	if err == nil {
		err = json.Unmarshal(body, &fields)
	}
	if err == nil {
		if _, ok := fields["max_tokens"]; !ok {
			fields["max_tokens"] = json.RawMessage("1")
		}
		body, _ = json.Marshal(fields)
	}
	var u Usage
	if err == nil {
		u, err = ExpectedAnthropicUsage(body)
	}
	if err != nil {
		anthropicCodec{}.writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"input_tokens": u.PromptTokens})
}

// geminiEmbed serves :embedContent and :batchEmbedContents, billing
// EmbeddingTokens of each content's text.
func (s *Server) geminiEmbed(w http.ResponseWriter, r *http.Request, batch bool) {
	t := s.tallies(r, Gemini)
	type content struct {
		Content struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"content"`
		OutputDimensionality *int `json:"outputDimensionality"`
	}
	var one content
	var many struct {
		Requests []content `json:"requests"`
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err == nil && batch {
		err = json.Unmarshal(body, &many)
	} else if err == nil {
		err = json.Unmarshal(body, &one)
		many.Requests = []content{one}
	}
	if err == nil && len(many.Requests) == 0 {
		err = errors.New("requests must not be empty")
	}
	if err != nil {
		t.record(outcomeBadRequest, Usage{})
		writeGeminiError(w, http.StatusBadRequest, err.Error())
		return
	}
	if _, _, failed := s.fail(w, r, t, geminiCodec{}, false); failed {
		return
	}
	type values struct {
		Values []float64 `json:"values"`
	}
	var n int64
	var out []values
	for i, c := range many.Requests {
		var text []string
		for _, p := range c.Content.Parts {
			text = append(text, p.Text)
		}
		k, _ := EmbeddingTokens(json.RawMessage(strconv.Quote(strings.Join(text, " "))))
		n += k
		dims := DefaultEmbeddingDims
		if c.OutputDimensionality != nil && *c.OutputDimensionality > 0 && *c.OutputDimensionality <= 4096 {
			dims = *c.OutputDimensionality
		}
		out = append(out, values{embedding(i, dims)})
	}
	t.record(outcomeOK, Usage{PromptTokens: n})
	if batch {
		writeJSON(w, http.StatusOK, map[string]any{"embeddings": out})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"embedding": out[0]})
}

// geminiCount serves :countTokens: totalTokens as generateContent would
// bill the prompt, not counted in Stats.
func (s *Server) geminiCount(w http.ResponseWriter, r *http.Request) {
	model, _ := geminiAction(r)
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var u Usage
	if err == nil {
		u, err = ExpectedGeminiUsage(model, body)
	}
	if err != nil {
		writeGeminiError(w, http.StatusBadRequest, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"totalTokens": u.PromptTokens})
}
