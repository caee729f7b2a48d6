package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tollgate-dev/tollgate/ledger"
)

// maxBody is the largest request body the admin API reads, in bytes.
const maxBody = 1 << 20

// readBody reads r's body, at most maxBody bytes: a longer one is EInvalid
// saying so (it was cut, and refused as a JSON object ending too soon).
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err == nil && len(b) > maxBody {
		return nil, &ledger.Error{Code: ledger.EInvalid, Message: fmt.Sprintf("request body: larger than %d bytes (1 MiB)", maxBody)}
	}
	return b, err
}

// decodeOptional is decode for a body that may be empty.
func decodeOptional(r *http.Request, v any) error {
	b, err := readBody(r)
	var le *ledger.Error
	if errors.As(err, &le) {
		return err
	}
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	r.Body = io.NopCloser(bytes.NewReader(b))
	return decode(r, v)
}

// decode reads a JSON body into v, refusing unknown fields. Its EInvalid
// error names the field at fault first when there is one, and says what
// that field must be (bodyError).
func decode(r *http.Request, v any) error {
	b, err := readBody(r)
	var le *ledger.Error
	if errors.As(err, &le) {
		return err
	}
	if err == nil && !utf8.Valid(b) {
		// encoding/json reads each bad byte as U+FFFD: two idempotency
		// keys, "x\xfey" and "x\xffy", were one, where the header's is
		// refused.
		return &ledger.Error{Code: ledger.EInvalid, Message: "request body: is not valid UTF-8, as JSON must be"}
	}
	if err == nil {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err = dec.Decode(v); err == nil {
			if _, end := dec.Token(); end == io.EOF {
				if le := checkBodyValues(b); le != nil {
					return le
				}
				return nil
			}
			return &ledger.Error{Code: ledger.EInvalid, Message: "request body: must be one JSON object, with nothing after it"}
		}
	}
	return &ledger.Error{Code: ledger.EInvalid, Message: bodyError(b, reflect.TypeOf(v), err)}
}

// decimalFields are the body fields holding decimal strings (amounts,
// prices, limits, percentages), by their last name: a JSON number there is
// refused, and the error says so. TestDecimalFieldsMatchTheSpec keeps it
// in step with openapi.json.
var decimalFields = map[string]bool{
	"credit_limit": true, "daily_limit": true, "monthly_limit": true, "amount": true,
	"input": true, "cached_input": true, "cache_write": true, "output": true, "reasoning": true,
	"request_fee": true, "web_search": true, "discount_percent": true,
}

const mustBeTime = `must be an RFC 3339 time, like "2027-01-01T00:00:00Z"`

// bodyError is the message for err, from decoding body into a value of
// type t: "field: must be …" when a field is at fault. encoding/json names
// the field of a type mismatch but not of a time that does not parse, so
// that field is found by decoding body's fields one at a time.
func bodyError(body []byte, t reflect.Type, err error) string {
	var te *json.UnmarshalTypeError
	var pe *time.ParseError
	switch {
	case errors.As(err, &te) && te.Field == "":
		return "request body: must be a JSON object"
	case errors.As(err, &te):
		return te.Field + ": " + mustBe(te, rawAt(body, te.Field))
	case errors.As(err, &pe) || strings.HasPrefix(err.Error(), "Time.UnmarshalJSON"):
		if f := failingField(body, t); f != "" {
			return f + ": " + mustBeTime
		}
		return "request body: a time " + mustBeTime
	}
	if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return strings.Trim(f, `"`) + ": not a field of this request body"
	}
	var se *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF) && len(bytes.TrimSpace(body)) == 0:
		return "request body: empty; it must be a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "request body: not valid JSON: it ends before its object does"
	case errors.As(err, &se):
		return fmt.Sprintf("request body: not valid JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	}
	return "request body: " + err.Error()
}

// mustBe says what a field must be, from the type that did not take its
// value; raw is the field's value in the body, to tell a wrong element of
// an array (an array whose element did not fit) from a wrong value.
func mustBe(te *json.UnmarshalTypeError, raw json.RawMessage) string {
	leaf := te.Field[strings.LastIndex(te.Field, ".")+1:]
	what := kindOf(te.Type, leaf)
	if raw = bytes.TrimSpace(raw); len(raw) > 0 && raw[0] == '[' && te.Value != "array" && te.Type.Kind() != reflect.Slice {
		return "must be an array of " + pluralKind(what)
	}
	if n, ok := strings.CutPrefix(te.Value, "number "); ok && strings.Contains(what, "integer") &&
		!strings.ContainsAny(n, ".eE") && !strings.HasPrefix(n, "-") {
		return "must be " + what + ", and " + n + " is too large"
	}
	return "must be " + what
}

// kindOf names what a value of type t is, with an article ("an integer").
func kindOf(t reflect.Type, leaf string) string {
	if t == reflect.TypeFor[time.Time]() {
		return strings.TrimPrefix(mustBeTime, "must be ")
	}
	switch t.Kind() {
	case reflect.String:
		if decimalFields[leaf] {
			return `a decimal string, like "10.50"`
		}
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "an object"
	}
}

// pluralKind turns kindOf's "an integer" into "integers".
func pluralKind(what string) string {
	what = strings.TrimPrefix(strings.TrimPrefix(what, "an "), "a ")
	if head, rest, ok := strings.Cut(what, ","); ok {
		return head + "s," + rest
	}
	return what + "s"
}

// member returns the member of a JSON object named name, matched as
// encoding/json matches it (exactly, else without regard to case).
func member(obj []byte, name string) (json.RawMessage, bool) {
	var members map[string]json.RawMessage
	if json.Unmarshal(obj, &members) != nil {
		return nil, false
	}
	if v, ok := members[name]; ok {
		return v, true
	}
	for k, v := range members {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return nil, false
}

// rawAt returns the value at a dotted path of object names in body (nil
// when there is none).
func rawAt(body []byte, path string) json.RawMessage {
	v := json.RawMessage(body)
	for name := range strings.SplitSeq(path, ".") {
		var ok bool
		if v, ok = member(v, name); !ok {
			return nil
		}
	}
	return v
}

// failingField returns the dotted path of the first field of struct type t
// whose value in body does not decode on its own ("" when there is none).
func failingField(body []byte, t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return ""
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if f.Anonymous && name == "" {
			if sub := failingField(body, f.Type); sub != "" {
				return sub
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		raw, ok := member(body, name)
		if !ok || json.Unmarshal(raw, reflect.New(f.Type).Interface()) == nil {
			continue
		}
		if sub := failingField(raw, f.Type); sub != "" {
			return name + "." + sub
		}
		return name
	}
	return ""
}
