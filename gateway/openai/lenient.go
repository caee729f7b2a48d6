package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"

	"github.com/tollgate-dev/tollgate/gateway/tap"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// ParseChunkLenient reads a chunk that ParseChunk refuses for the type of
// a field, as OpenAI-compatible servers write them, so that what reaches
// the client is still counted: "created" as a float (Python's
// time.time()), a text ("content", "reasoning_content", "reasoning",
// "refusal", "text") as an array of parts ({"type":"text","text":…}, as
// Mistral's reasoning models stream it), a tool call's "arguments" as an
// object, and token counts written as integral floats (11.0, 1.5e2) or as
// quoted integers. A field of another type is left out (a numeric "id"
// too: the usage beside it is still read). A usage object
// with a count that still cannot be read (a fraction, a negative, a
// string that is no integer, beyond int64) is no report: Usage is nil and
// UnreadableUsage is set, so that the writer withholds it from the client
// and the usage is estimated. It returns an error only for data that is
// not a JSON object, and ErrTooComplex for one of more JSON values than
// it decodes.
func ParseChunkLenient(data []byte) (*Chunk, error) {
	if values(data, maxLenientValues) > maxLenientValues {
		return nil, ErrTooComplex // each becomes a map, a slice or an interface: tens of bytes of heap
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("a chunk is a JSON object")
	}
	var unreadable bool
	if created, ok := m["created"].(json.Number); ok {
		if f, err := created.Float64(); err == nil && !math.IsInf(f, 0) && math.Abs(f) < 1<<62 {
			m["created"] = int64(f)
		}
	}
	if choices, ok := m["choices"].([]any); ok {
		for _, c := range choices {
			if c, ok := c.(map[string]any); ok {
				leniencies(c, "text")
				for _, k := range [2]string{"delta", "message"} {
					if msg, ok := c[k].(map[string]any); ok {
						leniencies(msg, "content", "reasoning_content", "reasoning", "refusal")
						leniencyCalls(msg)
					}
				}
			}
		}
	}
	// The usage member as encoding/json finds it: under any key that
	// folds to "usage" ("Usage", "ſsage"); one with a count that cannot be
	// read makes the whole report unreadable.
	var usageKeys []string
	for k := range m {
		if strings.EqualFold(k, "usage") {
			usageKeys = append(usageKeys, k)
		}
	}
	for _, k := range usageKeys {
		switch u := m[k].(type) {
		case nil:
		case map[string]any:
			unreadable = !leniencyCounts(u) || unreadable
		default:
			unreadable = true
		}
	}
	if unreadable {
		for _, k := range usageKeys {
			delete(m, k)
		}
	}
	// More than one usage member (as ParseChunk's AmbiguousUsage): the one
	// spelled exactly "usage" is the report, the map holding its last.
	ambiguous := len(usageKeys) > 1
	if len(usageKeys) == 1 { // a repeat the map kept once
		_, ambiguous, _ = jsonscan.AmbiguousKey(data, "usage")
	}
	if _, exact := m["usage"]; ambiguous && exact {
		for _, k := range usageKeys {
			if k != "usage" {
				delete(m, k)
			}
		}
	}
	fixed, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	c := new(Chunk)
	if err := json.Unmarshal(fixed, c); err != nil {
		// A field of a type not made right above (a numeric "id"): read
		// what can be, that field left out. encoding/json names only the
		// first such field, so the usage is trusted only as it reads on
		// its own: the one member left under a usage key, decoded alone
		// (a count of another type would have been left at 0).
		c = new(Chunk)
		_ = json.Unmarshal(fixed, c)
		c.Usage = nil
		if !unreadable && len(usageKeys) > 0 {
			c.Usage, unreadable = usageAlone(m, usageKeys)
		}
	}
	if len(c.Error) > 0 && bytes.Equal(c.Error, []byte("null")) {
		c.Error = nil
	}
	c.UnreadableUsage = unreadable
	c.AmbiguousUsage = ambiguous
	return c, nil
}

