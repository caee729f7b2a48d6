package gateway

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/gateway/openai"
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

// BenchmarkUpstreamBodyShort rewrites loadgen's short-stream request, as
// upstreamBody did ("map") and does ("now").
func BenchmarkUpstreamBodyShort(b *testing.B) {
	r, err := parseChatRequest([]byte(`{"model":"sim-small","messages":[{"role":"user","content":"` +
		strings.Repeat("word ", 50) + `"}],"stream":true,"stream_options":{"include_usage":true}}`))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("map", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = upstreamBodyMap(r, "sim-small")
		}
	})
	b.Run("now", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.upstreamBody("sim-small"); err != nil {
				b.Fatal(err)
			}
		}
	})
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

var requestSeeds = []string{
	`{"model":"sim-small","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true},"max_tokens":200}`,
	` { "messages" : [ ] , "model" : "a" , "n" : 2 } `, `{"model":"a","model":"b","messages":[]}`, `{}`, `null`, `[]`, `"x"`,
	`{"model":"a\u00e9"}`, `{"model":"a\"b"}`, "{\"model\":\"a\xffb\"}", `{"model":""}`, `{"model":5}`, `{"model":null}`,
	`{"\u006dodel":"a"}`, `{"Model":"a"}`, "{\"m\xffodel\":\"a\"}", `{"modèle":"a","model":"b"}`,
	`{"model":"a","stream":"true"}`, `{"model":"a","stream":null}`, `{"model":"a","stream":false}`, `{"model":"a","stream":1}`,
	`{"model":"a","stream_options":{"include_usage":true,"include_usage":false}}`, `{"model":"a","stream_options":[]}`,
	`{"model":"a","x":[1,2.5e3,-0,true,false,null,{"y":"z"}]}`, `{"model":"a"} x`, `{"model":"a",}`, `{"model":"a"`,
	`{"model":"a","deep":` + strings.Repeat("[", 70) + strings.Repeat("]", 70) + `}`, `{"model":"a","n":01}`,
	"{\"model\":\"a\",\"t\":\"\xff\"}", "{\"model\":\"a\u0001\"}", "\ufeff{\"model\":\"a\"}",
	`{"model":"a","stream_options":{}}`, `{"model":"a","stream_options":{"include_usage":null}}`,
	`{"model":"a","stream_options":{"x":[1],"include_usage":false}}`, `{"model":"a","stream_options":{"INCLUDE_USAGE":true}}`,
	`{"model":"a","stream_options":{"include_usage":"true"}}`, `{"model":"a","stream_options":{"include_usage":1}}`,
	`{"model":"a","stream_options":{"include_usag\u0065":true}}`, `{"model":"a","stream_options":5}`,
	`{"model":"a","stream_options":{ "include_usage" : true , "y" : {} }}`, `{"model":"a","stream_options":{"include_usage":truex}}`,
}

// FuzzScanFields holds parseOpenAIRequest to its encoding/json reading
// (parseOpenAIRequestJSON, the code it replaced): whenever scanFields reads
// a body, encoding/json reads the same members; and the request parsed,
// or the error, is the same either way.
func FuzzScanFields(f *testing.F) {
	for _, s := range requestSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkScanFields(t, body)
	})
}

func TestScanFieldsSeeds(t *testing.T) {
	for _, s := range requestSeeds {
		checkScanFields(t, []byte(s))
	}
	if _, ok := scanFields([]byte(requestSeeds[0])); !ok {
		t.Fatal("a plain request is not scanned")
	}
}

func checkScanFields(t *testing.T, body []byte) {
	t.Helper()
	if fields, ok := scanFields(body); ok {
		var want map[string]json.RawMessage
		if err := json.Unmarshal(body, &want); err != nil || want == nil {
			t.Fatalf("%q: scanned, but encoding/json fails: %v", body, err)
		}
		if !reflect.DeepEqual(fields, want) {
			t.Fatalf("%q:\nscan %q\njson %q", body, fields, want)
		}
		for k, v := range fields {
			if cap(v) != len(v) {
				t.Fatalf("%q: %s has room to append into the body", body, k)
			}
		}
	}
	got, gotErr := parseOpenAIRequest(body)
	want, wantErr := parseOpenAIRequestJSON(body)
	if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
		t.Fatalf("%q: error %v, encoding/json %v", body, gotErr, wantErr)
	}
	if gotErr == nil && (got.model != want.model || got.stream != want.stream || got.includeUsage != want.includeUsage ||
		!reflect.DeepEqual(got.fields, want.fields)) {
		t.Fatalf("%q:\nscan %+v\njson %+v", body, got, want)
	}
	if gotErr == nil {
		for _, stream := range []bool{false, true} {
			got.stream, want.stream = stream, stream
			g, _ := got.upstreamBody("up")
			w := upstreamBodyMap(want, "up")
			if string(g) != string(w) {
				t.Fatalf("%q: upstream body\n%s\nwas\n%s", body, g, w)
			}
		}
	}
}

