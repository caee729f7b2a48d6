package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/sjson"

	"github.com/tollgate-dev/tollgate/gateway/fixture"
	"github.com/tollgate-dev/tollgate/gateway/sse"
	"github.com/tollgate-dev/tollgate/gateway/tap"
)

// fixtureChunks returns the data of every event of the recorded Chat
// Completions streams.
func fixtureChunks(tb testing.TB) [][]byte {
	tb.Helper()
	dir, err := fixture.Dir()
	if err != nil {
		tb.Fatal(err)
	}
	names, err := fixture.Streams(dir, "openai")
	if err != nil {
		tb.Fatal(err)
	}
	var out [][]byte
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			tb.Fatal(err)
		}
		rd := sse.NewReader(bytes.NewReader(b))
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			if ev.HasData {
				out = append(out, bytes.Clone(ev.Data))
			}
		}
	}
	return out
}

var scanSeeds = []string{
	`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}],"usage":null}`,
	`{"usage":null,"id":"c"}`, `{"usage":null}`, `{ "a" : 1 , "usage" : null }`, `{"usage":{"prompt_tokens":1}}`,
	`{"choices":[],"usage":{"prompt_tokens":663,"completion_tokens":50,"total_tokens":837,"completion_tokens_details":{"reasoning_tokens":124}}}`, // xAI: reasoning outside completion
	`{"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":6,"completion_tokens_details":{"reasoning_tokens":3}},"choices":[]}`,
	`{"choices":[{"message":{"content":"a","tool_calls":[{"function":{"arguments":"{}","name":"f"}}]},"delta":{"reasoning":"r","tool_calls":[null,{"function":null}]}}]}`,
	`{"choices":[{"delta":{"content":"a\u00e9\ud83d\ude00\ud800\n"}},null,{"finish_reason":"stop"}],"created":-0}`,
	`{"choices":[{"finish_reason":"stop"},{"finish_reason":"length"}]}`, // the first choice's finish reason, as ParseChunk's
	// keys encoding/json folds to a field by Unicode (U+017F LONG S for 's'): left to ParseChunk
	`{"choices":[],"uſage":{"prompt_tokens":7}}`, `{"choiceſ":[{"delta":{"content":"hi"}}]}`,
	`{"Choices":[]}`, `{"choices":[],"choices":[]}`, `{"\u0069d":"x"}`, `{"id":"a\"b"}`, `{"created":1.5}`, `{"created":"1"}`,
	`{"error":null,"choices":null}`, `{"error":{"message":"x"}}`, `null`, `[]`, `{"choices":[{"delta":{"content":5}}]}`,
	"{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}", `{"a":[1,2,{"b":[]}]} x`, `{"model":"m"}{}`,
	// usage objects: what encoding/json reads into Usage, and what it refuses
	`{"id":"c","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":100,"total_tokens":112,"prompt_tokens_details":{"cached_tokens":3,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":100,"audio_tokens":0}}}`,
	`{"usage":{"prompt_tokens":1,"cost":0.003,"is_byok":false,"cost_details":{"x":null},"prompt_tokens_details":{"cache_write_tokens":2}},"choices":[{"finish_reason":"stop"}]}`,
	`{"usage":{"prompt_tokens":null,"prompt_tokens_details":null,"completion_tokens_details":null}}`, `{"usage":{}}`,
	`{"usage":{"prompt_tokens":-5,"completion_tokens":-0}}`, `{"usage":{"prompt_tokens":1.5}}`, `{"usage":{"prompt_tokens":1e3}}`,
	`{"usage":{"prompt_tokens":"7"}}`, `{"usage":{"prompt_tokens":1,"prompt_tokens":2}}`, `{"usage":{"Prompt_tokens":1}}`,
	`{"usage":{"prompt_tokens":123456789012345678}}`, `{"usage":{"prompt_tokens":1234567890123456789}}`,
	`{"usage":{"prompt_tokens":99999999999999999999}}`, `{"usage":{"total_tokens":true}}`, `{"usage":[]}`, `{"usage":5}`,
	`{"usage":{"prompt_tokens_details":[]}}`, `{"usage":{"prompt_tokens_details":{"cached_tokens":1},"prompt_tokens_details":null}}`,
	`{"usage":{"completion_tokens_details":{"reasoning_tokens":01}}}`, `{"usage":{"prompt_tokens":1},"error":{"message":"x"}}`,
	`{"usage":{"prompt_tokens":1}, "usage":null}`, `{"usage":{"prompt_tokens_details":{"cached_tokens":"1"}}}`,
	`{"usage":{"prompt_tokens":1,"completion_tokens":2},"id":"c"}`, `{"usage":{"prompt_tokens":1}`, `{"usage":{"\u0070rompt_tokens":1}}`,
	`{"":1e700}`, `{"usage":null,"x":-1e700}`, // numbers beyond float64 (found by the fuzzer in CI)
	// the deprecated function_call and a refusal: output, like content
	`{"choices":[{"delta":{"function_call":{"name":"f","arguments":"{\"a\":1}"},"refusal":"no","content":null}}]}`,
	`{"choices":[{"message":{"refusal":"I can't","function_call":null,"tool_calls":[{"function":{"name":"g"}}]},"delta":{"function_call":{"arguments":null}}}]}`,
	`{"choices":[{"delta":{"function_call":{"name":"f","name":"g"}}}]}`, `{"choices":[{"delta":{"refusal":1}}]}`,
	// a custom tool's call and a message's reasoning: left to ParseChunk
	`{"choices":[{"delta":{"tool_calls":[{"index":0,"type":"custom","custom":{"name":"sql","input":"SELECT 1"}}]}}]}`,
	`{"choices":[{"message":{"content":null,"reasoning":"think","tool_calls":[{"custom":{"input":"x"}},{"function":{"name":"f"}}]}}]}`,
}

