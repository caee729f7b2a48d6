package anthropic

import "github.com/tollgate-dev/tollgate/meter/usage/jsonscan"

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
	l := jsonscan.New(data)
	if !l.Lit(`{`) || !l.Lit(`"type"`) || !l.Lit(`:`) || !l.Lit(`"content_block_delta"`) || !l.Lit(`,`) ||
		!l.Lit(`"index"`) || !l.Lit(`:`) {
		return buf, false
	}
	index, ok := l.Uint()
	if !ok || !l.Lit(`,`) || !l.Lit(`"delta"`) || !l.Lit(`:`) || !l.Lit(`{`) || !l.Lit(`"type"`) || !l.Lit(`:`) {
		return buf, false
	}
	var typ, field string
	switch {
	case l.Lit(`"text_delta"`):
		typ, field = "text_delta", `"text"`
	case l.Lit(`"thinking_delta"`):
		typ, field = "thinking_delta", `"thinking"`
	case l.Lit(`"input_json_delta"`):
		typ, field = "input_json_delta", `"partial_json"`
	default:
		return buf, false
	}
	if !l.Lit(`,`) || !l.Lit(field) || !l.Lit(`:`) {
		return buf, false
	}
	buf, ok = l.Str(buf[:0])
	if !ok || !l.Lit(`}`) || !l.Lit(`}`) {
		return buf, false
	}
	if !l.End() {
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
