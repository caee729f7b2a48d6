package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// FuzzTap feeds arbitrary streams, seeded with the recordings, to Tap, to
// Stream and to the whole-body functions: none may panic; Tap and Stream
// must agree, and record and write the same with the scanner as through
// encoding/json only; every chunk must be JSON; usage must stay a valid
// event's.
func FuzzTap(f *testing.F) {
	dir, recs := geminiFixtures(f)
	for _, rec := range recs {
		f.Add(rec.Raw)
	}
	f.Add(readFixture(f, dir, "gemini/NONSTREAM-unary-implicit-caching.json"))
	f.Add([]byte("data: {\"error\":{\"code\":\"x\",\"message\":1}}\n\n{\n\n\"error\":[]}\n"))
	f.Add([]byte(`data: [{"candidates":[{"index":-3,"content":{"parts":[{"functionCall":{"name":"f","args":[1]}}]},"finishReason":"STOP"}]}]`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var tp Tap
		var slowTap Tap
		s := Chat{}.NewStream("id", "m", 1)
		slow := Chat{}.NewStream("id", "m", 1).(*Stream)
		rt, rs, rst, rss := new(tap.Report), new(tap.Report), new(tap.Report), new(tap.Report)
		var out, slowOut [][]byte
		rd := sse.NewReader(bytes.NewReader(in))
		for {
			ev, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Skip(err)
			}
			tp.Event(&ev, rt)
			slowTap.event(&ev, rst, false)
			out = s.Event(&ev, rs, out[:0])
			slowOut = slow.event(&ev, rss, slowOut[:0], false)
			for _, p := range out {
				if !json.Valid(p) {
					t.Fatalf("chunk is not JSON: %s", p)
				}
			}
			if len(out) != len(slowOut) || !slices.EqualFunc(out, slowOut, bytes.Equal) {
				t.Fatalf("Stream wrote %q, through encoding/json %q", out, slowOut)
			}
		}
		if !sameReport(rt, rst) || !sameReport(rs, rss) {
			t.Fatalf("the scanner's reports %+v and %+v differ from encoding/json's %+v and %+v", rt, rs, rst, rss)
		}
		if rt.Usage != rs.Usage || rt.Final != rs.Final || rt.Error != rs.Error || rt.FinishReason != rs.FinishReason {
			t.Fatalf("Tap %+v and Stream %+v disagree", rt, rs)
		}
		if u := rt.Usage; u.PromptTokens < 0 || u.CachedTokens < 0 || u.CompletionTokens < 0 || u.ReasoningTokens < 0 ||
			(rt.Final && !rt.Reported) {
			t.Fatalf("invalid report %+v", rt)
		}
		for _, s := range []string{rt.Error, rt.ServedModel} {
			if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
				t.Fatalf("%q is unfit for the ledger", s)
			}
		}
		var rb tap.Report
		if body, err := (Chat{}).Body(in, "id", "m", 1, &rb); err == nil && !json.Valid(body) {
			t.Fatalf("body is not JSON: %s", body)
		}
		_ = PromptText(in)
		_, _, _ = ModelFromPath(string(in))
		_, _, _ = Chat{}.Request(in, string(in), true)
	})
}

// syntheticStream is a Gemini stream of n chunks shaped like the
// recordings: a few thought chunks, then text, cumulative usage on each.
func syntheticStream(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		part := `{"text":" and then the model wrote another sentence of ordinary length, word after word."}`
		if i < 5 {
			part = `{"text":"**Thinking**\n\nWeighing the options before answering.\n\n","thought":true}`
		}
		finish := ""
		if i == n-1 {
			finish = `,"finishReason":"STOP"`
		}
		b.WriteString(`data: {"candidates": [{"content": {"parts": [` + part + `],"role": "model"}` + finish + `,"index": 0}],` +
			`"usageMetadata": {"promptTokenCount": 34,"candidatesTokenCount": ` + itoa(i*17) + `,"totalTokenCount": ` + itoa(834+i*17) +
			`,"promptTokensDetails": [{"modality": "TEXT","tokenCount": 34}],"thoughtsTokenCount": 800},` +
			`"modelVersion": "gemini-2.5-pro","responseId": "beHBaJfEMIi-qtsP3769-Q8"}` + "\r\n\r\n")
	}
	return b.Bytes()
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func BenchmarkTap(b *testing.B) { benchTap(b, false) }

func BenchmarkStream(b *testing.B) { benchStream(b, false) }

// benchTap taps a 200-chunk stream; slow decodes every chunk with
// encoding/json.
func benchTap(b *testing.B, slow bool) {
	stream := syntheticStream(200)
	rd := sse.NewReader(bytes.NewReader(stream))
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(bytes.NewReader(stream))
		var t Tap
		var r tap.Report
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			t.event(&ev, &r, !slow)
		}
		if !r.Final {
			b.Fatal("not final")
		}
	}
}

// benchStream translates a 200-chunk stream; slow decodes every chunk with
// encoding/json.
func benchStream(b *testing.B, slow bool) {
	stream := syntheticStream(200)
	rd := sse.NewReader(bytes.NewReader(stream))
	b.SetBytes(int64(len(stream)))
	b.ReportAllocs()
	var out [][]byte
	for b.Loop() {
		rd.Reset(bytes.NewReader(stream))
		s := Chat{}.NewStream("chatcmpl-1", "gemini-2.5-pro", 1700000000).(*Stream)
		var r tap.Report
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			out = s.event(&ev, &r, out[:0], !slow)
		}
	}
}

// TestSyntheticStream keeps the benchmark's input honest.
func TestSyntheticStream(t *testing.T) {
	r := tapStream(t, syntheticStream(200))
	if !r.Final || r.Usage.CompletionTokens != 199*17+800 || r.Usage.PromptTokens != 34 {
		t.Errorf("%+v final %v", r.Usage, r.Final)
	}
}
