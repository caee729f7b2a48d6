package jsonscan

import (
	"encoding/json"
	"strings"
	"testing"
)

var seeds = []string{
	`{"a":[1,-0,2.5e+3,true,false,null,{"b":"c\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00\ud800x\udc00"}]}`,
	` [ ] `, `{}`, `"\u0041"`, `-`, `01`, `1.`, `1e`, `.5`, `[1,]`, `{"a" 1}`, `{"a":1,}`, "\"\x01\"",
	"\"\xff\"", `"\ud83d\u0041"`, `"\ud83d"`, `"\udc00\ud83d"`, `"\u12"`, `"\x"`, `nul`, `truex`, `123456789012345678`,
	`-123456789012345678`, `1234567890123456789`, strings.Repeat("[", 70) + strings.Repeat("]", 70),
	`9999999999999999999`, `-9999999999999999999`, "\"\x1f\"", `"\`, `"ab\`, `"\a"`, `1E-5`, `[0.5e-1]`,
	`"\u00CF\u00eF\uABCD"`, "[1,\v2]", "[1,\f2]",
}

// FuzzLexer checks the lexer against encoding/json: Skip accepts exactly
// the valid JSON values (below MaxDepth), Str reads exactly the strings
// encoding/json reads, with the same value, and Int the same integers.
func FuzzLexer(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		l := New(b)
		valid := l.Skip() && l.End()
		if want := json.Valid(b); valid != want && !(want && depth(b) > MaxDepth) {
			t.Fatalf("%q: Skip says valid=%v, encoding/json %v", b, valid, want)
		}
		l = New(b)
		if got, ok := l.Str(nil); ok && l.End() {
			var want string
			if err := json.Unmarshal(b, &want); err != nil || string(got) != want {
				t.Fatalf("%q: Str read %q, encoding/json %q (%v)", b, got, want, err)
			}
		}
		l = New(b)
		if got, ok := l.Int(); ok && l.End() {
			var want int64
			if err := json.Unmarshal(b, &want); err != nil || got != want {
				t.Fatalf("%q: Int read %d, encoding/json %d (%v)", b, got, want, err)
			}
		}
	})
}

// depth is the deepest nesting of brackets in b, strings ignored roughly
// (good enough to excuse inputs nested past MaxDepth).
func depth(b []byte) int {
	d, deepest := 0, 0
	for _, c := range b {
		switch c {
		case '[', '{':
			d++
			deepest = max(deepest, d)
		case ']', '}':
			d--
		}
	}
	return deepest
}

func TestLexerSeeds(t *testing.T) {
	for _, tc := range []struct {
		in    string
		valid bool
	}{
		{`{"a":[1,-0,2.5e+3,true,false,null,{"b":"c"}]}`, true},
		{`[1,]`, false}, {`01`, false}, {`1.`, false}, {`-`, false}, {"\"\x01\"", false}, {`"\x"`, false},
		{"\"\xff\"", true}, {`nul`, false}, {` [ ] `, true}, {`"\a"`, false}, {`"\`, false}, {"\"\x1f\"", false},
		{`1E-5`, true}, {`[1e-5]`, true},
		{strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), true},
		{strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2), false}, // deeper than MaxDepth
	} {
		l := New([]byte(tc.in))
		if got := l.Skip() && l.End(); got != tc.valid {
			t.Errorf("%q: valid %v, want %v", tc.in, got, tc.valid)
		}
	}
	l := New([]byte(`"a\ud83d\ude00b\ud800\n"`))
	if got, ok := l.Str(nil); !ok || string(got) != "a😀b\uFFFD\n" {
		t.Errorf("Str = %q, %v", got, ok)
	}
	for _, in := range []string{`12E3`, `12e3`, `12.0`, `9999999999999999999`, `-9999999999999999999`} {
		l := New([]byte(in))
		if n, ok := l.Int(); ok {
			t.Errorf("Int read %q as %d, want it refused (not an integer an int64 holds as read)", in, n)
		}
	}
	for _, in := range []string{"\"\x1f\"", `"\a"`, `"ab\`} {
		l := New([]byte(in))
		if got, ok := l.Str(nil); ok {
			t.Errorf("Str read %q as %q, want it refused (not a JSON string)", in, got)
		}
	}
	l = New([]byte("\"\xff\""))
	if _, ok := l.Str(nil); ok {
		t.Error("Str accepted invalid UTF-8, which encoding/json replaces")
	}
}