// usageAlone decodes the usage member that m, a chunk fixed by
// ParseChunkLenient, holds under one of keys (keys folding to "usage"),
// on its own: nil and unreadable false when there is none or it is null,
// nil and unreadable true when more than one remains (encoding/json's
// choice among them is not the report's) or it does not decode.
func usageAlone(m map[string]any, keys []string) (u *Usage, unreadable bool) {
	var v any
	n := 0
	for _, k := range keys {
		if val, ok := m[k]; ok {
			v, n = val, n+1
		}
	}
	switch {
	case n == 0 || n == 1 && v == nil:
		return nil, false
	case n > 1:
		return nil, true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, true
	}
	u = new(Usage)
	if err := json.Unmarshal(b, u); err != nil {
		return nil, true
	}
	return u, false
}

// leniencies makes each of obj's text fields a string: an array of parts
// becomes their texts joined; another type is dropped.
func leniencies(obj map[string]any, keys ...string) {
	for _, k := range keys {
		switch v := obj[k].(type) {
		case nil, string:
		case []any:
			var b strings.Builder
			for _, p := range v {
				switch p := p.(type) {
				case string:
					b.WriteString(p)
				case map[string]any:
					if t, ok := p["text"].(string); ok {
						b.WriteString(t)
					}
				}
			}
			obj[k] = b.String()
		default:
			delete(obj, k)
		}
	}
}

// leniencyCalls makes the names and arguments of a delta's or message's
// tool calls and function_call strings: arguments given as JSON (an
// object) become its text.
func leniencyCalls(msg map[string]any) {
	fix := func(f map[string]any) {
		if _, ok := f["name"].(string); !ok {
			delete(f, "name")
		}
		switch a := f["arguments"].(type) {
		case nil, string:
		default:
			if b, err := json.Marshal(a); err == nil {
				f["arguments"] = string(b)
			} else {
				delete(f, "arguments")
			}
		}
	}
	if f, ok := msg["function_call"].(map[string]any); ok {
		fix(f)
	}
	if calls, ok := msg["tool_calls"].([]any); ok {
		for _, tc := range calls {
			if tc, ok := tc.(map[string]any); ok {
				if f, ok := tc["function"].(map[string]any); ok {
					fix(f)
				}
				switch c := tc["custom"].(type) {
				case nil:
				case map[string]any:
					for _, k := range [2]string{"name", "input"} {
						if _, ok := c[k].(string); !ok {
							delete(c, k)
						}
					}
				default: // not a custom call's object: its bytes are not read as one
					delete(tc, "custom")
				}
			}
		}
	}
}

// leniencyCounts makes usage's counts (and its details' counts) integers,
// and reports false when one cannot be read as a count of 0 or more.
func leniencyCounts(u map[string]any) bool {
	ok := true
	for k, v := range u {
		switch v := v.(type) {
		case nil:
		case map[string]any:
			if strings.EqualFold(k, "prompt_tokens_details") || strings.EqualFold(k, "completion_tokens_details") {
				ok = leniencyCounts(v) && ok
			}
		case json.Number, string:
			n, good := count(v)
			if !good {
				if isCountField(k) {
					ok = false
				}
				delete(u, k)
				continue
			}
			u[k] = n
		default:
			if isCountField(k) {
				ok = false
			}
			delete(u, k)
		}
	}
	return ok
}

// isCountField reports whether k is a count the gateway reads from a
// usage object or its details.
func isCountField(k string) bool {
	for _, name := range [...]string{"prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens", "cache_write_tokens", "reasoning_tokens"} {
		if strings.EqualFold(k, name) { // as encoding/json matches it to a field
			return true
		}
	}
	return false
}

// count reads v (a JSON number, or a string holding one) as a count, as
// tap.ParseCount does.
func count(v any) (int64, bool) {
	switch v := v.(type) {
	case json.Number:
		return tap.ParseCount([]byte(v))
	case string:
		return tap.ParseCount([]byte(v))
	}
	return 0, false
}
