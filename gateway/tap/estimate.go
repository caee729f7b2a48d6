package tap

import (
	"fmt"
	"unicode"
	"unicode/utf8"

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
// counted as the tokenizer's replacement, never refused. A text longer
// than countWindow is counted in pieces cut where the encoding's
// pre-tokenizer would cut anyway (see cutNear), so that the count is the
// same and the tokenizer's memory stays bounded: it allocates some fifty
// times its input (810 MB to count 16 MiB at once).
func (e *Estimator) Count(s string) int64 {
	var n int64
	for len(s) > countWindow {
		cut := cutNear(s, countWindow)
		n += e.count(s[:cut])
		s = s[cut:]
	}
	return n + e.count(s)
}

// countWindow is the most Count hands the tokenizer at once, in bytes.
const countWindow = 64 << 10

func (e *Estimator) count(s string) int64 {
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

// cutNear returns where to cut s (longer than limit) at most limit bytes
// in, at least limit/2: before a single space between two characters
// that are not spaces, where o200k_base's pre-tokenizer begins a piece
// (" word", " 42", " ,": its pattern puts one leading space with what
// follows, and no piece spans a space into a word), so the pieces' counts
// add up to the whole's. A text with no such space there (no spaces at
// all, as in Chinese) is cut at a character's start, which may differ
// from the whole's count by a token or so a cut.
func cutNear(s string, limit int) int {
	for i := limit; i > limit/2; i-- {
		if s[i] != ' ' {
			continue
		}
		before, _ := utf8.DecodeLastRuneInString(s[:i])
		after, _ := utf8.DecodeRuneInString(s[i+1:])
		if !unicode.IsSpace(before) && !unicode.IsSpace(after) {
			return i
		}
	}
	i := limit
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	if i == 0 {
		return limit // not UTF-8: cut anywhere
	}
	return i
}

// Prompt estimates a prompt's tokens: its text (and each of its Texts), plus, for a list of chat
// messages, the tokens of the chat format around them as OpenAI documents
// its counting ("How to count tokens with tiktoken", OpenAI Cookbook: 3
// per message plus 1 for its role, and 3 that prime the reply).
func (e *Estimator) Prompt(p Prompt) int64 {
	if p.Tokens > 0 {
		return p.Tokens
	}
	n := e.Count(p.Text) + max(p.Media, 0)
	for _, t := range p.Texts {
		n += e.Count(t)
	}
	if p.Messages > 0 {
		n += 4*int64(p.Messages) + 3
	}
	return n
}
