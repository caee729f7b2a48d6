package anthropic

import (
	"unicode/utf16"
	"unicode/utf8"
)

// Nearly every event of a stream is a content delta, and encoding/json
// spends about nine allocations on each. fastDelta reads the common shape
// without them:
//
//	{"type":"content_block_delta","index":N,"delta":{"type":T,F:"..."}}
//
// with T text_delta, thinking_delta or input_json_delta and F its field
// (text, thinking, partial_json), keys in that order, any JSON whitespace.
// Anything else, including invalid UTF-8, is left to encoding/json, so
// that the two always agree (FuzzFastDelta checks it). Usage never goes
// through here.

// fastDelta decodes data into e if it has the shape above, using buf as
// scratch space; it returns buf (possibly grown) and whether it did.
func fastDelta(data []byte, e *wireEvent, buf []byte) ([]byte, bool) {
	l := lexer{b: data}
	if !l.lit(`{`) || !l.lit(`"type"`) || !l.lit(`:`) || !l.lit(`"content_block_delta"`) || !l.lit(`,`) ||
		!l.lit(`"index"`) || !l.lit(`:`) {
		return buf, false
	}
	index, ok := l.uint()
	if !ok || !l.lit(`,`) || !l.lit(`"delta"`) || !l.lit(`:`) || !l.lit(`{`) || !l.lit(`"type"`) || !l.lit(`:`) {
		return buf, false
	}
	var typ, field string
	switch {
	case l.lit(`"text_delta"`):
		typ, field = "text_delta", `"text"`
	case l.lit(`"thinking_delta"`):
		typ, field = "thinking_delta", `"thinking"`
	case l.lit(`"input_json_delta"`):
		typ, field = "input_json_delta", `"partial_json"`
	default:
		return buf, false
	}
	if !l.lit(`,`) || !l.lit(field) || !l.lit(`:`) {
		return buf, false
	}
	buf, ok = l.str(buf[:0])
	if !ok || !l.lit(`}`) || !l.lit(`}`) {
		return buf, false
	}
	if l.ws(); l.i != len(l.b) {
		return buf, false
	}
	*e = wireEvent{Type: "content_block_delta", Index: index}
	e.Delta.Type = typ
	switch v := string(buf); typ {
	case "text_delta":
		e.Delta.Text = v
	case "thinking_delta":
		e.Delta.Thinking = v
	default:
		e.Delta.PartialJSON = v
	}
	return buf, true
}

// lexer reads JSON tokens from b, from offset i.
type lexer struct {
	b []byte
	i int
}

// ws skips JSON whitespace.
func (l *lexer) ws() {
	for l.i < len(l.b) && (l.b[l.i] == ' ' || l.b[l.i] == '\t' || l.b[l.i] == '\n' || l.b[l.i] == '\r') {
		l.i++
	}
}

// lit consumes s after any whitespace, if it is next.
func (l *lexer) lit(s string) bool {
	l.ws()
	if len(l.b)-l.i < len(s) || string(l.b[l.i:l.i+len(s)]) != s {
		return false
	}
	l.i += len(s)
	return true
}

// uint consumes a JSON number that is a non-negative integer of at most 18
// digits (so it fits an int64).
func (l *lexer) uint() (int64, bool) {
	l.ws()
	start, n := l.i, int64(0)
	for l.i < len(l.b) && l.b[l.i] >= '0' && l.b[l.i] <= '9' && l.i-start < 18 {
		n = n*10 + int64(l.b[l.i]-'0')
		l.i++
	}
	switch d := l.i - start; {
	case d == 0, d > 1 && l.b[start] == '0':
		return 0, false
	case l.i < len(l.b) && (l.b[l.i] >= '0' && l.b[l.i] <= '9' || l.b[l.i] == '.' || l.b[l.i] == 'e' || l.b[l.i] == 'E'):
		return 0, false
	}
	return n, true
}

// str consumes a JSON string and appends its value to dst. It fails on
// invalid JSON and on invalid UTF-8 (which encoding/json would replace).
func (l *lexer) str(dst []byte) ([]byte, bool) {
	if !l.lit(`"`) {
		return dst, false
	}
	for l.i < len(l.b) {
		c := l.b[l.i]
		switch {
		case c == '"':
			l.i++
			return dst, true
		case c < 0x20:
			return dst, false
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(l.b[l.i:])
			if r == utf8.RuneError && size == 1 {
				return dst, false
			}
			dst = append(dst, l.b[l.i:l.i+size]...)
			l.i += size
		case c != '\\':
			dst = append(dst, c)
			l.i++
		default:
			var ok bool
			if dst, ok = l.escape(dst); !ok {
				return dst, false
			}
		}
	}
	return dst, false
}

// escape consumes one escape sequence, at a backslash, appending its value
// to dst. A lone surrogate becomes U+FFFD, as in encoding/json.
func (l *lexer) escape(dst []byte) ([]byte, bool) {
	if l.i+1 >= len(l.b) {
		return dst, false
	}
	c := l.b[l.i+1]
	l.i += 2
	switch c {
	case '"', '\\', '/':
		return append(dst, c), true
	case 'b':
		return append(dst, '\b'), true
	case 'f':
		return append(dst, '\f'), true
	case 'n':
		return append(dst, '\n'), true
	case 'r':
		return append(dst, '\r'), true
	case 't':
		return append(dst, '\t'), true
	case 'u':
		r, ok := l.hex4()
		if !ok {
			return dst, false
		}
		if utf16.IsSurrogate(r) {
			r2 := utf8.RuneError
			if save := l.i; l.i+1 < len(l.b) && l.b[l.i] == '\\' && l.b[l.i+1] == 'u' {
				l.i += 2
				if lo, ok := l.hex4(); ok && utf16.DecodeRune(r, lo) != utf8.RuneError {
					r2 = utf16.DecodeRune(r, lo)
				} else {
					l.i = save
				}
			}
			r = r2
		}
		return utf8.AppendRune(dst, r), true
	}
	return dst, false
}

// hex4 consumes four hex digits.
func (l *lexer) hex4() (rune, bool) {
	if len(l.b)-l.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range l.b[l.i : l.i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	l.i += 4
	return r, true
}
