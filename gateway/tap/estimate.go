package tap

import (
	"fmt"

	"github.com/tiktoken-go/tokenizer"
)

// Estimator counts tokens with OpenAI's o200k_base encoding (the encoding
// of the GPT-4o and later families, from github.com/tiktoken-go/tokenizer,
// which embeds it). For other providers' models it is an estimate, which is
// why events it produces are flagged "estimated" or "partial".
type Estimator struct {
	codec tokenizer.Codec
}

// NewEstimator loads the encoding. It returns an error only if the embedded
// encoding cannot be loaded.
func NewEstimator() (*Estimator, error) {
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return &Estimator{codec: c}, nil
}

// Count returns the number of tokens in s (0 for ""). Invalid UTF-8 is
// counted as the tokenizer's replacement, never refused.
func (e *Estimator) Count(s string) int64 {
	if s == "" {
		return 0
	}
	n, err := e.codec.Count(s)
	if err != nil {
		// Fall back to a conservative bytes/4 rather than record nothing.
		return int64((len(s) + 3) / 4)
	}
	return int64(n)
}

// Prompt estimates a prompt's tokens: its text, plus, for a list of chat
// messages, the tokens of the chat format around them as OpenAI documents
// its counting ("How to count tokens with tiktoken", OpenAI Cookbook: 3
// per message plus 1 for its role, and 3 that prime the reply).
func (e *Estimator) Prompt(p Prompt) int64 {
	if p.Tokens > 0 {
		return p.Tokens
	}
	n := e.Count(p.Text) + max(p.Media, 0)
	if p.Messages > 0 {
		n += 4*int64(p.Messages) + 3
	}
	return n
}
