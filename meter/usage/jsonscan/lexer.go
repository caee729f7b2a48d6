// Package jsonscan is a small JSON lexer for the gateway's fast paths: the
// chunk shapes that make up nearly every event of a stream are read with it
// instead of encoding/json, without allocating. It is exact where it
// answers: a Lexer reports failure (and its caller falls back to
// encoding/json) for anything it does not read the way encoding/json
// would, such as invalid UTF-8 in a string it returns. Each caller checks
// that agreement under fuzzing against encoding/json.
package jsonscan

import (
	"unicode/utf16"
	"unicode/utf8"
)

// MaxDepth is the nesting Skip follows before it gives up (encoding/json
// allows 10,000; fast paths do not need more than a few levels).
const MaxDepth = 64

// Lexer reads JSON tokens from a byte slice. The zero value reads nothing;
// Reset points it at input.
type Lexer struct {
	b []byte
	i int
}

// New returns a Lexer reading b from its start.
func New(b []byte) Lexer { return Lexer{b: b} }

// NewAt returns a Lexer reading b from offset i (0 ≤ i ≤ len(b)).
func NewAt(b []byte, i int) Lexer { return Lexer{b: b, i: i} }

// Pos is the offset of the next unread byte.
func (l *Lexer) Pos() int { return l.i }

// WS skips JSON whitespace.
func (l *Lexer) WS() {
	if l.i < len(l.b) && l.b[l.i] > ' ' { // the usual case: no whitespace
		return
	}
	for l.i < len(l.b) && (l.b[l.i] == ' ' || l.b[l.i] == '\t' || l.b[l.i] == '\n' || l.b[l.i] == '\r') {
		l.i++
	}
}

// Peek skips whitespace and returns the next byte, or 0 at the end.
func (l *Lexer) Peek() byte {
	if l.WS(); l.i < len(l.b) {
		return l.b[l.i]
	}
	return 0
}

// Lit consumes s after any whitespace, if it is next.
func (l *Lexer) Lit(s string) bool {
	l.WS()
	if len(s) == 1 { // punctuation, most of the calls: no memory compare
		if l.i < len(l.b) && l.b[l.i] == s[0] {
			l.i++
			return true
		}
		return false
	}
	if len(l.b)-l.i < len(s) || string(l.b[l.i:l.i+len(s)]) != s {
		return false
	}
	l.i += len(s)
	return true
}

// End skips whitespace and reports whether the input is used up.
func (l *Lexer) End() bool {
	l.WS()
	return l.i == len(l.b)
}

// Uint consumes a JSON number that is a non-negative integer of at most 18
// digits (so it fits an int64).
func (l *Lexer) Uint() (int64, bool) {
	l.WS()
	return l.uint()
}

// Int consumes a JSON number that is an integer of at most 18 digits,
// possibly negative.
func (l *Lexer) Int() (int64, bool) {
	if l.WS(); l.i < len(l.b) && l.b[l.i] == '-' {
		l.i++
		n, ok := l.uint()
		return -n, ok
	}
	return l.uint()
}

func (l *Lexer) uint() (int64, bool) {
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

// Span consumes a JSON string and returns its raw content, the bytes
// between the quotes, and whether it holds escapes (then Unquote gives its
// value; otherwise the raw content is the value). It fails on invalid JSON
// and on invalid UTF-8, which encoding/json would replace.
func (l *Lexer) Span() (raw []byte, escaped, ok bool) {
	if !l.Lit(`"`) {
		return nil, false, false
	}
	start := l.i
	for l.i < len(l.b) {
		for l.i < len(l.b) && plain[l.b[l.i]] == ascii {
			l.i++
		}
		if l.i == len(l.b) {
			break
		}
		c := l.b[l.i]
		switch {
		case c == '"':
			l.i++
			return l.b[start : l.i-1], escaped, true
		case c < 0x20:
			return nil, false, false
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(l.b[l.i:])
			if r == utf8.RuneError && size == 1 {
				return nil, false, false
			}
			l.i += size
		case c != '\\':
			l.i++
		default:
			if !l.skipEscape() {
				return nil, false, false
			}
			escaped = true
		}
	}
	return nil, false, false
}

// Str consumes a JSON string and appends its value to dst. It fails as
// Span does.
func (l *Lexer) Str(dst []byte) ([]byte, bool) {
	raw, escaped, ok := l.Span()
	if !ok {
		return dst, false
	}
	if !escaped {
		return append(dst, raw...), true
	}
	return Unquote(dst, raw), true
}

// skipEscape consumes one valid escape sequence, at a backslash.
func (l *Lexer) skipEscape() bool {
	if l.i+1 >= len(l.b) {
		return false
	}
	c := l.b[l.i+1]
	l.i += 2
	switch c {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return true
	case 'u':
		_, ok := hex4(l.b[l.i:])
		l.i += 4
		return ok
	}
	return false
}

// Unquote appends the value of raw, the content of a JSON string that Span
// accepted, to dst. A lone surrogate becomes U+FFFD, as in encoding/json.
func Unquote(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			j := i + 1
			for j < len(raw) && raw[j] != '\\' {
				j++
			}
			dst = append(dst, raw[i:j]...)
			i = j
			continue
		}
		e := raw[i+1]
		i += 2
		switch e {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, _ := hex4(raw[i:])
			i += 4
			if utf16.IsSurrogate(r) {
				dec := utf8.RuneError
				if i+1 < len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if lo, ok := hex4(raw[i+2:]); ok {
						if d := utf16.DecodeRune(r, lo); d != utf8.RuneError {
							dec = d
							i += 6
						}
					}
				}
				r = dec
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst = append(dst, e)
		}
	}
	return dst
}

