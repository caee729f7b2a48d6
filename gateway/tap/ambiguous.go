package tap

import (
	"encoding/json"

	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// UsageKeys names the members of a usage object that a tap reads with
// encoding/json, and, for a member that is an object (or an array of
// objects), the members it reads of that (nil for a count).
type UsageKeys map[string]UsageKeys

// AmbiguousUsage reports whether obj, a JSON object, holds its usage
// member (member, such as "usage") or a member keys names within it
// spelled otherwise than exactly once: another case, an escape, or a
// repeat, as jsonscan.AmbiguousKey finds them. encoding/json, which the
// taps read usage with, matches keys without regard to case, the last of
// several winning, while the Python and JavaScript SDKs read the member
// spelled exactly: "input_tokens":1000000 beside "INPUT_TOKENS":10 is
// billed 10 and read by such a client as 1,000,000. An answer whose
// usage is ambiguous must be sent the usage billed, not relayed as it
// came (Report.AmbiguousUsage). An obj the scanner cannot read to its
// end (invalid, or nested past jsonscan.MaxDepth) is reported ambiguous
// too: what it holds past that point is unknown.
func AmbiguousUsage(obj []byte, member string, keys UsageKeys) bool {
	if _, bad, scanned := jsonscan.AmbiguousKey(obj, member); bad || !scanned {
		return bad || !scanned
	}
	raw, ok, err := jsonscan.Member(obj, member)
	if err != nil || !ok {
		return err != nil
	}
	return ambiguousIn(raw, keys)
}

// ambiguousIn is AmbiguousUsage below the usage member: raw is an object
// whose members keys names, or an array of such objects (Anthropic's
// iterations[]). It goes no deeper than keys does.
func ambiguousIn(raw []byte, keys UsageKeys) bool {
	l := jsonscan.New(raw)
	switch l.Peek() {
	case '[':
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) != nil {
			return false // not an array the tap reads either
		}
		for _, e := range elems {
			if len(e) > 0 && e[0] == '{' && ambiguousIn(e, keys) { // an array's objects, not arrays in it
				return true
			}
		}
		return false
	case '{':
	default:
		return false // a count, a string or null: nothing spelled in it
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	if _, bad, scanned := jsonscan.AmbiguousKey(raw, names...); bad || !scanned {
		return true
	}
	for k, sub := range keys {
		if sub == nil {
			continue
		}
		if v, ok, _ := jsonscan.Member(raw, k); ok && ambiguousIn(v, sub) {
			return true
		}
	}
	return false
}
