package gemini

import (
	"encoding/json"
	"strings"
)

// A response decoded by encoding/json (the chunks the scanner refuses)
// has its members matched to response's fields without case, the last of
// several winning: {"text":"…400 words…","TEXT":""} is read as a part with
// no text, while the JS and Python SDKs, and proto3 JSON parsers, match
// keys exactly and read the words. Such a chunk's output is not what the
// tap counted, so the whole chunk is counted as output (response.shadow):
// never free, whatever a client reads.

// shadowed reports whether b, one JSON object, holds on the path to a
// response's output (candidates, content, parts, and a part's text,
// thought, functionCall name and args, executableCode and
// codeExecutionResult) a field spelled both exactly and otherwise (see
// anyShadowed).
func shadowed(b []byte) bool {
	return anyShadowed(b, "candidates", func(c []byte) bool {
		return anyShadowed(c, "content", func(content []byte) bool {
			return anyShadowed(content, "parts", func(p []byte) bool {
				return anyShadowed(p, "text", nil) || anyShadowed(p, "thought", nil) ||
					anyShadowed(p, "functionCall", func(fc []byte) bool {
						return anyShadowed(fc, "name", nil) || anyShadowed(fc, "args", nil)
					}) ||
					anyShadowed(p, "executableCode", func(ec []byte) bool { return anyShadowed(ec, "code", nil) }) ||
					anyShadowed(p, "codeExecutionResult", func(r []byte) bool { return anyShadowed(r, "output", nil) })
			})
		})
	})
}

// anyShadowed reports whether the JSON object obj has both the member
// field and another that encoding/json also reads as field (a key spelled
// with other case): which of them decode took, and which a client takes,
// may differ. With within, it also reports whether within reports true of
// the value of any member read as field (each element's, for an array).
// A member spelled otherwise alone is read by decode, so counted.
func anyShadowed(obj []byte, field string, within func([]byte) bool) bool {
	var members map[string]json.RawMessage
	if json.Unmarshal(obj, &members) != nil {
		return false
	}
	exact, other := false, false
	for k, v := range members {
		if !strings.EqualFold(k, field) {
			continue
		}
		exact, other = exact || k == field, other || k != field
		if exact && other {
			return true
		}
		if within == nil {
			continue
		}
		var elems []json.RawMessage
		if json.Unmarshal(v, &elems) != nil {
			elems = []json.RawMessage{v}
		}
		for _, e := range elems {
			if within(e) {
				return true
			}
		}
	}
	return false
}
