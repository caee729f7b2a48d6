package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/tollgate-dev/tollgate/meter/usage"
	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// Attribution headers, accepted on every metered endpoint. They win over
// the body's fields, so an integrator can attribute requests whose bodies
// it does not build.
const (
	// HeaderEndUser names the end user a request is made for.
	HeaderEndUser = "X-Tollgate-End-User"
	// HeaderMetadata holds tags of the request: a JSON object of strings,
	// such as {"team":"search","feature":"autocomplete"}.
	HeaderMetadata = "X-Tollgate-Metadata"
)

// attribution is the end user and the tags a request names: the body's
// (endUser; the string values of metadata, a JSON object, others ignored,
// as they are not tags), then the headers'. A header beyond the bounds
// (usage.MaxEndUserLen and the metadata limits) or not what it should be
// is the client's error (400). The body's fields are the upstream's to
// judge: beyond the bounds they are cut when the event is made, and the
// cut is recorded on the event.
func attribution(r *http.Request, endUser string, metadata json.RawMessage) (string, map[string]string, error) {
	var tags map[string]string
	if len(metadata) > 0 {
		tags = bodyTags(metadata)
	}
	if h := r.Header.Values(HeaderEndUser); len(h) > 0 {
		if err := usage.CheckString(h[0], usage.MaxEndUserLen); err != nil {
			return "", nil, fmt.Errorf("%s: %v", HeaderEndUser, err)
		}
		endUser = h[0]
	}
	if h := r.Header.Values(HeaderMetadata); len(h) > 0 {
		var more map[string]string
		if err := json.Unmarshal([]byte(h[0]), &more); err != nil || more == nil {
			return "", nil, fmt.Errorf("%s: must be a JSON object of string values, such as {\"team\":\"search\"}", HeaderMetadata)
		}
		if len(more) > usage.MaxMetadataPairs {
			return "", nil, fmt.Errorf("%s: holds %d tags; at most %d are kept", HeaderMetadata, len(more), usage.MaxMetadataPairs)
		}
		if tags == nil {
			tags = make(map[string]string, len(more))
		}
		for k, v := range more {
			if err := usage.CheckString(k, usage.MaxMetadataKeyLen); err != nil {
				return "", nil, fmt.Errorf("%s: key %q %v", HeaderMetadata, k, err)
			}
			if err := usage.CheckString(v, usage.MaxMetadataValueLen); err != nil {
				return "", nil, fmt.Errorf("%s: value of %q %v", HeaderMetadata, k, err)
			}
			tags[k] = v
		}
	}
	return endUser, tags, nil
}

// stringField is a JSON string's value, or "" for anything else.
func stringField(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// bodyTags is the string members of metadata, a request body's metadata
// field, by key: a later duplicate wins, and a member whose last value is
// not a string is no tag. It is nil when metadata is not one JSON object
// (RFC 8259) or holds no string member. Values of other kinds, numbers
// beyond float64 included, are skipped whatever they hold.
//
// The lexer (jsonscan) reads the usual object without allocating beyond
// the tags; what it does not take (a string of invalid UTF-8, which
// encoding/json reads with U+FFFD in place of each bad byte; nesting
// deeper than jsonscan.MaxDepth) is read by encoding/json.
// TestBodyTagsMatchesEncodingJSON holds the two to the same tags.
func bodyTags(metadata []byte) map[string]string {
	if tags, ok := scanBodyTags(metadata); ok {
		return tags
	}
	return decodeBodyTags(metadata)
}

// scanBodyTags is bodyTags by the lexer; ok is false when metadata is not
// an object the lexer takes.
func scanBodyTags(metadata []byte) (tags map[string]string, ok bool) {
	l := jsonscan.New(metadata)
	if !l.Lit("{") {
		return nil, false
	}
	if !l.Lit("}") {
		var buf [64]byte
		key := buf[:0]
		for {
			if l.Peek() != '"' {
				return nil, false
			}
			if key, ok = l.Str(key[:0]); !ok || !l.Lit(":") {
				return nil, false
			}
			if l.Peek() == '"' {
				raw, escaped, ok := l.Span()
				if !ok {
					return nil, false
				}
				if escaped {
					raw = jsonscan.Unquote(nil, raw)
				}
				if tags == nil {
					tags = make(map[string]string)
				}
				tags[string(key)] = string(raw)
			} else {
				if !l.Skip() {
					return nil, false
				}
				delete(tags, string(key))
			}
			if l.Lit("}") {
				break
			}
			if !l.Lit(",") {
				return nil, false
			}
		}
	}
	if len(tags) == 0 {
		tags = nil // members that were strings, then were not
	}
	return tags, l.End()
}

// decodeBodyTags is bodyTags by encoding/json, as json.Unmarshal reads
// into a map[string]any but with numbers read as json.Number, so that
// none is out of range.
func decodeBodyTags(metadata []byte) map[string]string {
	d := json.NewDecoder(bytes.NewReader(metadata))
	d.UseNumber()
	var all map[string]any
	if d.Decode(&all) != nil || d.Decode(new(json.RawMessage)) != io.EOF {
		return nil // not one JSON object, alone
	}
	var tags map[string]string
	for k, v := range all {
		if s, ok := v.(string); ok {
			if tags == nil {
				tags = make(map[string]string, len(all))
			}
			tags[k] = s
		}
	}
	return tags
}
