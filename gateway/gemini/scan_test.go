package gemini

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// fixtureChunks returns the data of every event of the recorded Gemini
// streams.
func fixtureChunks(tb testing.TB) [][]byte {
	tb.Helper()
	_, recs := geminiFixtures(tb)
	var out [][]byte
	for _, rec := range recs {
		events(tb, rec.Raw, func(ev *sse.Event) {
			if ev.HasData {
				out = append(out, bytes.Clone(ev.Data))
			}
		})
	}
	return out
}

var scanSeeds = []string{
	`{"candidates":[{"content":{"parts":[{"text":"a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00\ud800x\udc00","thought":true}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":1,"cachedContentTokenCount":2,"candidatesTokenCount":3,"toolUsePromptTokenCount":4,"thoughtsTokenCount":5,"totalTokenCount":15},"modelVersion":"m","responseId":"r"}`,
	` { "candidates" : [ null , { "content" : null , "index" : -3 } , { "content" : { "parts" : [ ] } } ] , "modelVersion" : null } `,
	`{"candidates":[{"content":{"parts":[null,{"functionCall":{"name":"f","args":{"a" : [1, 2.5e3]}}},{"functionCall":{"args":null}},{"functionCall":null,"text":null,"thought":null}]},"finishReason":"MALFORMED_FUNCTION_CALL"}]}`,
	`{"candidates":[],"promptFeedback":{"blockReason":"SAFETY","safetyRatings":[]},"usageMetadata":{"promptTokenCount":7}}`,
	`{"candidates":null,"promptFeedback":null,"usageMetadata":null}`, `{}`, `[]`, `{"error":{"code":499}}`, `{"error":null}`,
	`{"candidates":[{"finishReason":"NEW_REASON","index":null,"content":{"parts":[{"thought":false,"text":""}]}}]}`,
	`{"usageMetadata":{"promptTokenCount":123456789012345678}}`, `{"usageMetadata":{"promptTokenCount":1234567890123456789}}`,
	`{"usageMetadata":{"promptTokenCount":-0}}`, `{"usageMetadata":{"promptTokenCount":1.0}}`, `{"usageMetadata":{"promptTokenCount":1e2}}`,
	`{"usageMetadata":{"promptTokenCount":"1"}}`, `{"usageMetadata":{"promptTokenCount":01}}`, `{"usageMetadata":[]}`,
	`{"usageMetadata":{"PromptTokenCount":1}}`, `{"UsageMetadata":{}}`, `{"usagemetadata":{}}`, `{"usageMetadata":{},"usageMetadata":{}}`,
	`{"usag\u0065Metadata":{}}`, "{\"usageMetadat\u212a\":{}}", `{"modelVersion":"a","modelVersion":"b"}`, `{"modelVersion":"m\u00e9"}`,
	"{\"modelVersion\":\"\xff\"}", "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"\xed\xa0\x80\"}]}}]}", `{"candidates":[{"content":[]}]}`,
	`{"candidates":[{"content":{"parts":[{"thought":"true"}]}}]}`, `{"candidates":[{"index":1.5}]}`, `{"candidates":[{"index":99999999999}]}`,
	`{"candidates":[{"content":{"parts":[{"text":"a","text":"b"}]}}]}`, `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","Name":"g"}}]}}]}`,
	`{"candidates":[1]}`, `{"candidates":{}}`, `{"candidates":[{"content":{"parts":[1]}}]}`, `{"x":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`,
	`{"candidates":[]} x`, `{"candidates":[],}`, `{"a":1}{}`, `{"responseId":"\x", "candidates":[]}`,
	lenientCounts, `{"usageMetadata":{"promptTokenCount":"1\u0031","candidatesTokenCount":-5,"totalTokenCount":1.5}}`,
	`{"usageMetadata":{"promptTokenCount":"abc","candidatesTokenCount":9223372036854775808,"thoughtsTokenCount":[1],"totalTokenCount":{"a":1}}}`,
	`{"usageMetadata":{"promptTokenCount":true,"candidatesTokenCount":1e999999999,"thoughtsTokenCount":0e999,"toolUsePromptTokenCount":"\xff"}}`,
	`{"usageMetadata":{"promptTokenCount":-,"candidatesTokenCount":1}}`, `{"usageMetadata":{"promptTokenCount":"1}}`,
	`{"candidates":[{"content":{"parts":[{"executableCode":{"language":"PYTHON","code":"print(1)\n"}},{"codeExecutionResult":{"outcome":"OUTCOME_OK","output":"1\n"}}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"executableCode":null,"codeExecutionResult":{}},{"executableCode":{"code":null,"output":"x"}}]}}]}`,
	`{"candidates":[{"content":{"parts":[{"executableCode":{"code":1}},{"codeExecutionResult":"x"},{"executableCode":{"Code":"a"}}]}}]}`,
}

