package provider

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// TestAmbiguousKeyDecodedAgrees: CheckPassedBody's encoding/json
// fallback finds what jsonscan.AmbiguousKey finds on the bodies the
// latter can scan.
func TestAmbiguousKeyDecodedAgrees(t *testing.T) {
	names := []string{"model", "stream", "background"}
	for _, body := range []string{
		`{"model":"a","stream":true}`,
		` { "model" : "a" , "stream" : true } `,
		`{"model":"a","Model":"b"}`,
		`{"model":"a","model":"b"}`,
		`{"mod\u0065l":"a"}`,
		`{"\u017ftream":true}`,
		`{"x":{"Stream":1},"stream":false}`,
		`{"background":true,"BACKGROUND":false}`,
		`{}`,
		`[]`,
		`{"model":`,
	} {
		wantKey, want, _ := jsonscan.AmbiguousKey([]byte(body), names...)
		gotKey, got := ambiguousKeyDecoded([]byte(body), names...)
		if got != want || gotKey != wantKey {
			t.Errorf("%s: decoded %q %v, jsonscan %q %v", body, gotKey, got, wantKey, want)
		}
	}
}

// TestSetMemberDeep: SetMember sets a member of an object nested deeper
// than jsonscan reads as jsonscan.SetMember would have, bytes around it
// kept.
func TestSetMemberDeep(t *testing.T) {
	d := strings.Repeat("[", 80) + strings.Repeat("]", 80)
	for _, tc := range []struct{ in, want string }{
		{`{"x":` + d + `,"model":"a"}`, `{"x":` + d + `,"model":"B"}`},
		{`{ "model" : "a" , "x":` + d + ` , "model":[1] }`, `{ "model" : "B" , "x":` + d + ` , "model":"B" }`},
		{`{"x":` + d + `,"Model":"a"}`, `{"x":` + d + `,"Model":"a","model":"B"}`},
		{`{"x":` + d + ` }`, `{"x":` + d + ` ,"model":"B"}`},
	} {
		got, err := SetMember([]byte(tc.in), "model", []byte(`"B"`))
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %s %v, want %s", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{`{"x":` + d, `[` + d + `]`, `{"x":` + d + `} x`} {
		if _, err := SetMember([]byte(in), "model", []byte(`"B"`)); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
	for _, in := range []string{`{}`, `{"model":"a"}`, `{"a":1}`} {
		want, _ := jsonscan.SetMember([]byte(in), "model", []byte(`"B"`))
		if got, err := SetMember([]byte(in), "model", []byte(`"B"`)); err != nil || string(got) != string(want) {
			t.Errorf("%s: %s %v, want %s", in, got, err, want)
		}
	}
}

// FuzzAmbiguousKey: CheckPassedBody refuses every body
// jsonscan.AmbiguousKey finds ambiguous, and encoding/json's reading of a
// valid body agrees with it wherever it reads the body to its end.
func FuzzAmbiguousKey(f *testing.F) {
	for _, s := range []string{`{"model":"a","Model":"b"}`, `{"x":[[[]]],"stream":true,"stream":false}`, `{"str\u0065am":1}`, `{"a":"\xff","model":1}`} {
		f.Add([]byte(s))
	}
	names := []string{"model", "stream", "background"}
	f.Fuzz(func(t *testing.T, body []byte) {
		wantKey, want, scanned := jsonscan.AmbiguousKey(body, names...)
		if key, bad := ambiguousKeyDecoded(body, names...); scanned && (bad != want || key != wantKey) {
			t.Fatalf("%q: decoded %q %v, jsonscan %q %v", body, key, bad, wantKey, want)
		}
		if want && CheckPassedBody(body, names...) == nil {
			t.Fatalf("%q: jsonscan finds %q ambiguous, CheckPassedBody passes it", body, wantKey)
		}
	})
}

// TestFoldedKeyDecodedAgrees: CheckFoldedKeys' encoding/json fallback
// finds what jsonscan.FoldedKey finds on the values the latter can scan,
// and finds it past the scanner's depth.
func TestFoldedKeyDecodedAgrees(t *testing.T) {
	for _, v := range []string{
		`[{"role":"user","content":"a"},{"content":"b"}]`,
		`[{"role":"user","content":"a","Content":"b"}]`,
		`[{"content":[{"type":"text","text":"a","TEXT":"b"}]}]`,
		`{"a":{"b":1,"b":2}}`,
		`{"\u0063ontent":1,"content":2}`,
		`{"ſtream":1,"stream":2}`,
		`"s"`,
		`[]`,
		`{}`,
	} {
		wantKey, want, _ := jsonscan.FoldedKey([]byte(v))
		gotKey, got := foldedKeyDecoded(json.NewDecoder(strings.NewReader(v)), nil)
		if got != want || gotKey != wantKey {
			t.Errorf("%s: decoded %q %v, scanned %q %v", v, gotKey, got, wantKey, want)
		}
	}
	deep := `[{"content":"a","Content":"b","x":` + strings.Repeat("[", jsonscan.MaxDepth+2) + strings.Repeat("]", jsonscan.MaxDepth+2) + `}]`
	if err := CheckFoldedKeys("messages", []byte(deep)); err == nil {
		t.Errorf("a value nested past jsonscan.MaxDepth hid its ambiguous member")
	}
}
