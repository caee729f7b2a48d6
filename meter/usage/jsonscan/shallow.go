package jsonscan

// Shallow returns b, a JSON value, with every object and array nested
// more than MaxDepth levels deep (the top-level value is level 1) replaced
// by null, and whether it replaced any: b itself and false when none is
// so deep. The other bytes are kept as they are.
//
// It is for a value encoding/json refused: valid JSON nested past
// encoding/json's 10,000 levels, which JavaScript's and Go's other readers
// take, from a hostile upstream beside an event's own members. No
// provider's event nests past a dozen levels, so the result reads as the
// event's own members (and reads with this package's Lexer too, which
// follows MaxDepth levels). b is not otherwise checked: invalid JSON stays
// invalid.
func Shallow(b []byte) ([]byte, bool) {
	var out []byte
	depth, last, cut := 0, 0, -1
	inString, escaped := false, false
	for i, c := range b {
		switch {
		case escaped:
			escaped = false
		case inString:
			switch c {
			case '\\':
				escaped = true
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth == MaxDepth+1 && cut < 0 {
				cut = i
			}
		case c == '}' || c == ']':
			if depth == MaxDepth+1 && cut >= 0 {
				out = append(append(out, b[last:cut]...), "null"...)
				last, cut = i+1, -1
			}
			depth--
		}
	}
	if out == nil {
		return b, false
	}
	return append(out, b[last:]...), true
}