// lenientCounts has a count in every form proto3 JSON allows for an int32.
const lenientCounts = `{"usageMetadata":{"promptTokenCount":"11","cachedContentTokenCount":1.0,"candidatesTokenCount":1.5e2,` +
	`"toolUsePromptTokenCount":"2e0","thoughtsTokenCount":7,"totalTokenCount":9223372036854775807}}`

// TestScanLenientCounts checks that the scanner itself reads counts
// written as strings, in exponent form or as integral fractions, as
// decode does.
func TestScanLenientCounts(t *testing.T) {
	var s scanner
	if !checkScan(t, &s, []byte(lenientCounts)) {
		t.Fatal("not scanned")
	}
	var r response
	s.response([]byte(lenientCounts), &r)
	want := usageMetadata{PromptTokenCount: 11, CachedContentTokenCount: 1, CandidatesTokenCount: 150,
		ToolUsePromptTokenCount: 2, ThoughtsTokenCount: 7, TotalTokenCount: 9223372036854775807}
	if r.UsageMetadata == nil || *r.UsageMetadata != want {
		t.Errorf("scanned %s", dump(&r))
	}
}

// FuzzScan checks the scanner against encoding/json: whenever it reads a
// chunk, decode reads the same response from it, field for field.
func FuzzScan(f *testing.F) {
	for _, c := range fixtureChunks(f) {
		f.Add(c)
	}
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	var s scanner
	f.Fuzz(func(t *testing.T, data []byte) {
		checkScan(t, &s, data)
	})
}

// checkScan reads data with s as Tap does and, if it could, compares the
// response with decode's.
func checkScan(t *testing.T, s *scanner, data []byte) bool {
	t.Helper()
	b := bytes.TrimSpace(data)
	var fast response
	if len(b) == 0 || b[0] != '{' || !s.response(b, &fast) {
		return false
	}
	ref := decode(data, nil)
	if len(ref) != 1 {
		t.Fatalf("%q: scanned, but decode reads %d responses", data, len(ref))
	}
	if !reflect.DeepEqual(fast, ref[0]) {
		t.Fatalf("%q:\nscan %s\njson %s", data, dump(&fast), dump(&ref[0]))
	}
	return true
}

// dump shows a response with what its pointers point to.
func dump(r *response) string {
	s := fmt.Sprintf("%+v", *r)
	if r.UsageMetadata != nil {
		s += fmt.Sprintf(" usage %+v", *r.UsageMetadata)
	}
	if r.PromptFeedback != nil {
		s += fmt.Sprintf(" feedback %+v", *r.PromptFeedback)
	}
	for _, c := range r.Candidates {
		for _, p := range c.Content.Parts {
			if p.FunctionCall != nil {
				s += fmt.Sprintf(" call %+v", *p.FunctionCall)
			}
			for _, c := range [2]*codePart{p.ExecutableCode, p.CodeExecutionResult} {
				if c != nil {
					s += fmt.Sprintf(" code %+v", *c)
				}
			}
		}
	}
	return s
}

func TestScanSeeds(t *testing.T) {
	var s scanner
	scanned := 0
	for _, seed := range scanSeeds {
		if checkScan(t, &s, []byte(seed)) {
			scanned++
		}
	}
	if scanned < 8 {
		t.Errorf("only %d seeds scanned", scanned)
	}
}

// TestScanFixtures checks that the fast path applies: every recorded
// chunk is read by the scanner, not by encoding/json.
func TestScanFixtures(t *testing.T) {
	var s scanner
	chunks := fixtureChunks(t)
	for _, data := range chunks {
		if !checkScan(t, &s, data) {
			t.Errorf("not scanned: %s", data)
		}
	}
	if len(chunks) < 30 {
		t.Fatalf("only %d recorded chunks", len(chunks))
	}
}

