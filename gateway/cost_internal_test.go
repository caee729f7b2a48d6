package gateway

import (
	"testing"

	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// nestedSetCost is setUsageCost as two SetMember calls: the reference it
// is held to.
func nestedSetCost(obj []byte, charge string) []byte {
	u, ok, err := jsonscan.Member(obj, "usage")
	if err != nil || !ok || len(u) == 0 || u[0] != '{' {
		return obj
	}
	if u, err = jsonscan.SetMember(u, "cost", []byte(charge)); err != nil {
		return obj
	}
	out, err := jsonscan.SetMember(obj, "usage", u)
	if err != nil {
		return obj
	}
	return out
}

// FuzzSetUsageCost: setUsageCost's one copy gives what setting the cost
// in the usage object and the usage object in obj gives.
func FuzzSetUsageCost(f *testing.F) {
	for _, s := range []string{
		`{"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}}`,
		`{"usage":{}}`, `{"usage":{"cost":1}}`, `{"usage":null}`, `{"usage":1,"usage":{"a":1}}`,
		`{"usage":{"a":1},"usage":{"b":2}}`, ` { "usage" : { "a" : 1 } } `, `{"x":{"usage":{}}}`, `{"usage":{}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, obj []byte) {
		got, want := setUsageCost(obj, "0.0002625"), nestedSetCost(obj, "0.0002625")
		if string(got) != string(want) {
			t.Fatalf("%q: got %q, want %q", obj, got, want)
		}
	})
}

// BenchmarkSetUsageCost compares the one-copy insertion of a usage
// chunk's cost with the two SetMember calls it replaced.
func BenchmarkSetUsageCost(b *testing.B) {
	chunk := []byte(`{"id":"chatcmpl-0197a3c2","object":"chat.completion.chunk","created":1764000000,"model":"sim-pro",` +
		`"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":24,"total_tokens":36,` +
		`"prompt_tokens_details":{"cached_tokens":6},"completion_tokens_details":{"reasoning_tokens":12}}}`)
	for _, bb := range []struct {
		name string
		f    func([]byte, string) []byte
	}{{"one_copy", setUsageCost}, {"two_setmember", nestedSetCost}} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = bb.f(chunk, "0.0002625")
			}
		})
	}
}
