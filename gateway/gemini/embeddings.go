package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/tollgate-dev/tollgate/gateway/openai"
	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// Embeddings translates OpenAI's embeddings API to Gemini's: one string
// input to POST /models/{model}:embedContent, an array of strings to
// :batchEmbedContents (Gemini API reference, "Embeddings"); dimensions
// becomes outputDimensionality. Token-array inputs have no Gemini
// equivalent and are refused. The upstream model may be named with or
// without Gemini's "models/" prefix. Gemini reports no token usage for
// embeddings, so the gateway estimates it (usage_source estimated).
// batchEmbedContents takes at most MaxBatch requests: Split cuts a larger
// array into calls of at most that many (provider.EmbeddingBatches).
type Embeddings struct{}

var (
	_ provider.Embeddings       = Embeddings{}
	_ provider.EmbeddingBatches = Embeddings{}
)

// MaxBatch is the most requests Gemini's batchEmbedContents takes in one
// call (its API answers 400 INVALID_ARGUMENT past it).
const MaxBatch = 100

// MaxInputs is the most inputs OpenAI's embeddings API takes in one
// request, and so the gateway's on a Gemini deployment: past it the
// request is refused (400), as OpenAI refuses it. Unbounded, one request
// of 200,000 one-letter inputs (1 MB) went upstream as 2,000 calls, one
// after another, per attempt, their answers joined in memory.
const MaxInputs = 2048

// Split cuts a batchEmbedContents body of more than MaxBatch requests into
// bodies of at most MaxBatch each, in order, with the number of inputs of
// each; nil for an embedContent body or a batch that fits one call.
func (Embeddings) Split(upBody []byte) ([][]byte, []int, error) {
	var batch struct {
		Requests []json.RawMessage `json:"requests"`
	}
	if err := json.Unmarshal(upBody, &batch); err != nil || len(batch.Requests) <= MaxBatch {
		return nil, nil, nil // embedContent's body, or one call's batch
	}
	var bodies [][]byte
	var inputs []int
	for rest := batch.Requests; len(rest) > 0; {
		n := min(len(rest), MaxBatch)
		b, err := json.Marshal(struct {
			Requests []json.RawMessage `json:"requests"`
		}{rest[:n]})
		if err != nil {
			return nil, nil, err
		}
		bodies, inputs = append(bodies, b), append(inputs, n)
		rest = rest[n:]
	}
	return bodies, inputs, nil
}

type embedContent struct {
	Model                string    `json:"model,omitempty"`
	Content              embedText `json:"content"`
	OutputDimensionality *int      `json:"outputDimensionality,omitempty"`
}

type embedText struct {
	Parts []struct {
		Text string `json:"text"`
	} `json:"parts"`
}

func textContent(s string) embedText {
	var c embedText
	c.Parts = append(c.Parts, struct {
		Text string `json:"text"`
	}{s})
	return c
}

// Request translates an OpenAI embeddings request.
func (Embeddings) Request(body []byte, upstreamModel string) (string, []byte, error) {
	var req struct {
		Input      json.RawMessage `json:"input"`
		Dimensions *int            `json:"dimensions"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return "", nil, fmt.Errorf("the request body must be a JSON object: %w", err)
	}
	// ":" escaped, as Chat.Request escapes it: unescaped, a model
	// "m:generateContent" would put two methods in the path.
	// A leading "models/" (Gemini's own form of a model's name) is
	// dropped, as Chat.Request drops it.
	upstreamModel = strings.TrimPrefix(upstreamModel, "models/")
	base := modelPath(upstreamModel)
	var one string
	if json.Unmarshal(req.Input, &one) == nil {
		b, err := json.Marshal(embedContent{Content: textContent(one), OutputDimensionality: req.Dimensions})
		return base + ":embedContent", b, err
	}
	var many []string
	if err := json.Unmarshal(req.Input, &many); err != nil || len(many) == 0 {
		return "", nil, errors.New("input: must be a string or a non-empty array of strings for this model (token arrays are not supported by its provider)")
	}
	if len(many) > MaxInputs {
		return "", nil, fmt.Errorf("input: an array of at most %d strings, not %d", MaxInputs, len(many))
	}
	batch := struct {
		Requests []embedContent `json:"requests"`
	}{}
	for _, s := range many {
		batch.Requests = append(batch.Requests, embedContent{Model: "models/" + upstreamModel, Content: textContent(s),
			OutputDimensionality: req.Dimensions})
	}
	b, err := json.Marshal(batch)
	return base + ":batchEmbedContents", b, err
}

// Body translates embedContent's {"embedding":{"values"}} or
// batchEmbedContents' {"embeddings":[{"values"}]} into OpenAI's list, its
// usage zero (the gateway sets its estimate). A body that is an error
// object and holds no embedding (an error under a 200) records the error
// in r, which bills nothing (tap.Report.Resolve), and is returned as the
// error; the caller judges whose failure it is.
func (Embeddings) Body(body []byte, model string, r *tap.Report) ([]byte, error) {
	type values struct {
		Values []json.Number `json:"values"`
	}
	var resp struct {
		Embedding  *values         `json:"embedding"`
		Embeddings []values        `json:"embeddings"`
		Error      json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, err
	}
	list := resp.Embeddings
	if resp.Embedding != nil {
		list = []values{*resp.Embedding}
	}
	if desc, _ := errorOf(resp.Error); desc != "" && len(list) == 0 {
		r.Error, r.FinishReason = desc, "error"
		return nil, errors.New(desc)
	}
	if len(list) == 0 {
		return nil, errors.New("the upstream response holds no embedding")
	}
	type item struct {
		Object    string        `json:"object"`
		Index     int           `json:"index"`
		Embedding []json.Number `json:"embedding"`
	}
	out := struct {
		Object string          `json:"object"`
		Data   []item          `json:"data"`
		Model  json.RawMessage `json:"model"`
		Usage  map[string]int  `json:"usage"`
	}{Object: "list", Model: openai.AppendString(nil, model), Usage: map[string]int{"prompt_tokens": 0, "total_tokens": 0}}
	for i, v := range list {
		if v.Values == nil {
			v.Values = []json.Number{}
		}
		out.Data = append(out.Data, item{Object: "embedding", Index: i, Embedding: v.Values})
	}
	return json.Marshal(out)
}

// readCountTokens reads POST /gemini/v1beta/models/{model}:countTokens,
// passed through to the upstream's /models/{model}:countTokens with its
// body unchanged. A model holding ":" (escaped, as
// "m%3AgenerateContent:countTokens") is refused: the upstream's path would
// name two methods, and this route is not metered.
func readCountTokens(r *http.Request, body []byte) (provider.Call, error) {
	prefix := versionPrefix(r.URL.EscapedPath())
	p := strings.TrimSuffix(strings.TrimPrefix(r.URL.EscapedPath(), prefix), ":countTokens")
	rest, ok := strings.CutPrefix(strings.TrimPrefix(p, "/"), "models/")
	model, err := url.PathUnescape(rest)
	if !ok || err != nil || model == "" || strings.Contains(model, ":") {
		return provider.Call{}, pathNotFound(r, prefix+"models/{model}:countTokens")
	}
	if !json.Valid(body) {
		return provider.Call{}, provider.Err(http.StatusBadRequest, "invalid_request_error", "invalid_request", "the request body is not valid JSON")
	}
	return provider.Call{Model: model, Endpoint: prefix + "models/{model}:countTokens",
		Upstream: func(upstream string) (string, []byte, error) {
			return modelPath(upstream) + ":countTokens", body, nil
		}}, nil
}
