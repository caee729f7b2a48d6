package openai

import (
	"encoding/json"

	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
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
// missing) and returns body unchanged.
func (Embeddings) Body(body []byte, _ string, r *tap.Report) ([]byte, error) {
	var resp struct {
		Usage *struct {
			PromptTokens *int64 `json:"prompt_tokens"`
			TotalTokens  *int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, err
	}
	if u := resp.Usage; u != nil && (u.PromptTokens != nil || u.TotalTokens != nil) {
		n := u.TotalTokens
		if u.PromptTokens != nil {
			n = u.PromptTokens
		}
		r.SetUsage(usage.Tokens{PromptTokens: *n})
		r.Final = true
	}
	return body, nil
}
