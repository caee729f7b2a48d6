package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/tollgate-dev/tollgate/ledger"
)

// checkBodyValues refuses (EInvalid) what encoding/json would read without
// a word but not as the client meant it, in a body that is valid JSON:
//   - a key given twice in one object, in any case (encoding/json matches
//     keys case-insensitively and keeps the last): {"amount":"1",
//     "amount":"2"} booked a credit of 2 where a proxy or a reviewer in
//     front read 1;
//   - the time 0001-01-01T00:00:00Z (in any offset), which decodes to Go's
//     zero time, the value of a time not given: an effective_at of it was
//     taken as now;
//   - a time with a "," before its second's fraction (commaFraction).
//
// It returns nil for a body it cannot read as JSON (decode says why).
func checkBodyValues(b []byte) *ledger.Error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	type object struct {
		keys map[string]bool
		key  bool // the next string token is a key
	}
	var stack []*object
	path := []string{}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // the end, or bad JSON: decode's to report
		}
		var top *object
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, &object{keys: map[string]bool{}, key: true})
				continue
			case '[':
				stack = append(stack, nil)
				continue
			default: // } or ]: the value of the enclosing key ends
				stack = stack[:len(stack)-1]
				if len(path) > 0 && len(stack) > 0 && stack[len(stack)-1] != nil {
					path = path[:len(path)-1]
					stack[len(stack)-1].key = true
				}
				continue
			}
		case string:
			if top != nil && top.key {
				k := foldKey(t)
				if top.keys[k] {
					return &ledger.Error{Code: ledger.EInvalid, Message: fmt.Sprintf("%s: given twice in one object; give it once", t)}
				}
				top.keys[k] = true
				top.key = false
				path = append(path, t)
				continue
			}
			field := "request body"
			if len(path) > 0 {
				field = path[len(path)-1]
			}
			if err := commaFraction(field, t); err != nil {
				return err
			}
			if at, err := time.Parse(time.RFC3339, t); err == nil && at.IsZero() {
				return &ledger.Error{Code: ledger.EInvalid, Message: fmt.Sprintf("%s: %s is the zero time, which reads as not given; give a later time (or, where the field is optional, leave it out)", field, t)}
			}
		}
		// A scalar value ends: the next token of its object is a key.
		if top != nil && !top.key {
			path = path[:len(path)-1]
			top.key = true
		}
	}
}

// foldKey maps a key to one spelling of every key encoding/json would
// match it to: each rune to the least rune of its Unicode simple-folding
// orbit (so s, S and ſ are one, as k, K and the Kelvin sign are).
func foldKey(k string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, k)
}

// commaFraction refuses (EInvalid naming field) s when it is an RFC 3339
// time but for a "," before its second's fraction, which Go's parser
// takes (ISO 8601 allows it) and RFC 3339, OpenAPI's date-time and every
// generated client do not: a time the API takes is one its clients can
// send back. It returns nil for any other string.
func commaFraction(field, s string) *ledger.Error {
	i := strings.IndexByte(s, ',')
	if i < 0 || !strings.Contains(s[:i], "T") {
		return nil
	}
	if _, err := time.Parse(time.RFC3339, s); err != nil {
		return nil
	}
	return &ledger.Error{Code: ledger.EInvalid, Message: fmt.Sprintf(`%s: %q writes a comma before the second's fraction; RFC 3339 writes a "." (%s)`,
		field, s, s[:i]+"."+s[i+1:])}
}
