package jsonscan

import "unicode/utf8"

// AppendString appends s to dst as a JSON string, without allocating:
// `"` and `\` escaped, \b \f \n \r \t by name, other control characters
// as \u00XX, invalid UTF-8 as \ufffd (as encoding/json does), U+2028 and
// U+2029 escaped so that the payload is also valid JavaScript. Unlike
// encoding/json it leaves < > & as they are: what a client reads from a
// relayed stream keeps its bytes.
func AppendString(dst []byte, s string) []byte { return appendString(dst, s, false) }

// AppendStringHTML is AppendString with < > & escaped as \u003c \u003e
// \u0026: byte for byte what encoding/json writes for s (its
// encodeState.string with HTML escaping, Go 1.22 and later).
func AppendStringHTML(dst []byte, s string) []byte { return appendString(dst, s, true) }

func appendString(b []byte, s string, html bool) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && (!html || c != '<' && c != '>' && c != '&') {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(b, s[start:]...), '"')
}
