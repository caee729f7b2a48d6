package gemini

import "github.com/tollgate-dev/tollgate/gateway/tap"

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
// tap.AnyShadowed).
func shadowed(b []byte) bool {
	return tap.AnyShadowed(b, "candidates", func(c []byte) bool {
		return tap.AnyShadowed(c, "content", func(content []byte) bool {
			return tap.AnyShadowed(content, "parts", func(p []byte) bool {
				return tap.AnyShadowed(p, "text", nil) || tap.AnyShadowed(p, "thought", nil) ||
					tap.AnyShadowed(p, "functionCall", func(fc []byte) bool {
						return tap.AnyShadowed(fc, "name", nil) || tap.AnyShadowed(fc, "args", nil)
					}) ||
					tap.AnyShadowed(p, "executableCode", func(ec []byte) bool { return tap.AnyShadowed(ec, "code", nil) }) ||
					tap.AnyShadowed(p, "codeExecutionResult", func(r []byte) bool { return tap.AnyShadowed(r, "output", nil) })
			})
		})
	})
}
