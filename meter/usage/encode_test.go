package usage

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// FuzzAppendJSON holds AppendJSON to json.Marshal: the same bytes for
// every event, or an error for the same ones.
func FuzzAppendJSON(f *testing.F) {
	f.Add("0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff", "gpt-4o", "<b>&amp;\u2028\x00\x7f\xff", "team", "search", int64(1764000000123456789), int64(3600), int64(12), false, 2)
	f.Add("", "", "", "", "", int64(0), int64(0), int64(0), true, 0)
	f.Add("\"\\\b\f\n\r\t", "m\u2029", "é漢字🙂", "a\"b", "\xed\xa0\x80", int64(-62135596800000000), int64(-86400), int64(-1), true, -1)
	f.Add("id", "m", "", "k", "v", int64(253402300800000000), int64(0), int64(1<<62), false, 1<<30) // year 10000
	// Odd tokens: web search requests (1), which the seeds above, all with
	// none or all refused by both encoders, never compared.
	f.Add("id", "m", "t", "k", "v", int64(1764000000123456789), int64(3600), int64(3), true, 1)
	f.Fuzz(func(t *testing.T, id, model, text, key, value string, nanos, offset, tokens int64, flag bool, n int) {
		e := Event{Version: n, ID: id, Time: time.Unix(0, nanos).In(time.FixedZone("z", int(offset%(48*3600)))),
			CustomerID: text, KeyID: key, Provider: value, Model: model, ServedModel: text, EndUser: value,
			Endpoint: "/v1/chat/completions", Stream: flag, Status: Status(text), HTTPStatus: n, FinishReason: value,
			Usage: Tokens{PromptTokens: tokens, CachedTokens: -tokens, CacheWriteTokens: tokens / 3, CompletionTokens: 7,
				ReasoningTokens: tokens ^ 5, WebSearchRequests: tokens % 2},
			UsageSource: Source(model), TTFTMillis: tokens, DurationMillis: nanos, Error: text, Corrections: key,
			Deployment: model, Attempt: n % 3, RequestID: id, NotCharged: !flag}
		if key != "" || value != "" {
			e.Metadata = map[string]string{key: value, value: text, "z" + key: model}
		}
		want, wantErr := json.Marshal(&e)
		got, err := e.AppendJSON([]byte("prefix"))
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("AppendJSON error %v, json.Marshal's %v", err, wantErr)
		}
		if err != nil {
			if string(got) != "prefix" {
				t.Fatalf("on error dst became %q", got)
			}
			return
		}
		if !bytes.Equal(got, append([]byte("prefix"), want...)) {
			t.Fatalf("AppendJSON:\n%s\njson.Marshal:\n%s", got[len("prefix"):], want)
		}
	})
}

// BenchmarkEncodeEvent compares AppendJSON with json.Marshal, which it
// replaces, on a gateway's typical event.
func BenchmarkEncodeEvent(b *testing.B) {
	e := Event{Version: 1, ID: "0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff", Time: time.Now().UTC(),
		CustomerID: "0197a3c2-1111-7222-8333-444455556666", KeyID: "0197a3c2-9999-7888-8777-666655554444",
		Provider: "openai", Model: "gpt-4o", ServedModel: "gpt-4o-2024-08-06", Metadata: map[string]string{"team": "search"},
		Endpoint: "/v1/chat/completions", Stream: true, Status: StatusOK, HTTPStatus: 200, FinishReason: "stop",
		Usage:       Tokens{PromptTokens: 1200, CachedTokens: 1024, CompletionTokens: 240, ReasoningTokens: 64},
		UsageSource: SourceUpstream, TTFTMillis: 312, DurationMillis: 4810, Deployment: "openai/gpt-4o", Attempt: 1}
	b.Run("append_json", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			buf, _ = e.AppendJSON(buf[:0])
		}
	})
	b.Run("json_marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(&e)
		}
	})
}
