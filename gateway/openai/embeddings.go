package openai

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"

	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// Embeddings is OpenAI's embeddings API (POST /embeddings below the base
// URL), passed through: the request with its model replaced, the response
// as the upstream sent it, its usage.prompt_tokens tapped (embeddings bill
// input tokens only).
type Embeddings struct{}

var _ provider.Embeddings = Embeddings{}

// Request sets the upstream model on the client's body.
func (Embeddings) Request(body []byte, upstreamModel string) (string, []byte, error) {
	b, err := provider.SetMember(body, "model", AppendString(nil, upstreamModel))
	return "/embeddings", b, err
}

// Body taps usage.prompt_tokens (and total_tokens, when prompt_tokens is
// missing) and returns body unchanged, but for its usage members when
// decoders would read them differently (see Chunk.AmbiguousUsage): those
// are removed, the caller writing the usage it billed. The report is the
// member spelled exactly "usage" then. A count read by tap.ParseCount
// (150, 150.0, "150") is taken; one that cannot be read (negative,
// fractional, another type), or a usage that is no object, is no report:
// the input is estimated. A body with a non-null "error" and no "data"
// (an error under a 200) records the error in r, which bills nothing
// (tap.Report.Resolve). It returns an error only for a body that is not a
// JSON object.
func (Embeddings) Body(body []byte, _ string, r *tap.Report) ([]byte, error) {
	var resp struct {
		Data  json.RawMessage `json:"data"`
		Error json.RawMessage `json:"error"`
		Usage json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, err
	}
	raw := resp.Usage
	if _, bad, _ := jsonscan.AmbiguousKey(body, "usage"); bad {
		raw, _, _ = jsonscan.Member(body, "usage")
		if out, err := jsonscan.DeleteMember(body, "usage"); err == nil {
			body = out
		}
	}
	if isNull(resp.Data) && !isNull(resp.Error) {
		r.Error, r.FinishReason = "upstream error body: "+string(resp.Error), "error"
		return body, nil
	}
	var u struct {
		PromptTokens *tap.Count `json:"prompt_tokens"`
		TotalTokens  *tap.Count `json:"total_tokens"`
	}
	if isNull(raw) || json.Unmarshal(raw, &u) != nil {
		return body, nil
	}
	n := u.TotalTokens
	if u.PromptTokens != nil {
		n = u.PromptTokens
	}
	if n != nil && *n != tap.Unreadable {
		r.SetUsage(usage.Tokens{PromptTokens: int64(*n)})
		r.Final = true
	}
	return body, nil
}

// isNull reports whether raw, a member's JSON value, is absent or null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// Base64Embeddings rewrites, in an OpenAI embeddings response, every
// embedding that is an array of numbers into what encoding_format "base64"
// asks for: its values as little-endian float32s, base64-encoded (OpenAI's
// encoding, which openai-node and openai-python ask for by default and
// decode). A translated provider (Gemini) answers number arrays only. A
// body with no number-array embedding is returned unchanged, so that an
// upstream's own base64 answer passes through as it came.
func Base64Embeddings(body []byte) ([]byte, error) {
	var resp map[string]json.RawMessage
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, err
	}
	var data []map[string]json.RawMessage
	if json.Unmarshal(resp["data"], &data) != nil {
		return body, nil
	}
	changed := false
	for _, item := range data {
		var values []float64
		raw := item["embedding"]
		if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &values) != nil {
			continue
		}
		b := make([]byte, 4*len(values))
		for i, v := range values {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
		}
		item["embedding"] = AppendString(nil, base64.StdEncoding.EncodeToString(b))
		changed = true
	}
	if !changed {
		return body, nil
	}
	d, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	resp["data"] = d
	return json.Marshal(resp)
}
