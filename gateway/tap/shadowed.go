package tap

import (
	"encoding/json"
	"strings"
)

// AnyShadowed reports whether the JSON object obj has both the member
// field and another that encoding/json also reads as field (a key spelled
// with other case): which of them a tap's decode took, and which a
// client's SDK takes (the Python and JavaScript SDKs match keys exactly),
// may differ, so that {"text":"…400 words…","TEXT":""} is read by the tap
// as no text while the client shows the words. With within, it also
// reports whether within reports true of the value of any member read as
// field (each element's, for an array). A member spelled otherwise alone
// is read by the decode, so counted: it is not reported. A tap that finds
// a shadowed output field counts the whole chunk as output: never free,
// whatever a client reads.
func AnyShadowed(obj []byte, field string, within func([]byte) bool) bool {
	var members map[string]json.RawMessage
	if json.Unmarshal(obj, &members) != nil {
		return false
	}
	exact, other := false, false
	for k, v := range members {
		if !strings.EqualFold(k, field) {
			continue
		}
		exact, other = exact || k == field, other || k != field
		if exact && other {
			return true
		}
		if within == nil {
			continue
		}
		var elems []json.RawMessage
		if json.Unmarshal(v, &elems) != nil {
			elems = []json.RawMessage{v}
		}
		for _, e := range elems {
			if within(e) {
				return true
			}
		}
	}
	return false
}
