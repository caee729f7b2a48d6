package jsonscan

import (
	"strconv"
	"strings"
	"testing"
)

func TestFoldedKey(t *testing.T) {
	many := make([]string, 20000)
	for i := range many {
		many[i] = `"k` + strconv.Itoa(i) + `":1`
	}
	for _, c := range []struct {
		v            string
		key          string
		bad, scanned bool
	}{
		{`[{"role":"user","content":"a"},{"content":"b"}]`, "", false, true},
		{`[{"role":"user","content":"a","Content":"b"}]`, "Content", true, true},
		{`[{"content":[{"type":"text","text":"a","TEXT":"b"}]}]`, "TEXT", true, true},
		{`{"a":{"b":1,"b":2}}`, "b", true, true},
		{`{"\u0063ontent":1,"content":2}`, "content", true, true},
		{`{"ſtream":1,"stream":2}`, "stream", true, true},
		{`{"a":1,"A":{}`, "", false, false}, // not JSON: the caller's decoder refuses it
		{`"just a string"`, "", false, true},
		{`{"a":{"x":1},"b":{"X":1}}`, "", false, true}, // keys of sibling objects are not compared
		{`[{"x":1},{"X":1}]`, "", false, true},
		{`{"a":1} {"b":1,"B":2}`, "", false, false}, // more after the value: not read to its end
		{`{` + strings.Join(many, ",") + `}`, "", false, true},
		{`{` + strings.Join(many, ",") + `,"K19999":2}`, "K19999", true, true},
		{strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2), "", false, false},
	} {
		key, bad, scanned := FoldedKey([]byte(c.v))
		if key != c.key || bad != c.bad || scanned != c.scanned {
			t.Errorf("FoldedKey(%.60s) = %q, %v, %v; want %q, %v, %v", c.v, key, bad, scanned, c.key, c.bad, c.scanned)
		}
	}
}

// TestFoldedKeyOpaque: the value of a member named one of opaque is not
// looked into; a member named so in another case is.
func TestFoldedKeyOpaque(t *testing.T) {
	v := []byte(`[{"type":"tool_use","input":{"id":1,"ID":2}}]`)
	if _, bad, scanned := FoldedKey(v, "input"); bad || !scanned {
		t.Errorf("opaque input: bad %v, scanned %v", bad, scanned)
	}
	if key, bad, _ := FoldedKey(v); !bad || key != "ID" {
		t.Errorf("input looked into: %q %v", key, bad)
	}
	if key, bad, _ := FoldedKey([]byte(`{"Input":{"id":1,"ID":2}}`), "input"); !bad || key != "ID" {
		t.Errorf("Input, not input: %q %v", key, bad)
	}
}