// FuzzScanChunk checks ScanChunk against encoding/json: whenever it reads
// a chunk, ParseChunk reads it too, with the same fields, and ChatTap
// records the same from either; StripUsage leaves what sjson leaves.
func FuzzScanChunk(f *testing.F) {
	for _, c := range fixtureChunks(f) {
		f.Add(c)
	}
	for _, s := range scanSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkScan(t, data)
	})
}

func checkScan(t *testing.T, data []byte) {
	t.Helper()
	var s ChunkScan
	if !ScanChunk(data, &s) {
		return
	}
	c, err := ParseChunk(data)
	if err != nil {
		t.Fatalf("%q: scanned, but encoding/json fails: %v", data, err)
	}
	if c.Error != nil || string(s.ID) != c.ID || string(s.Model) != c.Model ||
		s.Created != c.Created || s.Choices != len(c.Choices) || string(s.FinishReason) != c.FinishReason() ||
		s.HasUsage() != (c.Usage != nil) || s.UsageOnly() != c.UsageOnly() {
		t.Fatalf("%q:\nscan %+v\njson %+v", data, s, c)
	}
	if c.Usage != nil && (s.Usage != c.Usage.Meter() || s.total != c.Usage.TotalTokens || s.ReasoningOutside != c.Usage.ReasoningOutside()) {
		t.Fatalf("%q: usage differs:\nscan %+v total %d\njson %+v total %d", data, s.Usage, s.total, c.Usage.Meter(), c.Usage.TotalTokens)
	}
	for _, finished := range []bool{false, true} { // Final depends on a finish chunk before
		var fast, slow tap.Report
		fastTap, slowTap := ChatTap{finished: finished}, ChatTap{finished: finished}
		fastTap.Scanned(&s, &fast)
		slowTap.Chunk(c, &slow)
		if fast.Output.String() != slow.Output.String() || fast.ServedModel != slow.ServedModel ||
			fast.FinishReason != slow.FinishReason || fastTap != slowTap || fast.Usage != slow.Usage ||
			fast.Reported != slow.Reported || fast.Final != slow.Final || fast.ReasoningShown != slow.ReasoningShown ||
			fast.ReasoningOutside != slow.ReasoningOutside || fast.Reasoning.String() != slow.Reasoning.String() {
			t.Fatalf("%q: tp differs:\nscan output %q model %q finish %q usage %+v reported %v final %v\n"+
				"json output %q model %q finish %q usage %+v reported %v final %v",
				data, fast.Output.String(), fast.ServedModel, fast.FinishReason, fast.Usage, fast.Reported, fast.Final,
				slow.Output.String(), slow.ServedModel, slow.FinishReason, slow.Usage, slow.Reported, slow.Final)
		}
	}
	want, err := sjson.DeleteBytes(bytes.Clone(data), "usage")
	if err != nil {
		t.Fatal(err)
	}
	got := s.StripUsage(bytes.Clone(data))
	if (s.HasUsageNull() || s.HasUsage()) != !bytes.Equal(want, data) || !sameJSON(got, want) {
		t.Fatalf("%q: StripUsage %q, sjson %q", data, got, want)
	}
}

