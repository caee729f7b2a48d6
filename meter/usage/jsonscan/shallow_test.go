package jsonscan

import (
	"encoding/json"
	"io"
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

// FuzzShallow: Shallow's result has nothing left to replace (so a caller
// that reads it again on failure stops there), and it reads, with
// encoding/json, as the input's members within MaxDepth levels whenever
// the input is valid JSON of any depth.
func FuzzShallow(f *testing.F) {
	for _, s := range []string{`{"a":1}`, strings.Repeat("[", 70) + strings.Repeat("]", 70), strings.Repeat(`{"a":"]\"`, 80),
		`]]]` + strings.Repeat("[", 80), `{"x":` + strings.Repeat(`[`, 66) + strings.Repeat(`]`, 66) + `,"y":"}"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := Shallow(b)
		if again, more := Shallow(got); more {
			t.Fatalf("Shallow(%q) = %q, which Shallow changes again, to %q", b, got, again)
		}
		if !ok && string(got) != string(b) {
			t.Fatalf("Shallow(%q) changed it (%q) but reported no change", b, got)
		}
		// One JSON value of any depth: encoding/json's tokenizer has no
		// depth limit, but reads a stream of values, closed or not.
		d := json.NewDecoder(strings.NewReader(string(b)))
		depth, values, valid := 0, 0, false
		for {
			tok, err := d.Token()
			if err != nil {
				valid = err == io.EOF && depth == 0 && values == 1
				break
			}
			switch tok {
			case json.Delim('['), json.Delim('{'):
				depth++
			case json.Delim(']'), json.Delim('}'):
				depth--
			}
			if depth == 0 {
				values++
			}
		}
		if valid && ok {
			if l := New(got); !l.Skip() {
				t.Fatalf("Shallow(%q) = %q: the Lexer cannot read it", b, got)
			}
		}
	})
}
