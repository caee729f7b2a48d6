package anthropic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	img "image"
	_ "image/gif"  // image.DecodeConfig reads GIF headers
	_ "image/jpeg" // and JPEG
	_ "image/png"  // and PNG: the formats Anthropic takes, but WebP
	"strings"

	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// Anthropic's documented token costs of a prompt's media, for estimates
// when the provider reports no usage.
const (
	// maxImageTokens is the most one image costs: Anthropic resizes a
	// larger image to about 1.15 megapixels, "approximately 1,600 tokens"
	// ("Vision", docs.anthropic.com, evaluate image size).
	maxImageTokens = 1600
	// unsizedImageTokens is what an image whose size is not read costs (a
	// URL, a file ID, a WebP, data that does not decode): a 1024×1024
	// image's ⌈width × height / 750⌉, as openai.ImageTokens counts a
	// 1024×1024 image for an image whose size it does not read.
	unsizedImageTokens = (1024*1024 + 749) / 750
	// documentTokens is what a PDF or other non-text document costs: a
	// page's least, "1,500 to 3,000 tokens per page" ("PDF support",
	// docs.anthropic.com); its pages are not counted.
	documentTokens = 1500
)

// Prompt returns what an estimate counts of a Messages request when the
// provider reports no usage: in Text the system prompt, the text of every
// message (string content, text blocks, a plain-text document's data,
// tool_result content), tool_use names and inputs, and the tool
// definitions (as JSON), joined by newlines; in Messages the messages, the
// system prompt counted as one, for the chat format's tokens around each
// (tap.Estimator.Prompt); and in Media each image's and document's tokens
// (imageTokens, documentTokens). It returns the zero Prompt for a body it
// cannot read.
func Prompt(body []byte) tap.Prompt {
	var req struct {
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(body, &req) != nil {
		return tap.Prompt{}
	}
	var p promptText
	p.add(req.System, 0)
	for _, m := range req.Messages {
		p.add(m.Content, 0)
	}
	for _, t := range req.Tools {
		p.sb.WriteString("\n")
		p.sb.Write(bytes.TrimSpace(t))
	}
	out := tap.Prompt{Text: strings.TrimPrefix(p.sb.String(), "\n"), Messages: len(req.Messages), Media: p.media}
	if s := bytes.TrimSpace(req.System); len(s) > 0 && string(s) != "null" && string(s) != `""` && string(s) != "[]" {
		out.Messages++
	}
	return out
}

// promptText gathers Prompt's text, each piece after a newline, and its
// media tokens.
type promptText struct {
	sb    strings.Builder
	media int64
}

func (p *promptText) text(s string) {
	if s != "" {
		p.sb.WriteString("\n")
		p.sb.WriteString(s)
	}
}

// add gathers content (a string or an array of blocks). depth bounds the
// recursion into tool_result content.
func (p *promptText) add(raw json.RawMessage, depth int) {
	switch kindOf(raw) {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			p.text(s)
		}
	case '[':
		var blocks []struct {
			Type    string          `json:"type"`
			Text    string          `json:"text"`
			Name    string          `json:"name"`
			Input   json.RawMessage `json:"input"`
			Content json.RawMessage `json:"content"`
			Source  *mediaSource    `json:"source"`
		}
		if json.Unmarshal(raw, &blocks) != nil {
			return
		}
		for _, b := range blocks {
			for _, s := range []string{b.Text, b.Name, string(bytes.TrimSpace(b.Input))} {
				p.text(s)
			}
			switch {
			case b.Type == "image":
				p.media += imageTokens(b.Source)
			case b.Type == "document" && b.Source != nil && b.Source.Type == "text":
				p.text(b.Source.Data)
			case b.Type == "document" && b.Source != nil && b.Source.Type == "content" && depth < 2:
				p.add(b.Source.Content, depth+1)
			case b.Type == "document":
				p.media += documentTokens
			case b.Type == "tool_result" && depth < 2:
				p.add(b.Content, depth+1)
			}
		}
	}
}

// mediaSource is an image's or a document's source: base64 data, a URL, a
// file, plain text or content blocks.
type mediaSource struct {
	Type    string          `json:"type"`
	Data    string          `json:"data"`
	Content json.RawMessage `json:"content"`
}

// imageTokens is Anthropic's cost of an image: ⌈width × height / 750⌉
// tokens, at most maxImageTokens ("Vision", docs.anthropic.com), its size
// read from the header of base64 PNG, JPEG or GIF data; unsizedImageTokens
// for any other.
func imageTokens(src *mediaSource) int64 {
	if src == nil || src.Type != "base64" {
		return unsizedImageTokens
	}
	cfg, _, err := img.DecodeConfig(base64.NewDecoder(base64.StdEncoding, strings.NewReader(src.Data)))
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 {
		return unsizedImageTokens
	}
	w, h := int64(cfg.Width), int64(cfg.Height)
	if w > 1<<20 || h > 1<<20 {
		return maxImageTokens
	}
	return min((w*h+749)/750, maxImageTokens)
}