// sameJSON reports whether a and b are both valid JSON with equal values,
// numbers compared as written (a number beyond float64, such as 1e700, is
// valid JSON, and neither StripUsage nor sjson rewrites one).
func sameJSON(a, b []byte) bool {
	var x, y any
	return decodeNumbers(a, &x) == nil && decodeNumbers(b, &y) == nil && reflect.DeepEqual(x, y)
}

func decodeNumbers(data []byte, v *any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if len(bytes.Trim(data[d.InputOffset():], " \t\r\n")) > 0 {
		return errors.New("data after the value")
	}
	return nil
}

func TestScanChunkSeeds(t *testing.T) {
	for _, s := range scanSeeds {
		checkScan(t, []byte(s))
	}
}

// TestScanChunkFixtures checks that the fast path applies: every recorded
// chunk that carries no error is scanned, not decoded, the usage chunks
// included.
func TestScanChunkFixtures(t *testing.T) {
	var s ChunkScan
	scanned, total, usages := 0, 0, 0
	for _, data := range fixtureChunks(t) {
		checkScan(t, data)
		c, err := ParseChunk(data)
		if err != nil || c.Error != nil {
			continue
		}
		total++
		if !ScanChunk(data, &s) {
			t.Errorf("not scanned: %s", data)
			continue
		}
		scanned++
		if s.HasUsage() {
			usages++
		}
	}
	if total < 100 || scanned != total || usages < 5 {
		t.Fatalf("scanned %d of %d chunks without an error, %d with usage", scanned, total, usages)
	}
}

// TestChatTapFixtures replays every recorded Chat Completions stream
// through ChatTap as the relay does (ScanChunk, and ParseChunk for what it
// cannot read) and through ParseChunk alone: both must record the same,
// and the usage expected.json gives.
func TestChatTapFixtures(t *testing.T) {
	_, recs, err := fixture.Recordings("openai")
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range recs {
		var fast, slow tap.Report
		var fastTap, slowTap ChatTap
		var s ChunkScan
		rd := sse.NewReader(bytes.NewReader(rec.Raw))
		for {
			ev, err := rd.Next()
			if err != nil {
				break
			}
			if !ev.HasData || string(ev.Data) == "[DONE]" {
				continue
			}
			if ScanChunk(ev.Data, &s) {
				fastTap.Scanned(&s, &fast)
			} else if c, err := ParseChunk(ev.Data); err == nil {
				fastTap.Chunk(c, &fast)
			}
			if c, err := ParseChunk(ev.Data); err == nil {
				slowTap.Chunk(c, &slow)
			}
		}
		if fast.Usage != slow.Usage || fast.Reported != slow.Reported || fast.Final != slow.Final || fastTap != slowTap ||
			fast.Output.String() != slow.Output.String() || fast.Error != slow.Error || fast.FinishReason != slow.FinishReason {
			t.Errorf("%s: the scan records %+v, encoding/json %+v", rec.Name, fast.Usage, slow.Usage)
		}
		w := rec.Want
		if w.Source != "upstream" {
			if fast.Reported {
				t.Errorf("%s: usage %+v reported, expected.json says %s", rec.Name, fast.Usage, w.Source)
			}
			continue
		}
		u := fast.Usage
		if !fast.Reported || !fast.Final || u.PromptTokens != w.PromptTokens || u.CachedTokens != w.CachedTokens ||
			u.CacheWriteTokens != w.CacheWriteTokens || u.CompletionTokens != w.CompletionTokens ||
			u.ReasoningTokens != w.ReasoningTokens || u.Total() != w.TotalTokens {
			t.Errorf("%s: recorded %+v (reported %v, final %v), expected.json %+v", rec.Name, u, fast.Reported, fast.Final, w)
		}
	}
}

