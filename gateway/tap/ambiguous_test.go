package tap_test

import (
	"testing"

	"github.com/tollgate-dev/tollgate/gateway/tap"
)

func TestAmbiguousUsage(t *testing.T) {
	keys := tap.UsageKeys{"input_tokens": nil, "details": {"cached_tokens": nil}, "iterations": {"output_tokens": nil}}
	for _, c := range []struct {
		obj  string
		want bool
	}{
		{`{"usage":{"input_tokens":10,"details":{"cached_tokens":2},"iterations":[{"output_tokens":1}]}}`, false},
		{`{"usage":null}`, false},
		{`{"other":1}`, false},
		{`{"usage":{"input_tokens":10,"Other":1,"OTHER":2}}`, false}, // not a member the tap reads
		{`{"usage":{"input_tokens":10,"INPUT_TOKENS":1}}`, true},
		{`{"usage":{"INPUT_TOKENS":1}}`, true},
		{`{"usage":{"input_tokens":10,"input_tokens":1}}`, true},
		{`{"usage":{"input_\u0074okens":10}}`, true},
		{`{"usage":{"input_tokens":1},"Usage":{"input_tokens":10}}`, true},
		{`{"usage":{"details":{"cached_tokens":1,"Cached_Tokens":2}}}`, true},
		{`{"usage":{"iterations":[{"output_tokens":1},{"output_tokens":1,"OUTPUT_TOKENS":9}]}}`, true},
		{`{"usage":{"iterations":[[{"output_tokens":1,"OUTPUT_TOKENS":9}]]}}`, false}, // not read by the tap either
		{`{"usage":{"input_tokens":1}`, true},                                         // not JSON the scanner reads
	} {
		if got := tap.AmbiguousUsage([]byte(c.obj), "usage", keys); got != c.want {
			t.Errorf("AmbiguousUsage(%s) = %v, want %v", c.obj, got, c.want)
		}
	}
}
