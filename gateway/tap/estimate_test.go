package tap

import "testing"

// TestPromptEstimateCountsTheChatFraming: a list of chat messages is
// estimated as OpenAI's cookbook counts it: the text, 4 tokens a message
// (3 of framing, 1 for its role) and 3 that prime the reply; a prompt
// that is no message list is its text alone, and a count the caller has
// (an input of token ids) stands as it is.
func TestPromptEstimateCountsTheChatFraming(t *testing.T) {
	est, err := NewEstimator()
	if err != nil {
		t.Fatal(err)
	}
	text := est.Count("hello world")
	for _, c := range []struct {
		name string
		p    Prompt
		want int64
	}{
		{"two messages", Prompt{Text: "hello world", Messages: 2}, text + 2*4 + 3},
		{"no messages", Prompt{Text: "hello world"}, text},
		{"token ids", Prompt{Text: "hello world", Messages: 2, Tokens: 7}, 7},
		{"media", Prompt{Text: "hello world", Media: 85}, text + 85},
	} {
		if got := est.Prompt(c.p); got != c.want {
			t.Errorf("%s: %d tokens, want %d", c.name, got, c.want)
		}
	}
}
