package jsonscan

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"
)

func TestSetMember(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"model":"a","stream":true}`, `{"model":"b","stream":true}`},
		{` { "x" : 1 , "model" : "a" } `, ` { "x" : 1 , "model" : "b" } `},
		{`{}`, `{"model":"b"}`},
		{` {"x":[1,{"model":"inner"}]}`, ` {"x":[1,{"model":"inner"}],"model":"b"}`},
		{`{"model":"a","model":{"y":2}}`, `{"model":"b","model":"b"}`},
		{`{"mod\u0065l":"a"}`, `{"mod\u0065l":"a","model":"b"}`},
	} {
		got, err := SetMember([]byte(tt.in), "model", []byte(`"b"`))
		if err != nil || string(got) != tt.want {
			t.Errorf("SetMember(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{``, `[]`, `{"a":}`, `{"a":1} x`, `"s"`, `{"a":1`} {
		if _, err := SetMember([]byte(bad), "model", []byte(`"b"`)); err != ErrNotObject {
			t.Errorf("SetMember(%q) = %v, want ErrNotObject", bad, err)
		}
	}
}

// FuzzSetMember checks SetMember against encoding/json: it accepts exactly
// the valid JSON objects, and the result decodes to the input's members
// with "model" set.
func FuzzSetMember(f *testing.F) {
	for _, s := range append(seeds, `{"model":"x","n":1}`, `{"n":{"model":1}}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want map[string]json.RawMessage
		wantErr := json.Unmarshal(b, &want) != nil || want == nil || depth(b) > MaxDepth
		got, err := SetMember(b, "model", []byte(`"m"`))
		if (err != nil) != wantErr {
			t.Fatalf("%q: SetMember error %v, encoding/json says invalid=%v", b, err, wantErr)
		}
		if err != nil {
			return
		}
		var have map[string]json.RawMessage
		if err := json.Unmarshal(got, &have); err != nil {
			t.Fatalf("%q became %q: %v", b, got, err)
		}
		want["model"] = json.RawMessage(`"m"`)
		// encoding/json folds keys by case: compare only exact keys.
		for k := range maps.Keys(want) {
			if string(have[k]) == "" {
				t.Fatalf("%q became %q: key %q lost", b, got, k)
			}
		}
		if string(have["model"]) != `"m"` {
			t.Fatalf("%q became %q: model is %s", b, got, have["model"])
		}
	})
}

func TestDeleteMember(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"id":"x","usage":{"a":1},"choices":[]}`, `{"id":"x","choices":[]}`},
		{`{"usage":null}`, `{}`},
		{` { "usage" : 1 , "b" : 2 } `, ` { "b" : 2 } `},
		{`{"a":1}`, `{"a":1}`},
		{`{"usage":1,"a":{"usage":2},"usage":3}`, `{"a":{"usage":2}}`},
		// what encoding/json would read into a field "usage" goes too
		{`{"Usage":1,"b":2}`, `{"b":2}`},
		{`{"us\u0061ge":1,"b":2}`, `{"b":2}`},
		{`{"USAGE":1,"u\u017fage":2,"b":3}`, `{"b":3}`}, // ſ folds to s
		{`{"usages":1,"usag":2}`, `{"usages":1,"usag":2}`},
	} {
		got, err := DeleteMember([]byte(tt.in), "usage")
		if err != nil || string(got) != tt.want {
			t.Errorf("DeleteMember(%s) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

// FuzzDeleteMember checks DeleteMember against encoding/json: it accepts
// exactly the valid JSON objects; the result decodes to the input's
// members without "usage"; and nothing in it decodes into a struct field
// "usage".
func FuzzDeleteMember(f *testing.F) {
	for _, s := range append(seeds, `{"usage":{"x":1},"n":1}`, `{"n":{"usage":1}}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want map[string]json.RawMessage
		wantErr := json.Unmarshal(b, &want) != nil || want == nil || depth(b) > MaxDepth
		got, err := DeleteMember(b, "usage")
		if (err != nil) != wantErr {
			t.Fatalf("%q: DeleteMember error %v, encoding/json says invalid=%v", b, err, wantErr)
		}
		if err != nil {
			return
		}
		if !bytes.Equal(got, b) && !MayHaveMember(b, "usage") {
			t.Fatalf("%q: DeleteMember deleted a member MayHaveMember says it cannot hold", b)
		}
		var have map[string]json.RawMessage
		if err := json.Unmarshal(got, &have); err != nil {
			t.Fatalf("%q became %q: %v", b, got, err)
		}
		var field struct {
			Usage json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal(got, &field); err != nil || field.Usage != nil {
			t.Fatalf("%q became %q, which still decodes into a usage field: %s (%v)", b, got, field.Usage, err)
		}
		for k := range want {
			if strings.EqualFold(k, "usage") {
				delete(want, k)
			}
		}
		if len(have) != len(want) {
			t.Fatalf("%q became %q: %d members, want %d", b, got, len(have), len(want))
		}
		for k, v := range want {
			if !bytes.Equal(compact(have[k]), compact(v)) {
				t.Fatalf("%q became %q: %q = %s, want %s", b, got, k, have[k], v)
			}
		}
	})
}