func TestStripUsage(t *testing.T) {
	for in, want := range map[string]string{
		`{"id":"a","usage":null}`:            `{"id":"a"}`,
		`{"usage":null,"id":"a"}`:            `{"id":"a"}`,
		`{"id":"a", "usage" : null , "b":1}`: `{"id":"a", "b":1}`,
		`{"usage":null}`:                     `{}`,
		`{"id":"a"}`:                         `{"id":"a"}`,
	} {
		var s ChunkScan
		if !ScanChunk([]byte(in), &s) {
			t.Fatalf("%s not scanned", in)
		}
		if got := s.StripUsage([]byte(in)); strings.ReplaceAll(string(got), " ", "") != strings.ReplaceAll(want, " ", "") {
			t.Errorf("StripUsage(%s) = %s, want %s", in, got, want)
		}
	}
}

// BenchmarkChatTapScan is BenchmarkChatTap's chunk through the fast path
// (after the first, by its template: the chunk repeats); BenchmarkStripUsage
// compares removing "usage":null with sjson.
func BenchmarkChatTapScan(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hello there "},"finish_reason":null}],"usage":null}`)
	var tp ChatTap
	var r tap.Report
	var s ChunkScan
	b.SetBytes(int64(len(chunk)))
	b.ReportAllocs()
	for b.Loop() {
		if !ScanChunk(chunk, &s) {
			b.Fatal("not scanned")
		}
		tp.Scanned(&s, &r)
		r.Output.Reset()
	}
}

// BenchmarkUsageChunk reads an include_usage chunk (once per stream) with
// encoding/json (ParseChunk) and with the scanner.
func BenchmarkUsageChunk(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"completion_tokens":100,"total_tokens":112,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":100,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`)
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var tp ChatTap
			var r tap.Report
			c, err := ParseChunk(chunk)
			if err != nil {
				b.Fatal(err)
			}
			tp.Chunk(c, &r)
		}
	})
	b.Run("scan", func(b *testing.B) {
		var s ChunkScan
		b.ReportAllocs()
		for b.Loop() {
			var tp ChatTap
			var r tap.Report
			if !ScanChunk(chunk, &s) {
				b.Fatal("not scanned")
			}
			tp.Scanned(&s, &r)
		}
	})
}

// BenchmarkScanChunkTemplate reads a stream's content chunk (the
// simulator's shape) in full and by the previous chunk's template.
func BenchmarkScanChunkTemplate(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-a27a2fd5df048e0d253c63ab","object":"chat.completion.chunk","created":1795687566,"model":"sim-small",` +
		`"service_tier":"default","system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}],"usage":null}`)
	b.Run("full", func(b *testing.B) {
		var s ChunkScan
		b.SetBytes(int64(len(chunk)))
		b.ReportAllocs()
		for b.Loop() {
			if !s.scan(chunk) {
				b.Fatal("not scanned")
			}
		}
	})
	b.Run("template", func(b *testing.B) {
		// a stream's chunks: the same shape, texts that differ
		chunks := [2][]byte{chunk, bytes.Replace(chunk, []byte(`"tok "`), []byte(`"token, "`), 1)}
		var s ChunkScan
		b.SetBytes(int64(len(chunk)))
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if i++; !ScanChunk(chunks[i&1], &s) {
				b.Fatal("not scanned")
			}
		}
	})
}

