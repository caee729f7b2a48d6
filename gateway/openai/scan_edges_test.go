package openai

import (
	"testing"
)

// TestTemplateReadsOnlyChunksOfItsShape: the shortcut reads a chunk by
// the template only when everything but its one text is the template's,
// byte for byte: a chunk of the same length whose bytes before the text
// differ (a usage object where the template had a model), a template
// that held two texts, and an empty reasoning text are read as the full
// scan reads them.
func TestTemplateReadsOnlyChunksOfItsShape(t *testing.T) {
	for _, c := range []struct{ name, prev, next string }{
		// `{"model":"` + 17 bytes + `"` is as long as `{"usage":{"prompt_tokens":7}`.
		{"usage before the text", `{"model":"mmmmmmmmmmmmmmmmm","choices":[{"delta":{"content":"a"}}]}`,
			`{"usage":{"prompt_tokens":7},"choices":[{"delta":{"content":"a"}}]}`},
		{"two texts", `{"choices":[{"delta":{"content":"a","reasoning_content":"r"}}]}`,
			`{"choices":[{"delta":{"content":"a","reasoning_content":"x"}}]}`},
		{"empty reasoning", `{"choices":[{"delta":{"reasoning_content":"r"}}]}`,
			`{"choices":[{"delta":{"reasoning_content":""}}]}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s ChunkScan
			if !ScanChunk([]byte(c.prev), &s) {
				t.Fatal("the first chunk was not scanned")
			}
			checkTemplate(t, &s, []byte(c.next))
		})
	}
	var s ChunkScan
	ScanChunk([]byte(`{"model":"mmmmmmmmmmmmmmmmm","choices":[{"delta":{"content":"a"}}]}`), &s)
	if !ScanChunk([]byte(`{"usage":{"prompt_tokens":7},"choices":[{"delta":{"content":"a"}}]}`), &s) || !s.HasUsage() || s.Usage.PromptTokens != 7 {
		t.Fatalf("usage in a chunk as long as the template: %+v, want 7 prompt tokens", s.Usage)
	}
}
