package gateway

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/png"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/anthropic"
	"github.com/tollgate-dev/tollgate/gateway/gemini"
	"github.com/tollgate-dev/tollgate/gateway/provider"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// nativePrompt is the prompt the native route at pattern reads of body,
// as an estimate reads it.
func nativePrompt(t *testing.T, routes []provider.Route, pattern string, body string) tap.Prompt {
	t.Helper()
	for _, r := range routes {
		if r.Pattern == pattern {
			return r.PromptText([]byte(body))
		}
	}
	t.Fatalf("no route %s", pattern)
	return tap.Prompt{}
}

// TestNativePromptEstimatesCountTheChatFraming: a native Anthropic or
// Gemini request cut before any usage report was estimated on its text
// alone, without the tokens of the chat format around each message that
// the chat route counts for the same conversation (3 tokens against 11
// for a system prompt and one message; found by review).
func TestNativePromptEstimatesCountTheChatFraming(t *testing.T) {
	est, err := tap.NewEstimator()
	if err != nil {
		t.Fatal(err)
	}
	chat := est.Prompt(chatPromptText([]byte(`[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]`)))
	for _, c := range []struct {
		name    string
		routes  []provider.Route
		pattern string
		body    string
	}{
		{"anthropic", anthropic.Provider().Routes, "/anthropic/v1/messages",
			`{"model":"m","max_tokens":5,"system":"Be brief.","messages":[{"role":"user","content":"Hi"}]}`},
		{"gemini", gemini.Provider().Routes, "/gemini/v1beta/*",
			`{"systemInstruction":{"parts":[{"text":"Be brief."}]},"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}`},
	} {
		if got := est.Prompt(nativePrompt(t, c.routes, c.pattern, c.body)); got != chat {
			t.Errorf("%s: the native estimate = %d tokens, the chat route's for the same conversation %d", c.name, got, chat)
		}
	}
}

// pngOf is a base64 PNG of w×h pixels.
func pngOf(t *testing.T, w, h int) string {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, image.NewGray(image.Rect(0, 0, w, h))); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b.Bytes())
}

// TestAnthropicPromptEstimateCountsImagesAndDocuments: a native Anthropic
// request's estimate counted its image and document blocks as nothing, so
// a stream cut before message_start was billed the text beside them alone
// (found by review); the chat route counts an image, Gemini's a media
// part. Anthropic bills an image about width × height / 750 tokens, up to
// about 1,600 ("Vision", docs.anthropic.com), and a PDF 1,500 to 3,000 a
// page ("PDF support").
func TestAnthropicPromptEstimateCountsImagesAndDocuments(t *testing.T) {
	routes := anthropic.Provider().Routes
	const pattern = "/anthropic/v1/messages"
	msg := func(block string) string {
		return `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},` + block + `]}]}`
	}
	for _, c := range []struct {
		name  string
		block string
		media int64
	}{
		{"a 300×200 base64 PNG", `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + pngOf(t, 300, 200) + `"}}`, 80},
		{"a 3000×2000 base64 PNG", `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + pngOf(t, 3000, 2000) + `"}}`, 1600},
		{"an image by URL", `{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}`, 1399},
		{"an image that does not decode", `{"type":"image","source":{"type":"base64","media_type":"image/webp","data":"AAAA"}}`, 1399},
		{"a PDF", `{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="}}`, 1500},
		{"an image in a tool result", `{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}]}`, 1399},
	} {
		p := nativePrompt(t, routes, pattern, msg(c.block))
		if p.Media != c.media || p.Text != "what is this?" {
			t.Errorf("%s: prompt %+v, want the text and %d media tokens", c.name, p, c.media)
		}
	}
	p := nativePrompt(t, routes, pattern, msg(`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"the contract"}}`))
	if p.Text != "what is this?\nthe contract" {
		t.Errorf("a plain-text document: prompt %+v, want its text counted", p)
	}
}
