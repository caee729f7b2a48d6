package gateway

import (
	"net/http"
	"testing"
)

// TestDropTail: what dropTail keeps of a whole body: bytes after its JSON
// value that begin no JSON value are dropped; a second value, a body
// that is no JSON value or one cut off, and blanks are left as they came.
func TestDropTail(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1}`:              `{"a":1}`,
		"{\"a\":1}\n \r\n":     "{\"a\":1}\n \r\n",
		"{\"a\":1}\x00\x00":    `{"a":1}`,
		`{"a":"}"}xyz`:         `{"a":"}"}`,
		"[1,2] \n<!-- x -->":   "[1,2]",
		"{\"a\":1}\n{\"a\":2}": "{\"a\":1}\n{\"a\":2}",
		`{"a":1}[2]`:           `{"a":1}[2]`,
		`{"a":`:                `{"a":`,
		`{"a":1`:               `{"a":1`,
		"data: {}\n\n":         "data: {}\n\n",
		"plain text":           "plain text",
		"":                     "",
		"  ":                   "  ",
	} {
		if got := string(dropTail([]byte(in))); got != want {
			t.Errorf("dropTail(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCutJSON: a body whose JSON value ends before it does is cut; one
// whole, one followed by more, and one that is no JSON value are not.
func TestCutJSON(t *testing.T) {
	for in, want := range map[string]bool{
		`{"a":1}`: false, `{"a":1}{"b"`: false, `{"a":1} xyz`: false, "plain": false, "": false,
		`{"a":`: true, `[{"a":1},`: true, `{"a":"tex`: true, `  {`: true,
	} {
		if got := cutJSON([]byte(in)); got != want {
			t.Errorf("cutJSON(%q) = %v, want %v", in, got, want)
		}
	}
}

// TestUnaskedCoding: the Content-Encodings an answer is refused in.
func TestUnaskedCoding(t *testing.T) {
	for _, c := range []struct {
		values []string
		want   string
	}{
		{nil, ""}, {[]string{"identity"}, ""}, {[]string{"utf-8"}, ""}, {[]string{""}, ""},
		{[]string{"br"}, "br"}, {[]string{"ZSTD"}, "ZSTD"}, {[]string{"gzip, br"}, "gzip, br"},
		{[]string{"identity", "deflate"}, "identity,deflate"}, {[]string{"x-gzip"}, "x-gzip"},
	} {
		h := http.Header{}
		for _, v := range c.values {
			h.Add("Content-Encoding", v)
		}
		if got := unaskedCoding(h); got != c.want {
			t.Errorf("unaskedCoding(%q) = %q, want %q", c.values, got, c.want)
		}
	}
}
