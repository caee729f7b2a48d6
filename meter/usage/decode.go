package usage

import (
	"encoding/json"

	"github.com/tollgate-dev/tollgate/meter/usage/jsonscan"
)

// Decode decodes one usage event from JSON, exactly as
// json.Unmarshal(data, &e) does, in a fraction of its time: the meter
// worker's cost per event. It neither validates nor normalizes (see
// Event.Validate and Event.Normalize).
//
// A fast path reads the shape the gateway writes, with the shared
// jsonscan lexer: one object of the event's own keys, spelled exactly,
// each at most once, whose strings hold no escapes and whose numbers are
// integers. The event's strings all share one copy of data (one
// allocation per event), so an Event keeps the whole message alive while
// it lives. Any other input, valid or not, is handed to json.Unmarshal,
// whose result and error are returned: FuzzDecode checks that both ways
// agree.
func Decode(data []byte) (Event, error) {
	var e Event
	if decodeFast(data, &e) {
		return e, nil
	}
	var slow Event // a variable of its own, so that e stays off the heap
	err := json.Unmarshal(data, &slow)
	return slow, err
}

// The fields of Event and Tokens the fast path knows, as bits, to refuse a
// key that appears twice.
const (
	fVersion = 1 << iota
	fID
	fTime
	fCustomer
	fKey
	fProvider
	fModel
	fServed
	fEndpoint
	fStream
	fStatus
	fHTTPStatus
	fFinish
	fUsage
	fSource
	fTTFT
	fDuration
	fError
	fCorrections
	fEndUser
	fMetadata
	fDeployment
	fAttempt
	fRequestID
	fNotCharged
)

// eventDecoder reads the fast path's subset of JSON with a lexer over
// data, taking strings from s, one string copy of data.
type eventDecoder struct {
	l           jsonscan.Lexer
	data        []byte
	s           string
	seen, useen int
}

// once marks bit in set, failing if it was marked already.
func once(bit int, set *int) bool {
	if *set&bit != 0 {
		return false
	}
	*set |= bit
	return true
}

// str reads a string without escapes as a substring of d.s.
func (d *eventDecoder) str(bit int, dst *string) bool {
	if !once(bit, &d.seen) {
		return false
	}
	raw, escaped, ok := d.l.Span()
	if !ok || escaped {
		return false
	}
	end := d.l.Pos() - 1 // the closing quote
	*dst = d.s[end-len(raw) : end]
	return true
}

func (d *eventDecoder) int(bit int, set *int, dst *int64) bool {
	if !once(bit, set) {
		return false
	}
	n, ok := d.l.Int()
	*dst = n
	return ok
}

// object reads an object, calling member for each key (its raw bytes)
// with the lexer at its value; member returns false to give up.
func (d *eventDecoder) object(member func(key []byte) bool) bool {
	if !d.l.Lit("{") {
		return false
	}
	if d.l.Lit("}") {
		return true
	}
	for {
		key, escaped, ok := d.l.Span()
		if !ok || escaped || !d.l.Lit(":") || !member(key) {
			return false
		}
		if d.l.Lit("}") {
			return true
		}
		if !d.l.Lit(",") {
			return false
		}
	}
}

// metadata reads an object of strings into a new map, as json.Unmarshal
// does (a repeated key keeps its last value); a key or value with escapes
// leaves the fast path.
func (d *eventDecoder) metadata(dst *map[string]string) bool {
	m := map[string]string{}
	*dst = m
	return d.object(func(key []byte) bool {
		raw, escaped, ok := d.l.Span()
		if !ok || escaped {
			return false
		}
		end := d.l.Pos() - 1 // the closing quote
		m[string(key)] = d.s[end-len(raw) : end]
		return true
	})
}

func (d *eventDecoder) tokens(u *Tokens) func(key []byte) bool {
	return func(key []byte) bool {
		switch string(key) {
		case "prompt_tokens":
			return d.int(1<<0, &d.useen, &u.PromptTokens)
		case "cached_tokens":
			return d.int(1<<1, &d.useen, &u.CachedTokens)
		case "cache_write_tokens":
			return d.int(1<<2, &d.useen, &u.CacheWriteTokens)
		case "completion_tokens":
			return d.int(1<<3, &d.useen, &u.CompletionTokens)
		case "reasoning_tokens":
			return d.int(1<<4, &d.useen, &u.ReasoningTokens)
		case "web_search_requests":
			return d.int(1<<5, &d.useen, &u.WebSearchRequests)
		}
		return false
	}
}

// decodeFast decodes data into the zero e, or reports false (e then
// holds a partial result) for anything outside the fast path.
func decodeFast(data []byte, e *Event) bool {
	d := &eventDecoder{l: jsonscan.New(data), data: data, s: string(data)}
	var n int64
	var s string
	member := func(key []byte) bool {
		switch string(key) {
		case "v":
			ok := d.int(fVersion, &d.seen, &n)
			e.Version = int(n)
			return ok
		case "id":
			return d.str(fID, &e.ID)
		case "time":
			if !once(fTime, &d.seen) {
				return false
			}
			d.l.WS()
			start := d.l.Pos()
			if _, _, ok := d.l.Span(); !ok {
				return false
			}
			return e.Time.UnmarshalJSON(data[start:d.l.Pos()]) == nil
		case "customer_id":
			return d.str(fCustomer, &e.CustomerID)
		case "key_id":
			return d.str(fKey, &e.KeyID)
		case "provider":
			return d.str(fProvider, &e.Provider)
		case "model":
			return d.str(fModel, &e.Model)
		case "served_model":
			return d.str(fServed, &e.ServedModel)
		case "endpoint":
			return d.str(fEndpoint, &e.Endpoint)
		case "stream":
			if !once(fStream, &d.seen) {
				return false
			}
			switch {
			case d.l.Lit("true"):
				e.Stream = true
			case d.l.Lit("false"):
				e.Stream = false
			default:
				return false
			}
			return true
		case "status":
			ok := d.str(fStatus, &s)
			e.Status = Status(s)
			return ok
		case "http_status":
			ok := d.int(fHTTPStatus, &d.seen, &n)
			e.HTTPStatus = int(n)
			return ok
		case "finish_reason":
			return d.str(fFinish, &e.FinishReason)
		case "usage":
			return once(fUsage, &d.seen) && d.object(d.tokens(&e.Usage))
		case "usage_source":
			ok := d.str(fSource, &s)
			e.UsageSource = Source(s)
			return ok
		case "ttft_ms":
			return d.int(fTTFT, &d.seen, &e.TTFTMillis)
		case "duration_ms":
			return d.int(fDuration, &d.seen, &e.DurationMillis)
		case "error":
			return d.str(fError, &e.Error)
		case "corrections":
			return d.str(fCorrections, &e.Corrections)
		case "end_user":
			return d.str(fEndUser, &e.EndUser)
		case "metadata":
			return once(fMetadata, &d.seen) && d.metadata(&e.Metadata)
		case "deployment":
			return d.str(fDeployment, &e.Deployment)
		case "attempt":
			ok := d.int(fAttempt, &d.seen, &n)
			e.Attempt = int(n)
			return ok
		case "request_id":
			return d.str(fRequestID, &e.RequestID)
		case "not_charged":
			if !once(fNotCharged, &d.seen) {
				return false
			}
			switch {
			case d.l.Lit("true"):
				e.NotCharged = true
			case d.l.Lit("false"):
				e.NotCharged = false
			default:
				return false
			}
			return true
		}
		return false
	}
	return d.object(member) && d.l.End()
}