func BenchmarkStripUsage(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"hello there "},"finish_reason":null}],"usage":null}`)
	buf := make([]byte, len(chunk))
	b.Run("scan", func(b *testing.B) {
		var s ChunkScan
		b.ReportAllocs()
		for b.Loop() {
			copy(buf, chunk)
			ScanChunk(buf, &s)
			_ = s.StripUsage(buf)
		}
	})
	b.Run("sjson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			copy(buf, chunk)
			_, _ = sjson.DeleteBytes(buf, "usage")
		}
	})
}

// FuzzScanChunkTemplate checks ScanChunk's shortcut against its full scan:
// a ChunkScan that has read prev reads the next chunk (mid spliced into
// prev's text, or mid itself) exactly as a fresh ChunkScan does.
func FuzzScanChunkTemplate(f *testing.F) {
	chunks := fixtureChunks(f)
	for i, c := range chunks {
		f.Add(c, []byte(`"tok "`), true)
		if i+1 < len(chunks) {
			f.Add(c, chunks[i+1], false)
		}
	}
	for _, mid := range []string{`""`, `null`, `"a\"b"`, `"\u00e9\ud800"`, `"x","content":"y"`, "\"\xff\"", `"a" `,
		`"open`, `"a"}]}`, `1`, `"\n"`, "\"\x01\""} {
		f.Add([]byte(scanSeeds[0]), []byte(mid), true)
	}
	f.Add([]byte(`{"choices":[{"delta":{"reasoning_content":""}}],"id":"x","usage":null}`), []byte(`"r"`), true)
	f.Add([]byte(`{"usage":null,"choices":[{"finish_reason":"stop","message":{"content":"a\n"}}],"model":"m"}`), []byte(`"bb"`), true)
	f.Fuzz(func(t *testing.T, prev, mid []byte, splice bool) {
		var s ChunkScan
		ScanChunk(prev, &s)
		data := mid
		if splice && s.tmpl.ok {
			data = slices.Concat(s.tmpl.shape[:s.tmpl.from], mid, s.tmpl.shape[s.tmpl.from:])
		}
		checkTemplate(t, &s, data)
	})
}

// checkTemplate reads data with s, which holds a template, and with a fresh
// ChunkScan, and fails unless both read the same.
func checkTemplate(t *testing.T, s *ChunkScan, data []byte) {
	t.Helper()
	var fresh ChunkScan
	ok, want := ScanChunk(data, s), ScanChunk(data, &fresh)
	if ok != want {
		t.Fatalf("%q: read %v after a template, %v fresh", data, ok, want)
	}
	if !ok {
		return
	}
	if string(s.ID) != string(fresh.ID) || string(s.Model) != string(fresh.Model) || s.Created != fresh.Created ||
		s.Choices != fresh.Choices || string(s.FinishReason) != string(fresh.FinishReason) ||
		string(s.Output) != string(fresh.Output) || s.Reasoning != fresh.Reasoning || string(s.ReasoningText) != string(fresh.ReasoningText) || s.Usage != fresh.Usage ||
		s.total != fresh.total || s.hasUsage != fresh.hasUsage || s.usageFrom != fresh.usageFrom || s.usageTo != fresh.usageTo {
		t.Fatalf("%q:\nafter a template %+v\nfresh %+v", data, s, &fresh)
	}
}

// TestScanChunkTemplate shows the shortcut taken on a stream's content
// chunks (the simulator's shape), with the fields a full scan gives.
func TestScanChunkTemplate(t *testing.T) {
	chunk := func(content string) []byte {
		return []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","service_tier":"default",` +
			`"system_fingerprint":null,"choices":[{"index":0,"delta":{"content":` + content + `},"finish_reason":null}],"usage":null}`)
	}
	var s ChunkScan
	if !ScanChunk(chunk(`"a"`), &s) || !s.tmpl.ok {
		t.Fatal("the first chunk did not become the template")
	}
	for _, c := range []string{`"tok "`, `""`, `"caf\u00e9 \"q\""`, `"` + strings.Repeat("x", 5000) + `"`} {
		data := chunk(c)
		var got ChunkScan
		got.tmpl = s.tmpl
		if !got.tmpl.read(data, &got) {
			t.Fatalf("%s: not read by the template", c)
		}
		checkTemplate(t, &s, data)
		stripped := s.StripUsage(bytes.Clone(data))
		if !bytes.HasSuffix(stripped, []byte(`"finish_reason":null}]}`)) {
			t.Errorf("%s: StripUsage after the template: %s", c, stripped)
		}
	}
	for _, c := range []string{`null`, `"a","role":"assistant"`, `"unterminated`} {
		var got ChunkScan
		got.tmpl = s.tmpl
		if got.tmpl.read(chunk(c), &got) {
			t.Errorf("%s: read by the template", c)
		}
		checkTemplate(t, &s, chunk(c))
	}
}
