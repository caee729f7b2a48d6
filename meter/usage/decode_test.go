package usage_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage"
)

// decodeSeeds are events as the gateway writes them and as it never does:
// keys reordered, unknown, repeated or in another case, escapes, nulls,
// non-integers, white space, truncation, trailing data.
var decodeSeeds = []string{
	`{}`,
	` { "v" : 1 , "id" : "x" } `,
	`{"end_user":"u-1","metadata":{"team":"search","k":"a","k":"b"}}`,
	`{"metadata":{}}`,
	`{"deployment":"openai-east/gpt-4o","attempt":2,"request_id":"0197a3c2-1111-7222-8333-444455556666","not_charged":true}`,
	`{"attempt":1,"attempt":2}`,
	`{"not_charged":1}`,
	`{"not_charged":false,"not_charged":true}`,
	`{"metadata":null}`,
	`{"metadata":{"a":1}}`,
	`{"metadata":{"a\u0062":"c"}}`,
	`{"metadata":{"a":"b"},"metadata":{"c":"d"}}`,
	`{"end_user":"\u0000"}`,
	`{"v":1,"id":"0197a3c2-1111-7222-8333-444455556666","time":"2026-01-02T03:04:05.000000006Z","usage":{"prompt_tokens":5,"completion_tokens":-0}}`,
	`{"usage":{"prompt_tokens":5},"usage":{"completion_tokens":2}}`,
	`{"V":1}`,
	`{"id":"a","id":"b"}`,
	`{"id":"a\u0062"}`,
	`{"id":"\"q\""}`,
	`{"id":"é"}`,
	"{\"id\":\"\xff\"}",
	`{"id":null}`,
	`{"usage":null}`,
	`{"v":1.0}`,
	`{"v":01}`,
	`{"v":1e2}`,
	`{"v":-}`,
	`{"v":99999999999999999999}`,
	`{"v":999999999999999999}`,
	`{"http_status":-9223372036854775808}`,
	`{"stream":true,"stream":false}`,
	`{"stream":tru}`,
	`{"stream":"true"}`,
	`{"time":"2026-01-02T03:04:05+01:00"}`,
	`{"time":"2026-01-02 03:04:05Z"}`,
	`{"time":null}`,
	`{"extra":{"a":[1,2]},"v":1}`,
	`{"v":1}x`,
	`{"v":1`,
	`{"v":1,}`,
	`[1]`,
	``,
	`{"usage":{"web_search_requests":3,"reasoning_tokens":1,"cache_write_tokens":2,"cached_tokens":4}}`,
	`{"error":"upstream said \"no\"","status":"upstream_error"}`,
	// Status and usage_source other than the bench event's "ok" and
	// "upstream": a decoder that wrote those whatever was sent passed.
	`{"status":"timeout","usage_source":"estimated"}`,
}

// FuzzDecode checks Decode against json.Unmarshal: the same
// event, and an error exactly when json.Unmarshal errs.
func FuzzDecode(f *testing.F) {
	enc, _ := json.Marshal(&benchEvent)
	f.Add(enc)
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want usage.Event
		wantErr := json.Unmarshal(data, &want)
		got, err := usage.Decode(data)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("Decode(%q) error = %v, json.Unmarshal's = %v", data, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("Decode(%q) =\n%+v\njson.Unmarshal:\n%+v", data, got, want)
		}
	})
}

func TestDecodeFastPathAllocatesOnce(t *testing.T) {
	data, _ := json.Marshal(&benchEvent)
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := usage.Decode(data); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 1 {
		t.Errorf("Decode of the gateway's encoding: %v allocations, want 1", allocs)
	}
}
