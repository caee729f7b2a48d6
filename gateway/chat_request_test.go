package gateway

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestUpstreamBody checks the request sent upstream against what
// encoding/json makes of the client's: the same fields and values, model
// renamed, include_usage forced on streams, a repeated key read once (its
// last value, as the upstream itself would read it).
func TestUpstreamBody(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{`{"model":"a","messages":[{"role":"user","content":"hi \u00e9"}],"temperature":0.5}`,
			`{"model":"up","messages":[{"role":"user","content":"hi é"}],"temperature":0.5}`},
		{`{"model":"a","model":"b","messages":[],"stream":true}`,
			`{"model":"up","messages":[],"stream":true,"stream_options":{"include_usage":true}}`},
		{`{"model":"a","messages":[],"stream":true,"stream_options":{"include_usage":false,"x":1}}`,
			`{"model":"up","messages":[],"stream":true,"stream_options":{"include_usage":true,"x":1}}`},
		{`{"model":"a","messages":[],"stream":true,"stream_options":null}`,
			`{"model":"up","messages":[],"stream":true,"stream_options":{"include_usage":true}}`},
		{` { "messages" : [ ] , "model" : "a" , "n" : 2 } `, `{"model":"up","messages":[],"n":2}`},
	} {
		r, err := parseChatRequest([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		got, err := r.upstreamBody("up")
		if err != nil {
			t.Fatal(err)
		}
		var g, w any
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: upstream body %s is not JSON: %v", tc.in, got, err)
		}
		_ = json.Unmarshal([]byte(tc.want), &w)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("%s:\n got %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

// BenchmarkUpstreamBody rewrites a request with a 100 KB conversation.
func BenchmarkUpstreamBody(b *testing.B) {
	body := []byte(`{"model":"sim-small","messages":[{"role":"system","content":"You are helpful."},{"role":"user","content":"` +
		strings.Repeat("Tell me about the sea, the sky and everything between them. ", 1700) +
		`"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":200,"temperature":0.7}`)
	r, err := parseChatRequest(body)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.upstreamBody("sim-small"); err != nil {
			b.Fatal(err)
		}
	}
}
