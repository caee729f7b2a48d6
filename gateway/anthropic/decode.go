package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// decode unmarshals raw into v; its errors name field (the request body
// when field is "") and the path below it.
func decode(raw []byte, v any, field string) error {
	err := json.Unmarshal(raw, v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		f := strings.Trim(field+"."+te.Field, ".")
		if f == "" {
			f = "request body"
		}
		return fmt.Errorf("%s: want %s, got %s", f, kindName(te.Type), te.Value)
	}
	if field == "" {
		field = "request body"
	}
	return fmt.Errorf("%s: %w", field, err)
}

// kindName names the JSON kind Go type t decodes from.
func kindName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint,
		reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "a number"
	}
	return t.String()
}

// kindOf returns the first byte of a JSON value ('"', '[', '{', 'n', ...),
// or 0 when raw is empty (the field was absent).
func kindOf(raw json.RawMessage) byte {
	if raw = bytes.TrimSpace(raw); len(raw) == 0 {
		return 0
	}
	return raw[0]
}
