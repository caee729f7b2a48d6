package anthropic

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// FuzzTap feeds arbitrary streams to a Tap and a Stream: neither may
// panic, figures stay non-negative, a Final report is a Reported one, the
// stream's report matches the tp's, and every payload is valid JSON.
func FuzzTap(f *testing.F) {
	for _, rec := range recordings(f) {
		f.Add(rec.raw)
		for _, ev := range rec.events {
			f.Add(append(append([]byte("event: "+string(ev.Type)+"\ndata: "), ev.Data...), "\n\n"...))
		}
	}
	f.Add([]byte("data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":9223372036854775807,\"iterations\":[{\"input_tokens\":9223372036854775807},{\"input_tokens\":9}]}}\n\n"))
	f.Add([]byte("event: error\ndata: {\"error\":null}\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var tp Tap
		var tr, sr tap.Report
		s := Chat{}.NewStream("id", "m", 1)
		rd := sse.NewReader(bytes.NewReader(in))
		var dst [][]byte
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			tp.Event(&ev, &tr)
			dst = s.Event(&ev, &sr, dst[:0])
			for _, p := range dst {
				if !json.Valid(p) {
					t.Fatalf("invalid payload %q", p)
				}
			}
		}
		u := tr.Usage
		if u.PromptTokens < 0 || u.CachedTokens < 0 || u.CacheWriteTokens < 0 || u.CompletionTokens < 0 ||
			u.ReasoningTokens < 0 || u.WebSearchRequests < 0 {
			t.Fatalf("negative usage %+v", u)
		}
		if tr.Final && !tr.Reported {
			t.Fatal("final but not reported")
		}
		if sr.Usage != tr.Usage || sr.Final != tr.Final || sr.Error != tr.Error || sr.Output.String() != tr.Output.String() {
			t.Fatalf("stream report %+v differs from tp report %+v", sr.Usage, tr.Usage)
		}
		var r tap.Report
		_ = BodyUsage(in, &r)
		_, _ = Chat{}.Body(in, "id", "m", 1, &r)
		_, _, _ = Chat{}.Request(in, "m", true)
		_ = PromptText(in)
	})
}

// FuzzFastDelta checks fastDelta against encoding/json: whenever it reads
// an event, encoding/json reads the same one.
func FuzzFastDelta(f *testing.F) {
	for _, rec := range recordings(f) {
		for _, ev := range rec.events {
			f.Add(ev.Data)
		}
	}
	for _, s := range []string{
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00\ud800x\udc00"}}`,
		` { "type" : "content_block_delta" , "index" : 12 , "delta" : { "type" : "thinking_delta" , "thinking" : "" } } `,
		`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`,
		`{"type":"content_block_delta","index":01,"delta":{"type":"text_delta","text":"x"}}`,
		`{"type":"content_block_delta","index":1e2,"delta":{"type":"text_delta","text":"x"}}`,
		"{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\xff\"}}",
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"\ud83d\u0041"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast wireEvent
		if _, ok := fastDelta(data, &fast, nil); !ok {
			return
		}
		var ref wireEvent
		if err := json.Unmarshal(data, &ref); err != nil {
			t.Fatalf("fastDelta read %q, encoding/json fails: %v", data, err)
		}
		if fast.Type != ref.Type || fast.Index != ref.Index || fast.Delta.Type != ref.Delta.Type ||
			fast.Delta.Text != ref.Delta.Text || fast.Delta.Thinking != ref.Delta.Thinking ||
			fast.Delta.PartialJSON != ref.Delta.PartialJSON || ref.Usage != nil || ref.Message != nil || ref.Error != nil {
			t.Fatalf("%q:\nfast %+v\n ref %+v", data, fast, ref)
		}
	})
}
