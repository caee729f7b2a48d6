package jsonscan

import (
	"bytes"
	"errors"
	"strings"
)

// ErrNotObject is returned by SetMember for input that is not one valid
// JSON object.
var ErrNotObject = errors.New("jsonscan: not a JSON object")

// SetMember returns obj, a JSON object, with the value of its top-level
// member key replaced by value (valid JSON, given as it is to be written):
// every member of that name (key compared byte for byte with the raw,
// unescaped key), or a new last member when there is none. All other bytes
// of obj are kept as they are. It returns ErrNotObject when obj is not one
// valid JSON object (nested no deeper than MaxDepth).
func SetMember(obj []byte, key string, value []byte) ([]byte, error) {
	return AppendSetMember(make([]byte, 0, len(obj)+len(value)+len(key)+4), obj, key, value)
}

// ReplaceMember returns obj, a JSON object, with every member that
// encoding/json would decode as key (DeleteMember: a repeat, or another
// case) replaced by one member key with value (valid JSON): so that every
// reader of the result, exact or case-folding, reads value. It returns obj
// unchanged when obj is not one valid JSON object.
func ReplaceMember(obj []byte, key string, value []byte) []byte {
	out, err := DeleteMember(obj, key)
	if err != nil {
		return obj
	}
	if out, err = SetMember(out, key, value); err != nil {
		return obj
	}
	return out
}

// AppendSetMember is SetMember appending the result to dst: it returns
// dst unchanged, with ErrNotObject, when obj is not one valid JSON object.
func AppendSetMember(dst, obj []byte, key string, value []byte) ([]byte, error) {
	l := New(obj)
	if !l.Lit("{") {
		return dst, ErrNotObject
	}
	var spans [][2]int // the value spans to replace
	empty := l.Lit("}")
	for !empty {
		raw, ok := l.key()
		if !ok || !l.Lit(":") {
			return dst, ErrNotObject
		}
		l.WS()
		start := l.i
		if !l.Skip() {
			return dst, ErrNotObject
		}
		if string(raw) == key {
			spans = append(spans, [2]int{start, l.i})
		}
		if l.Lit("}") {
			break
		}
		if !l.Lit(",") {
			return dst, ErrNotObject
		}
	}
	end := l.i // just past the closing brace
	if !l.End() {
		return dst, ErrNotObject
	}
	out := dst
	if len(spans) == 0 {
		out = append(out, obj[:end-1]...)
		if !empty {
			out = append(out, ',')
		}
		out = appendKey(out, key)
		out = append(out, value...)
		return append(out, obj[end-1:]...), nil
	}
	prev := 0
	for _, s := range spans {
		out = append(out, obj[prev:s[0]]...)
		out = append(out, value...)
		prev = s[1]
	}
	return append(out, obj[prev:]...), nil
}

// appendKey appends "key": for a key of plain printable ASCII, the only
// keys SetMember's callers set.
func appendKey(dst []byte, key string) []byte {
	dst = append(dst, '"')
	dst = append(dst, key...)
	return append(dst, '"', ':')
}

// DeleteMember returns obj, a JSON object, without every top-level member
// that encoding/json would decode into a struct field named key: whose
// key, unescaped, is key under Unicode case folding (strings.EqualFold,
// the rule encoding/json applies when no key matches exactly; so
// "Usage" and "us\u0061ge" go with "usage"). It returns obj itself when
// it has none; otherwise its other members' bytes as they were, separated
// by commas. It returns ErrNotObject when obj is not one valid JSON object.
func DeleteMember(obj []byte, key string) ([]byte, error) {
	l := New(obj)
	if !l.Lit("{") {
		return nil, ErrNotObject
	}
	type member struct {
		from, to int
		drop     bool
	}
	var members []member
	drops := 0
	if !l.Lit("}") {
		for {
			l.WS()
			from := l.i
			text, _, ok := l.keyText()
			if !ok || !l.Lit(":") || !l.Skip() {
				return nil, ErrNotObject
			}
			drop := strings.EqualFold(string(text), key)
			if drop {
				drops++
			}
			members = append(members, member{from, l.i, drop})
			if l.Lit("}") {
				break
			}
			if !l.Lit(",") {
				return nil, ErrNotObject
			}
		}
	}
	if !l.End() {
		return nil, ErrNotObject
	}
	if drops == 0 {
		return obj, nil
	}
	out := make([]byte, 0, len(obj))
	out = append(out, obj[:members[0].from]...)
	first := true
	for _, m := range members {
		if m.drop {
			continue
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, obj[m.from:m.to]...)
	}
	return append(out, obj[members[len(members)-1].to:]...), nil
}

