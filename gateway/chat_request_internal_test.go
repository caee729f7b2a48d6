package gateway

import (
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// TestAnImagePartCountsInTheEstimate: an estimate of a chat request's
// prompt (its upstream cut short before any usage report) counted its text
// alone, so image parts were billed nothing (found by review). Each counts
// OpenAI's figure for a 1024×1024 image, 765 tokens, or 85 at detail low.
func TestAnImagePartCountsInTheEstimate(t *testing.T) {
	msgs := []byte(`[{"role":"user","content":[{"type":"text","text":"what is in these?"},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},` +
		`{"type":"image_url","image_url":{"url":"https://example.com/a.png","detail":"low"}}]}]`)
	p := chatPromptText(msgs)
	if p.Media != 765+85 || p.Text != "what is in these?" || p.Messages != 1 {
		t.Fatalf("chatPromptText = %+v; want the text, 1 message, and 850 tokens of images", p)
	}
	textOnly := chatPromptText([]byte(`[{"role":"user","content":[{"type":"text","text":"what is in these?"}]}]`))
	est, err := tap.NewEstimator()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := est.Prompt(p), est.Prompt(textOnly)+850; got != want {
		t.Errorf("the estimate with two images = %d, want the text's plus 850 = %d", got, want)
	}
}
