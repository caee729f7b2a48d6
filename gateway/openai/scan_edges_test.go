package openai

import (
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage"
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

// bothTaps taps a stream as the relay does (ScanChunk, Scanned) and as
// encoding/json reads it (ParseChunk, Chunk), side by side.
type bothTaps struct {
	s                 ChunkScan
	scanTap, parseTap ChatTap
	scanned, parsed   tap.Report
}

func (b *bothTaps) chunk(t *testing.T, data string) {
	t.Helper()
	if !ScanChunk([]byte(data), &b.s) {
		t.Fatalf("%s: not scanned", data)
	}
	b.scanTap.Scanned(&b.s, &b.scanned)
	c, err := ParseChunk([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	b.parseTap.Chunk(c, &b.parsed)
}

// TestAnEmptyLaterReportKeepsReasoningOutside: a report that counts
// nothing after one that counted its reasoning apart from its completion
// (xAI's) is not taken (Report.SetUsage), and leaves that report's flag:
// the usage billed is still the earlier report corrected, and says so.
func TestAnEmptyLaterReportKeepsReasoningOutside(t *testing.T) {
	chunks := []string{
		`{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`,
		`{"choices":[],"usage":{"prompt_tokens":663,"completion_tokens":50,"total_tokens":837,"completion_tokens_details":{"reasoning_tokens":124}}}`,
		`{"choices":[],"usage":{}}`,
	}
	var b bothTaps
	for _, c := range chunks {
		b.chunk(t, c)
	}
	for name, r := range map[string]*tap.Report{"scan": &b.scanned, "parse": &b.parsed} {
		if r.Usage.CompletionTokens != 174 || !r.ReasoningOutside {
			t.Errorf("%s: completion %d, reasoning outside %v; want 174 (50 + 124), true", name, r.Usage.CompletionTokens, r.ReasoningOutside)
		}
	}
}

// TestANegativeReasoningCountNeverLowersTheCompletion: a total that adds
// up with a negative reasoning count (a hostile upstream's
// {"completion_tokens":20,"reasoning_tokens":-5,"total_tokens":25} with 10
// prompt tokens) is not reasoning counted apart: nothing is taken off the
// completion billed.
func TestANegativeReasoningCountNeverLowersTheCompletion(t *testing.T) {
	data := []byte(`{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":20,"total_tokens":25,"completion_tokens_details":{"reasoning_tokens":-5}}}`)
	c, err := ParseChunk(data)
	if err != nil {
		t.Fatal(err)
	}
	if m := c.Usage.Meter(); m.CompletionTokens != 20 || c.Usage.ReasoningOutside() {
		t.Errorf("encoding/json: completion %d, reasoning outside %v; want 20, false", m.CompletionTokens, c.Usage.ReasoningOutside())
	}
	var s ChunkScan
	if !ScanChunk(data, &s) || s.Usage.CompletionTokens != 20 || s.ReasoningOutside {
		t.Errorf("scan: completion %d, reasoning outside %v; want 20, false", s.Usage.CompletionTokens, s.ReasoningOutside)
	}
}

// TestLenientChunkWithManyCommasInItsTextIsRead: ParseChunkLenient's bound
// counts JSON values, not the commas and braces inside strings: a chunk
// read leniently (its "created" a float) whose text holds more commas
// than the bound (a CSV answer) is read and its text counted, not refused
// as too complex.
func TestLenientChunkWithManyCommasInItsTextIsRead(t *testing.T) {
	text := strings.Repeat("a,{[", maxLenientValues)
	c, err := ParseChunkLenient([]byte(`{"created":1.5,"choices":[{"delta":{"content":"` + text + `"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Choices) != 1 || c.Choices[0].Delta.Content != text {
		t.Fatalf("read %d choices, want the one with its text", len(c.Choices))
	}
}

// TestAChoiceAfterTheUsageChunkUnsettlesTheStream: a usage chunk after
// the finish settles the stream (only [DONE] is to come), and a choice's
// chunk after it, usage or not (n > 1, or output after the report),
// unsettles it again: the relay must read on, not end the stream at a
// quiet period.
func TestAChoiceAfterTheUsageChunkUnsettlesTheStream(t *testing.T) {
	chunks := []struct {
		data    string
		settled bool
	}{
		{`{"choices":[{"index":0,"delta":{"content":"hi"}}]}`, false},
		{`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, false},
		{`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`, true},
		{`{"choices":[{"index":1,"delta":{"content":"more"}}]}`, false},
	}
	var b bothTaps
	for _, c := range chunks {
		b.chunk(t, c.data)
		if b.scanTap.Settled() != c.settled || b.parseTap.Settled() != c.settled {
			t.Fatalf("after %s: settled %v (scan), %v (parse); want %v", c.data, b.scanTap.Settled(), b.parseTap.Settled(), c.settled)
		}
	}
}

// TestAnErrorFrameWithUsageIsTheFinalReport: a mid-stream error frame
// that carries the usage so far (OpenRouter's), with no finish reason and
// whether output came before it or not, ends the stream: its usage is the
// provider's final report, billed as "upstream".
func TestAnErrorFrameWithUsageIsTheFinalReport(t *testing.T) {
	est, err := tap.NewEstimator()
	if err != nil {
		t.Fatal(err)
	}
	errorFrame := `{"error":{"message":"provider overloaded"},"choices":[{"index":0,"delta":{}}],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}`
	for _, before := range []string{"", `{"choices":[{"index":0,"delta":{"content":"partial answer"}}]}`} {
		var r tap.Report
		var ct ChatTap
		for _, data := range []string{before, errorFrame} {
			if data == "" {
				continue
			}
			c, err := ParseChunk([]byte(data))
			if err != nil {
				t.Fatal(err)
			}
			ct.Chunk(c, &r)
		}
		if u, src := r.Resolve(est, tap.Text("prompt")); !r.Final || r.Error == "" || src != usage.SourceUpstream || u.CompletionTokens != 3 {
			t.Errorf("output before %q: final %v, error %q, billed %+v (%s); want the frame's usage, final, upstream", before, r.Final, r.Error, u, src)
		}
	}
}
