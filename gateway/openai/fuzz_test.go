package openai

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/fixture"
	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// FuzzTaps feeds arbitrary streams to the chat and Responses taps: usage
// extraction must never panic, and never report a negative figure that the
// input did not contain.
func FuzzTaps(f *testing.F) {
	dir, err := fixture.Dir()
	if err != nil {
		f.Fatal(err)
	}
	for _, sub := range []string{"openai", "openai-responses"} {
		names, _ := fixture.Streams(dir, sub)
		for _, n := range names {
			b, err := os.ReadFile(filepath.Join(dir, n))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte("data: {\"usage\":{\"prompt_tokens\":1e99}}\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[null]}}],\"usage\":null}\n\n"))
	f.Add([]byte("data: {\"object\":\"text_completion\",\"choices\":[{\"text\":\"tok \\u00e9\",\"index\":0,\"finish_reason\":null}]}\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r, rr tap.Report
		var tp ChatTap
		rd := sse.NewReader(bytes.NewReader(b))
		var rt ResponsesTap
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			if c, err := ParseChunk(ev.Data); err == nil {
				tp.Chunk(c, &r)
			}
			rt.Event(&ev, &rr)
		}
		_ = ResponsesBody(b, &rr)
	})
}

func BenchmarkChatTap(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hello there "},"finish_reason":null}],"usage":null}`)
	var tp ChatTap
	var r tap.Report
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		c, err := ParseChunk(chunk)
		if err != nil {
			b.Fatal(err)
		}
		tp.Chunk(c, &r)
		r.Output.Reset()
	}
}
