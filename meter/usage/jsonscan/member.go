package jsonscan

import "errors"

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
	l := New(obj)
	if !l.Lit("{") {
		return nil, ErrNotObject
	}
	var spans [][2]int // the value spans to replace
	empty := l.Lit("}")
	for !empty {
		raw, ok := l.key()
		if !ok || !l.Lit(":") {
			return nil, ErrNotObject
		}
		l.WS()
		start := l.i
		if !l.Skip() {
			return nil, ErrNotObject
		}
		if string(raw) == key {
			spans = append(spans, [2]int{start, l.i})
		}
		if l.Lit("}") {
			break
		}
		if !l.Lit(",") {
			return nil, ErrNotObject
		}
	}
	end := l.i // just past the closing brace
	if !l.End() {
		return nil, ErrNotObject
	}
	out := make([]byte, 0, len(obj)+len(value)+len(key)+4)
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

// DeleteMember returns obj, a JSON object, without its top-level members
// named key (compared byte for byte with the raw key): obj itself when it
// has none; otherwise its other members' bytes as they were, separated by
// commas. It returns ErrNotObject when obj is not one valid JSON object.
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
			raw, ok := l.key()
			if !ok || !l.Lit(":") || !l.Skip() {
				return nil, ErrNotObject
			}
			drop := string(raw) == key
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

// key consumes an object key and returns its raw content, or nil (which
// matches no key compared) when it holds escapes. It takes any bytes
// encoding/json takes, invalid UTF-8 included.
func (l *Lexer) key() ([]byte, bool) {
	if l.Peek() != '"' {
		return nil, false
	}
	start := l.i + 1
	if !l.skipString() {
		return nil, false
	}
	raw := l.b[start : l.i-1]
	for _, c := range raw {
		if c == '\\' {
			return nil, true
		}
	}
	return raw, true
}

// Member returns the raw value of obj's top-level member key (compared
// byte for byte with the raw key; the last one when repeated), ok=false
// when there is none. It returns ErrNotObject when obj is not one valid
// JSON object.
func Member(obj []byte, key string) (value []byte, ok bool, err error) {
	l := New(obj)
	if !l.Lit("{") {
		return nil, false, ErrNotObject
	}
	if !l.Lit("}") {
		for {
			raw, good := l.key()
			if !good || !l.Lit(":") {
				return nil, false, ErrNotObject
			}
			l.WS()
			start := l.i
			if !l.Skip() {
				return nil, false, ErrNotObject
			}
			if string(raw) == key {
				value, ok = obj[start:l.i], true
			}
			if l.Lit("}") {
				break
			}
			if !l.Lit(",") {
				return nil, false, ErrNotObject
			}
		}
	}
	if !l.End() {
		return nil, false, ErrNotObject
	}
	return value, ok, nil
}