// MayHaveMember reports whether obj could hold a member DeleteMember(obj,
// key) deletes, for key of ASCII letters: false only when no run of obj's
// bytes could spell key, in any letter case, through a \u escape, or with
// a letter's non-ASCII case-fold partner (U+017F for s, U+212A for k). It
// reads obj once, without parsing, so that a caller skips DeleteMember's
// parse on the chunks (nearly all) that hold no such member.
func MayHaveMember(obj []byte, key string) bool {
	if bytes.Contains(obj, []byte(`\u`)) ||
		strings.ContainsAny(key, "sS") && bytes.Contains(obj, []byte("\u017f")) ||
		strings.ContainsAny(key, "kK") && bytes.Contains(obj, []byte("\u212a")) {
		return true
	}
	first := key[0] | 0x20
	for i := 0; i+len(key) <= len(obj); i++ {
		if obj[i]|0x20 != first {
			continue
		}
		j := 1
		for j < len(key) && obj[i+j]|0x20 == key[j]|0x20 {
			j++
		}
		if j == len(key) {
			return true
		}
	}
	return false
}

// key consumes an object key and returns its raw content, or nil (which
// matches no key compared) when it holds escapes. It takes any bytes
// encoding/json takes, invalid UTF-8 included.
func (l *Lexer) key() ([]byte, bool) {
	raw, escaped, ok := l.rawKey()
	if escaped {
		return nil, ok
	}
	return raw, ok
}

// keyText consumes an object key and returns its text (unescaped) and its
// raw content (between the quotes, escapes as they are).
func (l *Lexer) keyText() (text, raw []byte, ok bool) {
	raw, escaped, ok := l.rawKey()
	if escaped {
		return Unquote(nil, raw), raw, ok
	}
	return raw, raw, ok
}

// rawKey consumes an object key and returns its raw content (between the
// quotes, escapes as they are) and whether it holds escapes.
func (l *Lexer) rawKey() (raw []byte, escaped, ok bool) {
	if l.Peek() != '"' {
		return nil, false, false
	}
	start := l.i + 1
	if !l.skipString() {
		return nil, false, false
	}
	raw = l.b[start : l.i-1]
	return raw, bytes.IndexByte(raw, '\\') >= 0, true
}

// Member returns the raw value of obj's top-level member key (compared
// byte for byte with the raw key; the last one when repeated), ok=false
// when there is none. It returns ErrNotObject when obj is not one valid
// JSON object.
func Member(obj []byte, key string) (value []byte, ok bool, err error) {
	start, end, n, err := MemberSpan(obj, key)
	if n == 0 || err != nil {
		return nil, false, err
	}
	return obj[start:end], true, nil
}

// MemberSpan is Member's value as its position in obj, obj[start:end],
// and n, the number of top-level members named key (0: none, and start
// and end are 0).
func MemberSpan(obj []byte, key string) (start, end, n int, err error) {
	l := New(obj)
	if !l.Lit("{") {
		return 0, 0, 0, ErrNotObject
	}
	if !l.Lit("}") {
		for {
			raw, good := l.key()
			if !good || !l.Lit(":") {
				return 0, 0, 0, ErrNotObject
			}
			l.WS()
			at := l.i
			if !l.Skip() {
				return 0, 0, 0, ErrNotObject
			}
			if string(raw) == key {
				start, end = at, l.i
				n++
			}
			if l.Lit("}") {
				break
			}
			if !l.Lit(",") {
				return 0, 0, 0, ErrNotObject
			}
		}
	}
	if !l.End() {
		return 0, 0, 0, ErrNotObject
	}
	return start, end, n, nil
}

// AmbiguousKey reports a top-level member of obj, a JSON object, that
// encoding/json would decode into a struct field named one of names but
// that is not exactly that name once (another case, an escape, or a
// repeat): the key as it reads unescaped, and bad true. A reader that
// takes names with encoding/json while obj travels on as it is (to an
// upstream whose parser matches keys exactly, as most do) refuses such a
// body: otherwise the two would read different values. scanned reports
// that obj was read to its end: with bad false and scanned false, obj is
// not a JSON object the scanner reads (invalid JSON or UTF-8, or nesting
// deeper than MaxDepth, which encoding/json accepts), and may still hold
// an ambiguous member after where the scan stopped.
func AmbiguousKey(obj []byte, names ...string) (key string, bad, scanned bool) {
	l := New(obj)
	if !l.Lit("{") {
		return "", false, false
	}
	if l.Lit("}") {
		return "", false, l.End()
	}
	var seen uint64 // bit i: names[i] read once, exactly (repeats are found for the first 64 names)
	for {
		text, raw, ok := l.keyText()
		if !ok || !l.Lit(":") || !l.Skip() {
			return "", false, false
		}
		for i, name := range names {
			if !strings.EqualFold(string(text), name) {
				continue
			}
			if string(raw) != name || seen&(1<<i) != 0 {
				return string(text), true, true
			}
			seen |= 1 << i
		}
		if l.Lit("}") {
			return "", false, l.End()
		}
		if !l.Lit(",") {
			return "", false, false
		}
	}
}
