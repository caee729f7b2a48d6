package jsonscan

import (
	"slices"
	"strings"
	"unicode"
)

// FoldedKey reports a member of an object anywhere in v, a JSON value,
// whose key encoding/json would match to the same struct field as
// another key of that object (the same text without regard to case, as
// strings.EqualFold has it, a repeat included): the key as it reads
// unescaped, and bad true. A reader that decodes v into structs with
// encoding/json reads the last of such members, while a parser that
// matches keys exactly, as most upstreams' do, reads another: a prompt's
// "content" and "Content" would be two texts. scanned reports that v was
// read to its end: with bad false and scanned false, v is not JSON the
// scanner reads (invalid JSON, or nesting deeper than MaxDepth), and may
// still hold such a member after where the scan stopped. The values of
// members whose key is exactly one of opaque (a tool's own arguments,
// read as written) are not looked into.
func FoldedKey(v []byte, opaque ...string) (key string, bad, scanned bool) {
	l := New(v)
	var keys [][]byte // the keys of the objects open, outermost first
	key, bad, ok := l.foldedValue(&keys, opaque, 0)
	if bad {
		return key, true, true
	}
	return "", false, ok && l.End()
}

// foldedValue consumes one value for FoldedKey; keys holds the keys of the
// objects around it, to be reused.
func (l *Lexer) foldedValue(keys *[][]byte, opaque []string, depth int) (key string, bad, ok bool) {
	if depth > MaxDepth {
		return "", false, false
	}
	switch l.Peek() {
	case '{':
		l.i++
		if l.Lit("}") {
			return "", false, true
		}
		from := len(*keys)
		defer func() { *keys = (*keys)[:from] }()
		for {
			text, _, ok := l.keyText()
			if !ok || !l.Lit(":") {
				return "", false, false
			}
			*keys = append(*keys, text)
			if slices.Contains(opaque, string(text)) {
				if !l.Skip() {
					return "", false, false
				}
			} else if k, bad, ok := l.foldedValue(keys, opaque, depth+1); bad || !ok {
				return k, bad, ok
			}
			if l.Lit("}") {
				k, bad := Folded((*keys)[from:])
				return k, bad, true
			}
			if !l.Lit(",") {
				return "", false, false
			}
		}
	case '[':
		l.i++
		if l.Lit("]") {
			return "", false, true
		}
		for {
			if k, bad, ok := l.foldedValue(keys, opaque, depth+1); bad || !ok {
				return k, bad, ok
			}
			if l.Lit("]") {
				return "", false, true
			}
			if !l.Lit(",") {
				return "", false, false
			}
		}
	}
	return "", false, l.Skip()
}

// Folded reports a key of keys, an object's, that is another of them
// without regard to case. Objects of many keys are compared through a map
// of their folded keys, so that a hostile object's keys do not cost their
// square.
func Folded(keys [][]byte) (string, bool) {
	if len(keys) <= 16 {
		for i, k := range keys {
			for _, s := range keys[:i] {
				if equalFold(s, k) {
					return string(k), true
				}
			}
		}
		return "", false
	}
	seen := make(map[string]struct{}, len(keys))
	for _, k := range keys {
		f := foldKey(k)
		if _, ok := seen[f]; ok {
			return string(k), true
		}
		seen[f] = struct{}{}
	}
	return "", false
}

func equalFold(a, b []byte) bool {
	if len(a) == len(b) && string(a) == string(b) {
		return true
	}
	return strings.EqualFold(string(a), string(b))
}

// foldKey is k with each rune replaced by the least rune of its case
// folding orbit (unicode.SimpleFold), so that keys strings.EqualFold
// matches have one foldKey.
func foldKey(k []byte) string {
	var b strings.Builder
	for _, r := range string(k) {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}
