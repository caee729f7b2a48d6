package openai

import (
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// TestCustomToolCallsAreOutput (an attacker's review): OpenAI's custom
// tools stream their call as tool_calls[].custom.input (free-form text, not
// a function's JSON arguments), and some providers give a whole answer's
// reasoning as message.reasoning. Neither was read, so a stream that
// ended without a usage report billed no output for them. Both are output
// now, read by ParseChunk (ScanChunk leaves such a chunk to it), in a
// stream's chunk, in a whole answer, and by the lenient reader.
func TestCustomToolCallsAreOutput(t *testing.T) {
	for _, c := range []struct{ data, output string }{
		{`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"type":"custom","custom":{"name":"run_sql","input":"SELECT count(*) FROM t"}}]}}]}`,
			"run_sqlSELECT count(*) FROM t"},
		{`{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"custom","custom":{"name":"f","input":"free text"}}]}}]}`,
			"ffree text"},
		{`{"choices":[{"index":0,"message":{"role":"assistant","reasoning":"step by step","content":"42"}}]}`,
			"42step by step"},
		{`{"created":1.5,"choices":[{"index":0,"delta":{"tool_calls":[{"custom":{"name":"f","input":"lenient"}}]}}]}`, "flenient"},
		// "custom" of another type: the chunk's usage is still read.
		{`{"choices":[{"index":0,"delta":{"tool_calls":[{"custom":"free text"}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7}}`, ""},
	} {
		var s ChunkScan
		if ScanChunk([]byte(c.data), &s) {
			t.Errorf("%s: scanned; want it left to ParseChunk", c.data)
		}
		ch, err := ParseChunk([]byte(c.data))
		if err != nil {
			if ch, err = ParseChunkLenient([]byte(c.data)); err != nil {
				t.Fatalf("%s: %v", c.data, err)
			}
		}
		var r tap.Report
		var tp ChatTap
		tp.Chunk(ch, &r)
		if got := r.Output.String(); got != c.output {
			t.Errorf("%s: output %q, want %q", c.data, got, c.output)
		}
		if c.output == "" && (!r.Reported || r.Usage.CompletionTokens != 7) {
			t.Errorf("%s: usage %+v (reported %v), want the chunk's", c.data, r.Usage, r.Reported)
		}
	}
}
