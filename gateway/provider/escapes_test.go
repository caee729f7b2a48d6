package provider

import "testing"

// TestEscapesALetter: the body checks (openai.TextOnly, Anthropic's cache
// TTL) read a body twice only when an escape could spell a letter. Every body with an
// escape was read twice, and JSON encoders escape all non-ASCII text by
// default (Python's json.dumps): every request in most languages paid a
// second decode of its messages (found in the stop's own review).
func TestEscapesALetter(t *testing.T) {
	for in, want := range map[string]bool{
		`["\u0061udio"]`:                 true,
		`"input\u005Faudio"`:             true,
		`"\u0041"`:                       true,
		`"\u007a"`:                       true,
		`"caf\u00e9 \u4e2d\u6587"`:       false,
		`"a \u003c b \u0026 c \u003e d"`: false,
		`"\u0040 \u005b \u0060 \u007b"`:  false,
		`"plain text, no escape"`:        false,
		`"cut short \u00`:                false,
		`"\u00e9 then \u0069nput_audio"`: true,
	} {
		if got := EscapesALetter([]byte(in)); got != want {
			t.Errorf("EscapesALetter(%s) = %v, want %v", in, got, want)
		}
	}
}