// Byte classes inside a JSON string: plain ASCII stands for itself; a
// quote, a backslash or a control byte needs a look; bytes of 0x80 and up
// are UTF-8 to check (Span) or to pass (Skip).
const (
	special = iota
	ascii
	high
)

var plain = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c < 0x20 || c == '"' || c == '\\':
			t[c] = special
		case c < 0x80:
			t[c] = ascii
		default:
			t[c] = high
		}
	}
	return t
}()

// hex4 reads four hex digits.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
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
	return r, true
}

// Array consumes a JSON array, calling elem at each element with the
// lexer before it; elem must consume the element. It fails on what is not
// an array and when elem fails.
func (l *Lexer) Array(elem func() bool) bool {
	if !l.Lit("[") {
		return false
	}
	if l.Lit("]") {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if l.Lit("]") {
			return true
		}
		if !l.Lit(",") {
			return false
		}
	}
}

// Skip consumes one JSON value of any kind, checking its syntax as
// encoding/json does (strings may hold invalid UTF-8, which encoding/json
// accepts). It fails on invalid JSON and on nesting deeper than MaxDepth.
func (l *Lexer) Skip() bool { return l.skip(0) }

func (l *Lexer) skip(depth int) bool {
	if depth > MaxDepth {
		return false
	}
	switch l.Peek() {
	case '"':
		return l.skipString()
	case '{':
		l.i++
		if l.Lit("}") {
			return true
		}
		for {
			if l.Peek() != '"' || !l.skipString() || !l.Lit(":") || !l.skip(depth+1) {
				return false
			}
			if l.Lit("}") {
				return true
			}
			if !l.Lit(",") {
				return false
			}
		}
	case '[':
		l.i++
		if l.Lit("]") {
			return true
		}
		for {
			if !l.skip(depth + 1) {
				return false
			}
			if l.Lit("]") {
				return true
			}
			if !l.Lit(",") {
				return false
			}
		}
	case 't':
		return l.Lit("true")
	case 'f':
		return l.Lit("false")
	case 'n':
		return l.Lit("null")
	default:
		return l.skipNumber()
	}
}

// skipString consumes a JSON string, any bytes of 0x20 and above allowed.
func (l *Lexer) skipString() bool {
	l.i++ // the opening quote
	for l.i < len(l.b) {
		for l.i < len(l.b) && plain[l.b[l.i]] != special {
			l.i++
		}
		if l.i == len(l.b) {
			break
		}
		switch c := l.b[l.i]; {
		case c == '"':
			l.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if !l.skipEscape() {
				return false
			}
		default:
			l.i++
		}
	}
	return false
}

// skipNumber consumes a number in JSON's grammar:
// -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
func (l *Lexer) skipNumber() bool {
	if l.i < len(l.b) && l.b[l.i] == '-' {
		l.i++
	}
	switch {
	case l.i < len(l.b) && l.b[l.i] == '0':
		l.i++
	case l.digits() == 0:
		return false
	}
	if l.i < len(l.b) && l.b[l.i] == '.' {
		l.i++
		if l.digits() == 0 {
			return false
		}
	}
	if l.i < len(l.b) && (l.b[l.i] == 'e' || l.b[l.i] == 'E') {
		l.i++
		if l.i < len(l.b) && (l.b[l.i] == '+' || l.b[l.i] == '-') {
			l.i++
		}
		if l.digits() == 0 {
			return false
		}
	}
	return true
}

// digits consumes decimal digits and returns how many.
func (l *Lexer) digits() int {
	start := l.i
	for l.i < len(l.b) && l.b[l.i] >= '0' && l.b[l.i] <= '9' {
		l.i++
	}
	return l.i - start
}