// TestScanFallback checks that what the scanner leaves goes to
// encoding/json, and that Tap reports the same either way, on the
// recordings too.
func TestScanFallback(t *testing.T) {
	streams := [][]byte{[]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"Text\":\"folded\"}]}}],\"usageMetadata\":{\"promptTokenCount\":3}}\n\n" +
		"data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"x\"}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":1.0e0}}\n\n")}
	_, recs := geminiFixtures(t)
	for _, rec := range recs {
		streams = append(streams, rec.Raw)
	}
	for i, stream := range streams {
		fast, slow := tapStream(t, stream), slowTapStream(t, stream)
		if !sameReport(fast, slow) {
			t.Errorf("stream %d: scanned %+v, decoded %+v", i, fast, slow)
		}
	}
	if r := tapStream(t, streams[0]); r.Output.String() != "foldedx" || !r.Final || r.FinishReason != "stop" {
		t.Errorf("output %q final %v finish %q", r.Output.String(), r.Final, r.FinishReason)
	}
}

// sameReport compares what a Tap records.
func sameReport(a, b *tap.Report) bool {
	return a.Usage == b.Usage && a.Reported == b.Reported && a.Final == b.Final && a.Error == b.Error &&
		a.FinishReason == b.FinishReason && a.ServedModel == b.ServedModel && a.Output.String() == b.Output.String()
}

// slowTapStream is tapStream through encoding/json only.
func slowTapStream(tb testing.TB, stream []byte) *tap.Report {
	tb.Helper()
	var t Tap
	r := new(tap.Report)
	events(tb, stream, func(ev *sse.Event) { t.event(ev, r, false) })
	return r
}

// BenchmarkTapSlow and BenchmarkStreamSlow are BenchmarkTap and
// BenchmarkStream with every chunk decoded by encoding/json, as before the
// scanner.
func BenchmarkTapSlow(b *testing.B) { benchTap(b, true) }

func BenchmarkStreamSlow(b *testing.B) { benchStream(b, true) }

// BenchmarkScan is one chunk of the synthetic stream through each path.
func BenchmarkScan(b *testing.B) {
	stream := syntheticStream(10)
	chunk := bytes.TrimSpace(bytes.TrimPrefix(stream[:bytes.Index(stream, []byte("\r\n\r\n"))], []byte("data:")))
	b.Run("scan", func(b *testing.B) {
		var s scanner
		b.ReportAllocs()
		for b.Loop() {
			var r response
			if !s.response(chunk, &r) {
				b.Fatal("not scanned")
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		var resps []response
		b.ReportAllocs()
		for b.Loop() {
			resps = decode(chunk, resps[:0])
		}
	})
	// A non-streamed answer's body, tapped whole (scanner first; it was
	// the json path, its search for shadowed keys included).
	b.Run("body", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r tap.Report
			if err := BodyUsage(chunk, &r); err != nil || !r.Reported {
				b.Fatal("no usage", err)
			}
		}
	})
}

// TestBodyUsageCountsAShadowedBody: a whole body goes through the scanner
// first now; one it refuses for a key spelled otherwise on the way to the
// output still goes to decode, and is counted whole.
func TestBodyUsageCountsAShadowedBody(t *testing.T) {
	words := strings.Repeat("word ", 100)
	for name, tc := range map[string]struct {
		body     string
		shadowed bool
	}{
		"plain":    {`{"candidates":[{"content":{"parts":[{"text":"` + words + `"}]}}]}`, false},
		"shadowed": {`{"candidates":[{"content":{"parts":[{"text":"` + words + `","TEXT":""}]}}]}`, true},
	} {
		var r tap.Report
		if err := BodyUsage([]byte(tc.body), &r); err != nil {
			t.Fatal(name, err)
		}
		if got, want := r.Output.Len(), len(words); got < want || tc.shadowed != (got > want) {
			t.Errorf("%s: %d bytes of output counted, want %d (the text) or, shadowed, the whole body's %d", name, got, want, len(tc.body))
		}
	}
}
