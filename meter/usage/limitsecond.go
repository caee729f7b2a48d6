package usage

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
)

// LimitSecond is one second of a key's minute on one gateway: the
// requests and tokens counted in it (LimitCounts.Seconds).
type LimitSecond struct {
	// Unix is the second, in Unix seconds on the counting gateway's clock
	// (the gateways' clocks are taken to agree, as NTP keeps them, to well
	// under a second).
	Unix     int64
	Requests int64
	Tokens   int64
}

// LimitCountsWire is LimitCounts as the gateways send it (encoding/json
// of this plain struct: a custom MarshalJSON made encoding/json compact
// and check its output again, a third of a limited request's publishing),
// its Seconds in "b": a string, the unpadded base64url of signed varints
// (encoding/binary), three a second: its Unix (after the first second, its
// distance from the one before), Requests and Tokens. As JSON numbers, 60
// seconds took 24 µs to decode, packed about 2.
type LimitCountsWire struct {
	KeyID    string `json:"k"`
	Requests int64  `json:"r"`
	Tokens   int64  `json:"t"`
	Open     int64  `json:"o"`
	Seq      uint64 `json:"s,omitempty"`
	Seconds  string `json:"b,omitempty"`
	Partial  bool   `json:"p,omitempty"`
}

// Wire returns c as sent, its Seconds packed.
func (c LimitCounts) Wire() LimitCountsWire {
	w := LimitCountsWire{KeyID: c.KeyID, Requests: c.Requests, Tokens: c.Tokens, Open: c.Open, Seq: c.Seq, Partial: c.Partial}
	if len(c.Seconds) > 0 {
		var buf [3 * binary.MaxVarintLen64]byte
		raw := make([]byte, 0, len(buf)*len(c.Seconds))
		prev := int64(0)
		for _, s := range c.Seconds {
			raw = binary.AppendVarint(raw, s.Unix-prev)
			raw = binary.AppendVarint(raw, s.Requests)
			raw = binary.AppendVarint(raw, s.Tokens)
			prev = s.Unix
		}
		w.Seconds = base64.RawURLEncoding.EncodeToString(raw)
	}
	return w
}

// MaxLimitSeconds is the most seconds one LimitCounts holds: a minute's.
const MaxLimitSeconds = 60

// Counts returns the LimitCounts w carries. It refuses what no gateway
// sends, since anything with NATS access can publish counts and every
// gateway adds them to a key's minute at each of its requests: seconds
// that do not decode, more than MaxLimitSeconds of them, seconds not in
// increasing order, and negative counts (which took a key past its limit).
func (w LimitCountsWire) Counts() (LimitCounts, error) {
	c := LimitCounts{KeyID: w.KeyID, Requests: w.Requests, Tokens: w.Tokens, Open: w.Open, Seq: w.Seq, Partial: w.Partial}
	if w.Requests < 0 || w.Tokens < 0 || w.Open < 0 {
		return c, fmt.Errorf("limit counts of %q: a negative count", w.KeyID)
	}
	if w.Seconds == "" {
		return c, nil
	}
	if base64.RawURLEncoding.DecodedLen(len(w.Seconds)) > 3*binary.MaxVarintLen64*MaxLimitSeconds {
		return c, fmt.Errorf("limit counts of %q: seconds: more than %d", w.KeyID, MaxLimitSeconds)
	}
	raw, err := base64.RawURLEncoding.DecodeString(w.Seconds)
	if err != nil {
		return c, fmt.Errorf("limit counts of %q: seconds: %w", w.KeyID, err)
	}
	c.Seconds = make([]LimitSecond, 0, min(len(raw)/3, MaxLimitSeconds)) // at least a byte a varint
	var v [3]int64
	prev := int64(0)
	for len(raw) > 0 {
		if len(c.Seconds) == MaxLimitSeconds {
			return c, fmt.Errorf("limit counts of %q: seconds: more than %d", w.KeyID, MaxLimitSeconds)
		}
		for i := range v {
			n := 0
			if v[i], n = binary.Varint(raw); n <= 0 {
				return c, fmt.Errorf("limit counts of %q: seconds: not [unix, requests, tokens] varints", w.KeyID)
			}
			raw = raw[n:]
		}
		if len(c.Seconds) > 0 && v[0] <= 0 || v[1] < 0 || v[2] < 0 {
			return c, fmt.Errorf("limit counts of %q: seconds: out of order, or a negative count", w.KeyID)
		}
		prev += v[0]
		c.Seconds = append(c.Seconds, LimitSecond{Unix: prev, Requests: v[1], Tokens: v[2]})
	}
	return c, nil
}