// upstreamBodyMap is upstreamBody as it was, stream_options always
// decoded and encoded again: the reference checkScanFields compares it with.
func upstreamBodyMap(r *chatRequest, model string) []byte {
	fields := maps.Clone(r.fields)
	fields["model"] = openai.AppendString(nil, model)
	if r.stream {
		so := map[string]json.RawMessage{}
		if raw := r.fields["stream_options"]; !isNull(raw) {
			_ = json.Unmarshal(raw, &so)
		}
		so["include_usage"] = json.RawMessage("true")
		fields["stream_options"] = appendObject(nil, so)
	}
	return appendObject(nil, fields)
}

// parseOpenAIRequestJSON is parseOpenAIRequest as it was, with
// encoding/json alone: the reference FuzzScanFields compares it with.
func parseOpenAIRequestJSON(body []byte) (*chatRequest, error) {
	r := &chatRequest{}
	if err := json.Unmarshal(body, &r.fields); err != nil || r.fields == nil {
		return nil, fmt.Errorf("the request body must be a JSON object: %v", jsonError(err))
	}
	if err := json.Unmarshal(r.fields["model"], &r.model); err != nil || r.model == "" {
		return nil, fmt.Errorf("model: must be a non-empty string")
	}
	if !utf8.Valid(r.fields["model"]) {
		return nil, fmt.Errorf("model: is not valid UTF-8")
	}
	if raw, ok := r.fields["stream"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &r.stream); err != nil {
			return nil, fmt.Errorf("stream: must be a boolean")
		}
	}
	if raw, ok := r.fields["stream_options"]; ok && !isNull(raw) {
		var so struct {
			IncludeUsage *bool `json:"include_usage"`
		}
		if err := json.Unmarshal(raw, &so); err != nil {
			return nil, fmt.Errorf("stream_options: must be an object with a boolean include_usage")
		}
		r.includeUsage = so.IncludeUsage != nil && *so.IncludeUsage
	}
	return r, nil
}

// BenchmarkParseRequest parses loadgen's short-stream request with
// encoding/json (as parseOpenAIRequest did) and with the scanner.
func BenchmarkParseRequest(b *testing.B) {
	body := []byte(`{"model":"sim-small","messages":[{"role":"user","content":"` + strings.Repeat("word ", 50) +
		`"}],"stream":true,"stream_options":{"include_usage":true}}`)
	for _, p := range []struct {
		name  string
		parse func([]byte) (*chatRequest, error)
	}{{"json", parseOpenAIRequestJSON}, {"scan", parseOpenAIRequest}} {
		b.Run(p.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.parse(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestRequestBodyNotAnObjectNamesItsJSONType: a body that is JSON but not an
// object (`[]`, a string, a number) was refused with encoding/json's own
// words, "json: cannot unmarshal array into Go value of type
// map[string]json.RawMessage": the client is told the JSON type it sent.
func TestRequestBodyNotAnObjectNamesItsJSONType(t *testing.T) {
	for body, want := range map[string]string{
		`[]`:     "got a JSON array",
		` "hi" `: "got a JSON string",
		`1.5`:    "got a JSON number",
		`true`:   "got a JSON bool",
		`null`:   "got null",
		`{"a":`:  "unexpected end of JSON input",
	} {
		_, err := parseChatRequest([]byte(body))
		if err == nil || err.Error() != "the request body must be a JSON object: "+want {
			t.Errorf("%s: error %v; want %q", body, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "Go value") || strings.Contains(err.Error(), "map[")) {
			t.Errorf("%s: error %q names a Go type", body, err)
		}
	}
}
