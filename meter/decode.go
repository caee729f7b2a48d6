package meter

import (
	"encoding/json"
)

// DecodeEvent decodes one usage event from JSON, exactly as
// json.Unmarshal(data, &e) does, in a fraction of its time: the worker's
// cost per event. It does not validate (see Event.Validate).
//
// A fast path reads the shape the gateway writes: one object of the
// event's own keys, spelled exactly, each at most once, whose strings hold
// printable ASCII without escapes and whose numbers are integers. The
// event's strings all share one copy of data (one allocation per event),
// so an Event keeps the whole message alive while it lives. Any other
// input, valid or not, is handed to json.Unmarshal, whose result and
// error are returned: FuzzDecodeEvent checks that both ways agree.
func DecodeEvent(data []byte) (Event, error) {
	var e Event
	if decodeFast(data, &e) {
		return e, nil
	}
	var slow Event // a variable of its own, so that e stays off the heap
	err := json.Unmarshal(data, &slow)
	return slow, err
}

// The fields of Event and Usage the fast path knows, as bits, to refuse a
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
)

// eventScanner reads the fast path's subset of JSON from s (one string
// copy of the message), at i.
type eventScanner struct {
	s string
	i int
}

func (p *eventScanner) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// byte consumes c after optional white space.
func (p *eventScanner) byte(c byte) bool {
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string of printable ASCII without escapes and returns its
// contents.
func (p *eventScanner) str() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return p.s[start : p.i-1], true
		case c == '\\' || c < 0x20 || c >= 0x80:
			return "", false
		}
		p.i++
	}
	return "", false
}

// int reads a JSON integer that fits int64 (at most 18 digits).
func (p *eventScanner) int() (int64, bool) {
	p.ws()
	neg := p.i < len(p.s) && p.s[p.i] == '-'
	if neg {
		p.i++
	}
	start := p.i
	var v int64
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		v = v*10 + int64(p.s[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || digits > 18 || (digits > 1 && p.s[start] == '0') {
		return 0, false
	}
	if p.i < len(p.s) {
		switch p.s[p.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	if neg {
		v = -v
	}
	return v, true
}

func (p *eventScanner) bool() (bool, bool) {
	p.ws()
	switch {
	case len(p.s)-p.i >= 4 && p.s[p.i:p.i+4] == "true":
		p.i += 4
		return true, true
	case len(p.s)-p.i >= 5 && p.s[p.i:p.i+5] == "false":
		p.i += 5
		return false, true
	}
	return false, false
}

// object reads an object, calling member for each key with the scanner at
// its value; member returns false to give up.
func (p *eventScanner) object(member func(key string) bool) bool {
	if !p.byte('{') {
		return false
	}
	if p.byte('}') {
		return true
	}
	for {
		key, ok := p.str()
		if !ok || !p.byte(':') || !member(key) {
			return false
		}
		if p.byte('}') {
			return true
		}
		if !p.byte(',') {
			return false
		}
	}
}

// decodeFast decodes data into the zero e, or reports false (e then
// holds a partial result) for anything outside the fast path.
func decodeFast(data []byte, e *Event) bool {
	p := eventScanner{s: string(data)}
	var seen, useen int
	once := func(bit int, set *int) bool {
		if *set&bit != 0 {
			return false
		}
		*set |= bit
		return true
	}
	var ok bool
	str := func(bit int, dst *string) bool {
		if !once(bit, &seen) {
			return false
		}
		*dst, ok = p.str()
		return ok
	}
	i64 := func(bit int, set *int, dst *int64) bool {
		if !once(bit, set) {
			return false
		}
		*dst, ok = p.int()
		return ok
	}
	usage := func(key string) bool {
		u := &e.Usage
		switch key {
		case "prompt_tokens":
			return i64(1<<0, &useen, &u.PromptTokens)
		case "cached_tokens":
			return i64(1<<1, &useen, &u.CachedTokens)
		case "cache_write_tokens":
			return i64(1<<2, &useen, &u.CacheWriteTokens)
		case "completion_tokens":
			return i64(1<<3, &useen, &u.CompletionTokens)
		case "reasoning_tokens":
			return i64(1<<4, &useen, &u.ReasoningTokens)
		case "web_search_requests":
			return i64(1<<5, &useen, &u.WebSearchRequests)
		}
		return false
	}
	var n int64
	member := func(key string) bool {
		switch key {
		case "v":
			if !i64(fVersion, &seen, &n) {
				return false
			}
			e.Version = int(n)
			return true
		case "id":
			return str(fID, &e.ID)
		case "time":
			if !once(fTime, &seen) {
				return false
			}
			p.ws()
			start := p.i
			if _, ok := p.str(); !ok {
				return false
			}
			return e.Time.UnmarshalJSON(data[start:p.i]) == nil
		case "customer_id":
			return str(fCustomer, &e.CustomerID)
		case "key_id":
			return str(fKey, &e.KeyID)
		case "provider":
			return str(fProvider, &e.Provider)
		case "model":
			return str(fModel, &e.Model)
		case "served_model":
			return str(fServed, &e.ServedModel)
		case "endpoint":
			return str(fEndpoint, &e.Endpoint)
		case "stream":
			if !once(fStream, &seen) {
				return false
			}
			e.Stream, ok = p.bool()
			return ok
		case "status":
			return str(fStatus, &e.Status)
		case "http_status":
			if !i64(fHTTPStatus, &seen, &n) {
				return false
			}
			e.HTTPStatus = int(n)
			return true
		case "finish_reason":
			return str(fFinish, &e.FinishReason)
		case "usage":
			return once(fUsage, &seen) && p.object(usage)
		case "usage_source":
			return str(fSource, &e.UsageSource)
		case "ttft_ms":
			return i64(fTTFT, &seen, &e.TTFTMillis)
		case "duration_ms":
			return i64(fDuration, &seen, &e.DurationMillis)
		case "error":
			return str(fError, &e.Error)
		}
		return false
	}
	if !p.object(member) {
		return false
	}
	p.ws()
	return p.i == len(p.s)
}
