package usage_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

var benchEvent = usage.Event{Version: 1, ID: "0197a3c2-1111-7222-8333-444455556666", Time: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
	CustomerID: "0197a3c2-aaaa-7bbb-8ccc-ddddeeeeffff", KeyID: "0197a3c2-9999-7888-8777-666655554444", Provider: "openai",
	Model: "gpt-4o-mini", ServedModel: "gpt-4o-mini-2024-07-18", Endpoint: "/v1/chat/completions", Stream: true,
	Status: usage.StatusOK, HTTPStatus: 200, FinishReason: "stop", UsageSource: usage.SourceUpstream,
	Usage: usage.Tokens{PromptTokens: 1234, CachedTokens: 1024, CompletionTokens: 321, ReasoningTokens: 128}, TTFTMillis: 412, DurationMillis: 5230}

// BenchmarkEventEncode is the gateway's cost per event: JSON for JetStream.
func BenchmarkEventEncode(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(&benchEvent); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEventDecode is the worker's cost per event: JSON and validation.
func BenchmarkEventDecode(b *testing.B) {
	data, _ := json.Marshal(&benchEvent)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		var e usage.Event
		if err := json.Unmarshal(data, &e); err != nil {
			b.Fatal(err)
		}
		if err := e.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode is the worker's cost per event since Decode
// replaced json.Unmarshal (BenchmarkEventDecode, measured beside it):
// decoding and validation.
func BenchmarkDecode(b *testing.B) {
	data, _ := json.Marshal(&benchEvent)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		e, err := usage.Decode(data)
		if err != nil {
			b.Fatal(err)
		}
		if err := e.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}
