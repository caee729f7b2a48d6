package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestShallow: a value nested past encoding/json's limit reads, after
// Shallow, as encoding/json and the Lexer read its shallow members; a
// value that is not so deep is left as it is, brackets in strings too.
func TestShallow(t *testing.T) {
	deep := func(n int, inner string) string { return strings.Repeat(`{"a":`, n) + inner + strings.Repeat(`}`, n) }
	cut := deep(MaxDepth-1, "null") // the top-level value is level 1: level MaxDepth+1 is null
	for _, tc := range []struct{ in, want string }{
		{`{"text":"hi","x":` + deep(10001, "1") + `}`, `{"text":"hi","x":` + cut + `}`},
		{`[` + deep(10001, `"]}"`) + `,"{[\"",` + deep(10001, "[]") + `]`, `[` + cut + `,"{[\"",` + cut + `]`},
		{deep(MaxDepth+1, "1"), deep(MaxDepth, "null")},
	} {
		got, ok := Shallow([]byte(tc.in))
		if string(got) != tc.want || !ok {
			t.Errorf("%.40q…: got %.80q… (%v), want %.80q…", tc.in, got, ok, tc.want)
		}
		var v any
		if err := json.Unmarshal(got, &v); err != nil {
			t.Errorf("encoding/json cannot read the result: %v", err)
		}
		if l := New(got); !l.Skip() {
			t.Errorf("the Lexer cannot read the result")
		}
	}
	for _, in := range []string{`{"a":"` + strings.Repeat("{[", 9000) + `"}`, deep(MaxDepth, "1"), `{"a":1`, ``} {
		if got, ok := Shallow([]byte(in)); ok || string(got) != in {
			t.Errorf("%.40q…: changed, but nothing in it is nested past MaxDepth", in)
		}
	}
}
