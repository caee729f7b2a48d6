package openai

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
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
	`{"choices":[{"message":{"content":"a","tool_calls":[{"function":{"arguments":"{}","name":"f"}}]},"delta":{"reasoning":"r","tool_calls":[null,{"function":null}]}}]}`,
	`{"choices":[{"delta":{"content":"a\u00e9\ud83d\ude00\ud800\n"}},null,{"finish_reason":"stop"}],"created":-0}`,
	`{"Choices":[]}`, `{"choices":[],"choices":[]}`, `{"\u0069d":"x"}`, `{"id":"a\"b"}`, `{"created":1.5}`, `{"created":"1"}`,
	`{"error":null,"choices":null}`, `{"error":{"message":"x"}}`, `null`, `[]`, `{"choices":[{"delta":{"content":5}}]}`,
	"{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}", `{"a":[1,2,{"b":[]}]} x`, `{"model":"m"}{}`,
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
	if c.Usage != nil || c.Error != nil || string(s.ID) != c.ID || string(s.Model) != c.Model ||
		s.Created != c.Created || s.Choices != len(c.Choices) || string(s.FinishReason) != c.FinishReason() {
		t.Fatalf("%q:\nscan %+v\njson %+v", data, s, c)
	}
	var fast, slow tap.Report
	var fastTap, slowTap ChatTap
	fastTap.Scanned(&s, &fast)
	slowTap.Chunk(c, &slow)
	if fast.Output.String() != slow.Output.String() || fast.ServedModel != slow.ServedModel ||
		fast.FinishReason != slow.FinishReason || fastTap != slowTap || fast.Reported || fast.Final {
		t.Fatalf("%q: tp differs:\nscan output %q model %q finish %q\njson output %q model %q finish %q",
			data, fast.Output.String(), fast.ServedModel, fast.FinishReason,
			slow.Output.String(), slow.ServedModel, slow.FinishReason)
	}
	want, err := sjson.DeleteBytes(bytes.Clone(data), "usage")
	if err != nil {
		t.Fatal(err)
	}
	got := s.StripUsage(bytes.Clone(data))
	if s.HasUsageNull() != !bytes.Equal(want, data) || !sameJSON(got, want) {
		t.Fatalf("%q: StripUsage %q, sjson %q", data, got, want)
	}
}

// sameJSON reports whether a and b are both valid JSON with equal values.
func sameJSON(a, b []byte) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

func TestScanChunkSeeds(t *testing.T) {
	for _, s := range scanSeeds {
		checkScan(t, []byte(s))
	}
}

// TestScanChunkFixtures checks that the fast path applies: every recorded
// chunk that carries neither usage nor an error is scanned, not decoded.
func TestScanChunkFixtures(t *testing.T) {
	var s ChunkScan
	scanned, total := 0, 0
	for _, data := range fixtureChunks(t) {
		checkScan(t, data)
		c, err := ParseChunk(data)
		if err != nil || c.Usage != nil || c.Error != nil {
			continue
		}
		total++
		if !ScanChunk(data, &s) {
			t.Errorf("not scanned: %s", data)
			continue
		}
		scanned++
	}
	if total < 100 || scanned != total {
		t.Fatalf("scanned %d of %d chunks without usage or error", scanned, total)
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

// BenchmarkChatTapScan is BenchmarkChatTap's chunk through the fast path;
// BenchmarkStripUsage compares removing "usage":null with sjson.
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
