package journal

// The records of a gateway's own state, beside its requests': the hidden
// reasoning averages (kindHidden) and the spend charges (kindSpend), each
// record replacing the last, copied forward by compaction and by Open
// (carryStates).

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"strings"
	"time"
)

// spendPart bounds the charges one spend record holds: longer ones (a
// gateway with thousands of keys charged since their states) are
// journaled in parts, as one record past maxRecord is read back as
// corrupt.
const spendPart = 1 << 20

// appendState appends a record of kind (kindHidden or kindSpend), with
// no request id, of payload, sealed with seed.
func appendState(b []byte, kind uint8, payload []byte, seed uint32) []byte {
	start := len(b)
	b = appendHeader(b, kind, [16]byte{}, time.Now())
	b = append(b, payload...)
	finishRecord(b[start:], seed)
	return b
}

// appendHidden appends a hidden reasoning averages record of payload,
// sealed with seed.
func appendHidden(b, payload []byte, seed uint32) []byte {
	return appendState(b, kindHidden, payload, seed)
}

// appendSpend appends the records of the spend charges payload, sealed
// with seed: one record with no request id when it fits in spendPart,
// else parts of spendPart bytes, each with its index and the number of
// parts in its request id's first 8 bytes (big-endian), which recovery
// joins again (spendParts).
func appendSpend(b, payload []byte, seed uint32) []byte {
	if len(payload) <= spendPart {
		return appendState(b, kindSpend, payload, seed)
	}
	n := (len(payload) + spendPart - 1) / spendPart
	for i := range n {
		var id [16]byte
		binary.BigEndian.PutUint32(id[:], uint32(i))
		binary.BigEndian.PutUint32(id[4:], uint32(n))
		start := len(b)
		b = appendHeader(b, kindSpend, id, time.Now())
		b = append(b, payload[i*spendPart:min((i+1)*spendPart, len(payload))]...)
		finishRecord(b[start:], seed)
	}
	return b
}

// spendParts joins the parts of the spend charges recovery reads, in
// order (appendSpend).
type spendParts struct {
	joined   []byte
	next, of uint32
}

// add reads the spend record of id and payload, and returns the charges
// it completes: the payload of a whole record, the parts joined at the
// last of them, nil otherwise (or when they are not JSON: a part lost).
func (p *spendParts) add(id [16]byte, payload []byte) []byte {
	i, n := binary.BigEndian.Uint32(id[:]), binary.BigEndian.Uint32(id[4:])
	switch {
	case n == 0:
		p.joined, p.of = nil, 0
		return validJSON(payload)
	case i == 0:
		p.joined, p.next, p.of = append(p.joined[:0], payload...), 1, n
	case n == p.of && i == p.next:
		p.joined, p.next = append(p.joined, payload...), i+1
	default:
		p.joined, p.of = nil, 0
		return nil
	}
	if p.next < p.of {
		return nil
	}
	all := p.joined
	p.joined, p.of = nil, 0
	return validJSON(all)
}

// validJSON is a copy of b when it is JSON, else nil.
func validJSON(b []byte) []byte {
	if !json.Valid(b) {
		return nil
	}
	return bytes.Clone(b)
}

// states are the last of the records that hold a gateway's state rather
// than a request's: the hidden reasoning averages (nil: none) and the
// spend charges (nil: none).
type states struct {
	hidden map[string]int64
	spend  []byte
}

// decodeHidden reads a hidden reasoning record: tokens by model, as JSON
// integers. Releases before stop 29 wrote fractional averages (11.5):
// their whole part is taken, without floating point.
func decodeHidden(payload []byte) (map[string]int64, bool) {
	var raw map[string]json.Number
	if json.Unmarshal(payload, &raw) != nil {
		return nil, false
	}
	m := make(map[string]int64, len(raw))
	for model, n := range raw {
		whole, _, _ := strings.Cut(n.String(), ".")
		if v, err := strconv.ParseInt(whole, 10, 64); err == nil {
			m[model] = v // an exponent (5e-07, written for a tiny average) is skipped
		}
	}
	return m, true
}