func compact(b []byte) []byte {
	var out bytes.Buffer
	_ = json.Compact(&out, b)
	return out.Bytes()
}

func TestMember(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		ok       bool
	}{
		{`{"id":"x","usage":{"a":1},"choices":[]}`, `{"a":1}`, true},
		{` { "usage" : [1, 2] } `, `[1, 2]`, true},
		{`{"a":{"usage":2}}`, ``, false},
		{`{"usage":1,"usage":3}`, `3`, true},
		{`{}`, ``, false},
	} {
		got, ok, err := Member([]byte(tt.in), "usage")
		if err != nil || ok != tt.ok || string(got) != tt.want {
			t.Errorf("Member(%s) = %s, %v, %v; want %s, %v", tt.in, got, ok, err, tt.want, tt.ok)
		}
	}
	for _, bad := range []string{``, `[]`, `{"a":}`, `{"a":1} x`, `{"usage":1`} {
		if _, _, err := Member([]byte(bad), "usage"); err != ErrNotObject {
			t.Errorf("Member(%q) = %v, want ErrNotObject", bad, err)
		}
	}
}

// FuzzMember checks Member against encoding/json: it accepts exactly the
// valid JSON objects, and finds the member encoding/json finds.
func FuzzMember(f *testing.F) {
	for _, s := range append(seeds, `{"usage":{"prompt_tokens":1},"n":1}`, `{"n":{"usage":1}}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want map[string]json.RawMessage
		wantErr := json.Unmarshal(b, &want) != nil || want == nil || depth(b) > MaxDepth
		got, ok, err := Member(b, "usage")
		if (err != nil) != wantErr {
			t.Fatalf("%q: Member error %v, encoding/json says invalid=%v", b, err, wantErr)
		}
		if err != nil || !bytes.Contains(b, []byte(`"usage"`)) {
			return // encoding/json folds keys by case and unescapes them: compare only plain keys
		}
		w, has := want["usage"]
		if ok && has && !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(w)) {
			t.Fatalf("%q: Member = %s, encoding/json %s", b, got, w)
		}
		if ok && !json.Valid(got) {
			t.Fatalf("%q: Member = %q, not JSON", b, got)
		}
	})
}

func TestAmbiguousKey(t *testing.T) {
	for _, tt := range []struct {
		in, want string
		bad      bool
	}{
		{`{"model":"m","stream":true}`, "", false},
		{`{"model":"m","stream":true,"Stream":false}`, "Stream", true},
		{`{"STREAM":true,"model":"m"}`, "STREAM", true},
		{`{"model":"m","str\u0065am":true}`, "stream", true},
		{`{"model":"m","model":"n"}`, "model", true},
		{`{"model":"m","a":{"Stream":1},"streams":true}`, "", false},
		{`{"model":"m","ſtream":true}`, "ſtream", true}, // ſ folds to s
		{`{}`, "", false},
		{`not json`, "", false},
	} {
		got, bad, _ := AmbiguousKey([]byte(tt.in), "model", "stream")
		if got != tt.want || bad != tt.bad {
			t.Errorf("AmbiguousKey(%s) = %q, %v; want %q, %v", tt.in, got, bad, tt.want, tt.bad)
		}
	}
	// Read to the end or not: more after an object, empty or not, is not
	// scanned, and may hold the member.
	for in, want := range map[string]bool{`{}`: true, `{} {"Stream":1}`: false, `{"model":"m"}`: true, `{"model":"m"} {"Stream":1}`: false} {
		if _, _, scanned := AmbiguousKey([]byte(in), "model", "stream"); scanned != want {
			t.Errorf("AmbiguousKey(%s): scanned %v, want %v", in, scanned, want)
		}
	}
}

// FuzzAmbiguousKey checks AmbiguousKey against encoding/json: a valid
// object it passes decodes, into a struct field "stream", the value of its
// one exact "stream" member, or leaves it unset when there is none.
func FuzzAmbiguousKey(f *testing.F) {
	for _, s := range append(seeds, `{"stream":true,"Stream":false}`, `{"str\u0065am":1}`, `{"stream":1}`) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, bad, _ := AmbiguousKey(b, "stream"); bad {
			return
		}
		var field struct {
			Stream json.RawMessage `json:"stream"`
		}
		if json.Unmarshal(b, &field) != nil || depth(b) > MaxDepth {
			return
		}
		exact, ok, err := Member(b, "stream")
		if err != nil {
			t.Fatalf("%q: Member: %v", b, err)
		}
		if ok != (field.Stream != nil) || ok && !bytes.Equal(compact(exact), compact(field.Stream)) {
			t.Fatalf("%q passed: encoding/json reads stream %s, the exact member is %s (%v)", b, field.Stream, exact, ok)
		}
	})
}

func TestMayHaveMember(t *testing.T) {
	for _, tt := range []struct {
		obj  string
		want bool
	}{
		{`{"usage":null}`, true},
		{`{"USAGE":1}`, true},
		{`{"us\u0061ge":1}`, true},
		{`{"uſage":1}`, true},
		{`{"id":"c","choices":[{"delta":{"content":"line\n\"quoted\""}}]}`, false},
		{`{"id":"c","choices":[{"delta":{"content":"usag"}}]}`, false},
		{`usage`, true}, // a run at the very end counts
	} {
		if got := MayHaveMember([]byte(tt.obj), "usage"); got != tt.want {
			t.Errorf("MayHaveMember(%s) = %v, want %v", tt.obj, got, tt.want)
		}
	}
	// The Kelvin sign (U+212A) folds to k, as encoding/json matches keys:
	// "max_to\u212aens" decodes as max_tokens, escaped or not.
	for _, tt := range []struct {
		obj  string
		want bool
	}{
		{`{"max_to\u212aens":1}`, true},
		{"{\"max_to\u212aens\":1}", true},
		{`{"max_tok":1}`, false},
	} {
		if got := MayHaveMember([]byte(tt.obj), "max_tokens"); got != tt.want {
			t.Errorf("MayHaveMember(%s, max_tokens) = %v, want %v", tt.obj, got, tt.want)
		}
	}
}

// BenchmarkStripUsage compares what a chat chunk without usage costs the
// relay when the client did not ask for usage: MayHaveMember's read
// against DeleteMember's parse, which it spares.
func BenchmarkStripUsage(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-0197a3c2","object":"chat.completion.chunk","created":1764000000,"model":"gpt-4o-2024-08-06",` +
		`"system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}]}`)
	b.Run("may_have_member", func(b *testing.B) {
		for b.Loop() {
			_ = MayHaveMember(chunk, "usage")
		}
	})
	b.Run("delete_member", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = DeleteMember(chunk, "usage")
		}
	})
}

// TestReplaceMember: every member encoding/json reads as the key (a
// repeat, another case) goes, and one member with the value takes their
// place; what is not an object comes back as it was.
func TestReplaceMember(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`{"a":1,"Usage":2,"usage":3}`, `{"a":1,"usage":{"x":1}}`},
		{`{"a":1}`, `{"a":1,"usage":{"x":1}}`},
		{`{}`, `{"usage":{"x":1}}`},
		{`[{"usage":1}]`, `[{"usage":1}]`},
		{`{"usage":`, `{"usage":`},
	} {
		got := ReplaceMember([]byte(tt.in), "usage", []byte(`{"x":1}`))
		if string(got) != tt.want {
			t.Errorf("ReplaceMember(%s) = %s, want %s", tt.in, got, tt.want)
		}
		if json.Valid([]byte(tt.want)) && !json.Valid(got) {
			t.Errorf("ReplaceMember(%s) = %s: not JSON", tt.in, got)
		}
	}
}
